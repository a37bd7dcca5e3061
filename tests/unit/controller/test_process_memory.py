"""controller/serve/process_memory.py: the malloc arena cap of the worker and the controller."""

from __future__ import annotations

import subprocess
import sys

import pytest

from controller.serve.process_memory import limit_malloc_arenas


def test_an_operator_setting_in_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas() is False


def test_glibc_takes_the_cap() -> None:
    """In a fresh interpreter (the cap is process-wide): glibc accepts it (mallopt returns 1)."""
    code = "from controller.serve.process_memory import limit_malloc_arenas as f; print(f())"
    env = {"PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "True"


def test_the_command_never_loads_the_httpx_cli() -> None:
    """httpx would import its CLI (rich, click, pygments: ~5 MiB per process) because the
    development environment has them installed; ``dmrollout`` leaves it out."""
    code = (
        "import sys\nfrom controller.cli.main import main\nmain(['--version'])\n"
        "import httpx  # as the commands that reach a registry, a runtime or a watch do\n"
        "print('httpx' in sys.modules, 'rich' in sys.modules, 'click' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "True False False"
