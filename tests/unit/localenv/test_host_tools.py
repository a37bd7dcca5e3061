"""Every program the project runs is installed by its own files (issue 34, item 1).

A fresh machine failed `make test` on `iptables`, which the machine it was written on happened to
have. This test reads the code for the programs it starts and checks each is either built or
installed by the project (the control-plane cache, the virtualenv's console scripts) or listed in
hack/host-tools.txt, which `make doctor` checks and `make host-tools` installs."""

from __future__ import annotations

import re
from pathlib import Path

from localenv.paths import CONTROL_PLANE_BINARIES, REPO_ROOT

# Started by name through subprocess or looked up on PATH; a list's first string is the program.
_STARTS = re.compile(r"subprocess\.\w+\(\s*\[\s*\"([\w.-]+)\"|shutil\.which\(\"([\w.-]+)\"\)")
# Brought by the machine itself (README: Python 3.11+, Go 1.26+) or by the virtualenv.
_MACHINE = {"bash", "python3", "go", "sudo", "apt-get", "env"}
_VENV = {"temporal", "kubectl", "pip", "pytest", "dmrollout"}
_SCANNED = ("localenv", "tests", "bench", "controller", "activities", "kube", "hack")


def _listed() -> set[str]:
    lines = (REPO_ROOT / "hack" / "host-tools.txt").read_text().splitlines()
    return {line.split()[0] for line in lines if line.strip() and not line.startswith("#")}


def _started_by_python() -> dict[str, str]:
    found: dict[str, str] = {}
    for folder in _SCANNED:
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            if path.name == Path(__file__).name:
                continue
            for match in _STARTS.finditer(path.read_text()):
                found.setdefault(match.group(1) or match.group(2), str(path.relative_to(REPO_ROOT)))
    return found


def test_every_program_the_python_code_starts_is_installed_by_the_project() -> None:
    known = _listed() | _MACHINE | _VENV | set(CONTROL_PLANE_BINARIES)
    unknown = {p: where for p, where in _started_by_python().items() if p not in known}
    assert not unknown, f"add to hack/host-tools.txt (program, Debian package): {unknown}"


def test_the_image_and_netns_scripts_programs_are_listed() -> None:
    # The scripts run before any Python does; their programs are named here by hand.
    for script, programs in {
        "hack/in-netns.sh": {"unshare", "ip"},
        "hack/image.sh": {"mmdebstrap", "buildah", "podman"},
        "hack/testenv.sh": {"flock", "sha256sum"},
    }.items():
        text = (REPO_ROOT / script).read_text()
        assert all(re.search(rf"\b{p}\b", text) for p in programs), script
        assert programs <= _listed(), f"{script}: {programs - _listed()} not in hack/host-tools.txt"


def test_the_scan_sees_a_program_started_by_subprocess() -> None:
    # The scan itself could silently match nothing; it must see the chaos fault's iptables.
    assert _started_by_python().get("iptables") == "localenv/cgroups.py"


def test_the_install_script_installs_every_listed_program_of_its_need() -> None:
    script = (REPO_ROOT / "hack" / "install-host-tools.sh").read_text()
    for need in ("test", "image"):
        block = re.search(rf"^\s*{need}\) programs=\(([^)]*)\)", script, re.M)
        install = re.search(
            rf"^\s*{need}\) \$sudo apt-get install -y -q --no-install-recommends (.*) ;;$",
            script,
            re.M,
        )
        assert block is not None and install is not None, need
        programs, packages = block.group(1).split(), install.group(1).split()
        for line in (REPO_ROOT / "hack" / "host-tools.txt").read_text().splitlines():
            if line.strip() and not line.startswith("#") and line.split()[2] == need:
                program, package = line.split()[:2]
                assert program in programs and package in packages, (need, program, package)
