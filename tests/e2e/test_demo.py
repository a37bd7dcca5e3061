"""The README's first command works: `dmrollout demo --once` ends with the second revision
promoted. It runs in a network namespace of its own (nested in the test namespace), since it
starts a whole second local environment on the same fixed ports as the session's."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_demo_promotes_the_second_revision(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DMROLLOUT_NETNS"}
    result = subprocess.run(
        [str(REPO / "hack" / "in-netns.sh"), str(REPO / ".venv" / "bin" / "dmrollout"), "demo",
         "--once", "--state-dir", str(tmp_path / "demo")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )  # fmt: skip
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    assert "promoted laya:v2" in out, out[-4000:]
    assert "minAccuracy Passed: accuracy " in out and "maxAccuracyDrop Passed: accuracy drop" in out
    assert "Temporal UI:   http://127.0.0.1:8233/namespaces/default/workflows?query=" in out
    # Everything it started is stopped again.
    leftovers = subprocess.run(
        ["pgrep", "-f", str(tmp_path / "demo")], capture_output=True, text=True, check=False
    )
    assert leftovers.stdout.strip() == "", leftovers.stdout
