"""controller/process_memory.py: the malloc arena cap of the worker and the controller."""

from __future__ import annotations

import subprocess
import sys

import pytest

from controller.process_memory import limit_malloc_arenas


def test_an_operator_setting_in_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas() is False


def test_glibc_takes_the_cap() -> None:
    """In a fresh interpreter (the cap is process-wide): glibc accepts it (mallopt returns 1)."""
    code = "from controller.process_memory import limit_malloc_arenas as f; print(f())"
    env = {"PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "True"
