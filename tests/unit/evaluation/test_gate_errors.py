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


def quick_bench(config: pytest.Config, script: str, title: str, out: str) -> str:
    """Run ``bench/<script> --quick``, keep its table for the run's summary, and return it;
    the bench exits non-zero when a cell it holds to its bound is over."""
    found = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--quick"],
        cwd=ROOT, capture_output=True, text=True, timeout=540, check=False,
    )  # fmt: skip
    run_summaries.add(config, Summary(title, found.stdout, out))
    assert found.returncode == 0, found.stdout + found.stderr
    return found.stdout


def test_every_gate_errs_at_its_threshold_no_more_often_than_confidence_allows(
    pytestconfig: pytest.Config,
) -> None:
    table = quick_bench(
        pytestconfig, "gate_errors.py", "gate error rates (quick)", "build/gate-errors.txt"
    )
    assert " 0 cell(s) over" in f" {table.splitlines()[-1]}"


def test_sequential_gates_hold_under_looks_and_retries(pytestconfig: pytest.Config) -> None:
    """``bench/gate_looks.py --quick``: each always-valid gate stays within its bound with a look
    after every case and with retries that continue its ledger (the fixed-n rows beside it go
    over, which is why it exists)."""
    table = quick_bench(pytestconfig, "gate_looks.py", "gate looks (quick)", "build/gate-looks.txt")
    for gate in ("minAccuracy", "maxAccuracyDrop", "maxNegativeFlipRate", "maxECE", "slices"):
        assert f"{gate} " in table and "sequential, every case" in table
    assert not [line for line in table.splitlines() if line.endswith("  OVER")]
