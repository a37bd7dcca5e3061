"""The test backstop (tests/harness/backstop.py) ends a test that outlives its timeout even when
the timeout's own exception does not end it, and names the test with every thread's stack."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

STUCK = """
import time
import pytest

@pytest.mark.timeout(1)
def test_stuck_after_its_timeout():
    try:
        time.sleep(60)
    except BaseException:
        time.sleep(60)  # a teardown that blocks again after the timeout fired
"""


def test_a_test_stuck_past_its_timeout_ends_named_with_its_stacks(tmp_path: Path) -> None:
    (tmp_path / "test_stuck.py").write_text(STUCK)
    env = {**os.environ, "DMROLLOUT_TEST_BACKSTOP_GRACE": "2", "PYTHONPATH": str(TESTS)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "harness.backstop", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), str(tmp_path / "test_stuck.py")],
        env=env, capture_output=True, text=True, timeout=50, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert "backstop: " in done.stderr and "test_stuck_after_its_timeout" in done.stderr
    assert "in test_stuck_after_its_timeout" in done.stderr  # the stuck frame is in the dump
