"""The chaos cells' cgroup join (localenv/cgroups.py): the process writes its own pid into
each group before it becomes the command, so every socket it makes carries the group's label
(iptables -m cgroup) and every page it touches is charged to the group's memory limit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from localenv.cgroups import WorkerCgroup


def test_the_command_joins_every_group_first_then_runs_with_its_own_arguments(
    tmp_path: Path,
) -> None:
    memory, unified = tmp_path / "memory", tmp_path / "unified"
    for group in (memory, unified):
        group.mkdir()
        (group / "cgroup.procs").write_text("")
    cgroup = WorkerCgroup("cell")
    argv = cgroup.join_argv([sys.executable, "-c", "import os,sys; print(os.getpid(), sys.argv)"])
    argv[4:6] = [str(memory), str(unified)]  # the test's stand-ins for the two hierarchies
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout
    pid, args = out.split(" ", 1)
    assert (memory / "cgroup.procs").read_text().strip() == pid
    assert (unified / "cgroup.procs").read_text().strip() == pid
    assert args.strip() == "['-c']"  # "--" and the groups are not the command's arguments
