"""The gates' error rates at their thresholds (issue 35), the fast subset CI runs: every cell of
``bench/gate_errors.py --quick`` within its bound, and the table printed at the end of the run
(build/gate-errors.txt). ``make bench-gates`` runs the full table (4,000 runs per cell)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from harness import run_summaries
from harness.run_summaries import Summary

ROOT = Path(__file__).resolve().parents[3]


def test_every_gate_errs_at_its_threshold_no_more_often_than_confidence_allows(
    pytestconfig: pytest.Config,
) -> None:
    found = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gate_errors.py"), "--quick"],
        cwd=ROOT, capture_output=True, text=True, timeout=540, check=False,
    )  # fmt: skip
    run_summaries.add(
        pytestconfig, Summary("gate error rates (quick)", found.stdout, "build/gate-errors.txt")
    )
    assert found.returncode == 0, found.stdout + found.stderr
    assert " 0 cell(s) over" in f" {found.stdout.splitlines()[-1]}"
