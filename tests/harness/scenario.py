"""A scenario of several clusters (``localenv.pipeline_demo``, ``localenv.pipeline_fanout``)
run from a test: in a network namespace and a process group of its own, bounded whole."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_scenario(args: list[str], seconds: float) -> subprocess.CompletedProcess[str]:
    """Run it in a process group of its own; on timeout the whole group is stopped (the
    clusters, Temporal and the product processes it started), nothing left behind."""
    # A fresh namespace of its own (DMROLLOUT_NETNS unset): the test's namespace already holds
    # the session's local environment on the default ports.
    env = {**os.environ, "DMROLLOUT_NETNS": ""}
    proc = subprocess.Popen(
        args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, env=env,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)  # the scenario stops what it started
        try:
            out, err = proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
    return subprocess.CompletedProcess(args, proc.returncode, out, err)
