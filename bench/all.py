"""`make bench`: every benchmark of the project in one run, one table side by side.

Runs each bench script (each starts its own local environment, measures, stops) with
``--json``, then prints every figure beside the figure before issue 14 and the floor or target
it is judged against. Prints numbers, asserts nothing; each script is bounded and stops by
itself. Run inside the test namespace (``make bench`` does):

    hack/in-netns.sh .venv/bin/python bench/all.py            # the whole run (~45 min)
    hack/in-netns.sh .venv/bin/python bench/all.py --quick    # a smoke run of each (~10 min)

The JSON of each script and the table go to ``build/bench/``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "bench"


@dataclass(frozen=True)
class Row:
    """One figure: where it comes from (script, JSON key), its unit, before and floor/target."""

    label: str
    script: str
    key: str
    unit: str
    before: str
    judge: str


ROWS: tuple[Row, ...] = (
    Row(
        "apply → Ready p50, 2 replicas, no eval",
        "overhead",
        "overhead_apply_ready_p50_s",
        "s",
        "4.79",
        "",
    ),
    Row("floor: plain Deployment + prefetch Job", "overhead", "overhead_floor_s", "s", "1.24", ""),
    Row("overhead: p50 - floor", "overhead", "overhead_s", "s", "3.55", "≤ 1 s"),
    Row(
        "history events, no evaluation", "history_events", "history_events_plain", "", "91", "≤ 45"
    ),
    Row(
        "history events, evaluation 50 cases",
        "history_events",
        "history_events_eval_50",
        "",
        "121",
        "flat",
    ),
    Row(
        "history events, evaluation 500 cases",
        "history_events",
        "history_events_eval_500",
        "",
        "121",
        "flat",
    ),
    Row("evaluation, 2 replicas at 50 ms", "evaluation", "eval_cases_per_s", "cases/s", "17.9", ""),
    Row(
        "runtime's limit (replicas x 1 / latency)",
        "evaluation",
        "eval_limit_cases_per_s",
        "cases/s",
        "40",
        "",
    ),
    Row("evaluation, % of the limit", "evaluation", "eval_percent_of_limit", "%", "45", "≥ 95 %"),
    Row(
        "evaluation + stable, 95 % intervals, % of the limit",
        "evaluation",
        "eval_with_intervals_percent_of_limit",
        "%",
        "",
        "≥ 95 %",
    ),
    Row("idle API req/s, 20 DMs", "idle_api", "idle_api_rps_20", "req/s", "3.6", ""),
    Row("idle API req/s, 100 DMs", "idle_api", "idle_api_rps_100", "req/s", "14.2", "≤ at 20"),
    Row(
        "idle controller CPU %, 100 DMs", "idle_api", "idle_controller_cpu_pct_100", "%", "6.5", ""
    ),
    Row("idle API req/s, 1000 DMs", "idle_api", "idle_api_rps_1000", "req/s", "133.9", "≤ at 20"),
    # Issue 23: before it, every reconcile listed visibility (~N/60 per second).
    Row(
        "idle Temporal req/s, 100 DMs",
        "idle_api",
        "idle_temporal_rps_100",
        "req/s",
        "~1.7",
        "≤ 0.1",
    ),
    Row(
        "idle Temporal req/s, 1000 DMs",
        "idle_api",
        "idle_temporal_rps_1000",
        "req/s",
        "~17",
        "≤ 0.1",
    ),
    Row(
        "idle controller CPU %, 1000 DMs",
        "idle_api",
        "idle_controller_cpu_pct_1000",
        "%",
        "55.3",
        "",
    ),
    *(
        row
        for size, before in (("20", "—"), ("100", "61"), ("300", "170 (280)"), ("1000", "785"))
        for row in (
            Row(f"fleet {size}: Ready", "fleet", f"fleet_{size}_ready", "", "", f"{size}"),
            Row(
                f"fleet {size}: all Ready",
                "fleet",
                f"fleet_{size}_all_ready_s",
                "s",
                before,
                "bounded",
            ),
            Row(
                f"fleet {size}: rollouts/min",
                "fleet",
                f"fleet_{size}_rollouts_per_min",
                "/min",
                "76" if size == "1000" else "",
                "",
            ),
            Row(
                f"fleet {size}: peak in flight",
                "fleet",
                f"fleet_{size}_peak_in_flight",
                "",
                "49" if size == "1000" else "",
                "",
            ),
            Row(
                f"fleet {size}: workflow-task timeouts",
                "fleet",
                f"fleet_{size}_wft_timeouts",
                "",
                "yes (600)" if size == "1000" else "",
                "0",
            ),
            Row(
                f"fleet {size}: longest workflow-task wait",
                "fleet",
                f"fleet_{size}_wft_wait_max_s",
                "s",
                "",
                "",
            ),
            Row(
                f"fleet {size}: controller RSS",
                "fleet",
                f"fleet_{size}_controller_rss_mib",
                "MiB",
                "155" if size == "1000" else "",
                "",
            ),
            Row(
                f"fleet {size}: worker RSS",
                "fleet",
                f"fleet_{size}_worker_rss_mib",
                "MiB",
                "165" if size == "1000" else "",
                "",
            ),
            Row(
                f"fleet {size}: controller + worker RSS",
                "fleet",
                f"fleet_{size}_rss_sum_mb",
                "MB",
                "336" if size == "1000" else "",
                "< 400 MB",
            ),
        )
    ),
)
# Arguments beyond --json/--quick: the fleet's budget per wave (2 cores queue best near 50).
EXTRA: dict[str, list[str]] = {
    "fleet": ["--sizes", "20,100,300,1000", "--budget", "0,100,50,50"],
    "idle_api": ["--sizes", "20,100,1000"],
}


def run_script(name: str, quick: bool) -> dict[str, object]:
    """Run ``bench/<name>.py`` and read its figures (empty when it could not run)."""
    out = OUT / f"{name}.json"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, str(ROOT / "bench" / f"{name}.py"), "--json", str(out)]
    if quick:
        cmd.append("--quick")
    else:
        cmd += EXTRA.get(name, [])
    print(f"== bench/{name}.py {'--quick' if quick else ''}", flush=True)
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, check=False)
    print(f"== bench/{name}.py: exit {done.returncode} in {time.monotonic() - started:.0f} s\n")
    if not out.exists():
        return {}
    figures: dict[str, object] = json.loads(out.read_text())
    return figures


def render(figures: dict[str, dict[str, object]]) -> str:
    lines = [f"{'measure':46} {'now':>14} {'before':>16}  floor/target"]
    for row in ROWS:
        value = figures.get(row.script, {}).get(row.key)
        shown = "not run" if value is None else _shown(value)
        now = f"{shown} {row.unit}".strip()
        lines.append(f"{row.label:46} {now:>14} {row.before:>16}  {row.judge}")
    return "\n".join(lines) + "\n"


def _earlier(name: str) -> dict[str, object]:
    """The figures an earlier run left in ``build/bench/`` for a script not run this time
    (``--only``), so the table stays whole; empty when there are none."""
    out = OUT / f"{name}.json"
    if not out.exists():
        return {}
    print(f"== bench/{name}.py not run: its figures of {_when(out)} from {out}")
    figures: dict[str, object] = json.loads(out.read_text())
    return figures


def _when(path: Path) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(path.stat().st_mtime))


def _shown(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run of each benchmark")
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated scripts to run (default: all); the table shows the others' "
        "figures from their last run in build/bench/",
    )
    parser.add_argument(
        "--table", action="store_true", help="run nothing: the table of the last figures"
    )
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    every = list(dict.fromkeys(row.script for row in ROWS))
    chosen = args.only.split(",") if args.only else every
    run = [] if args.table else [name for name in every if name in chosen]
    figures = {
        name: run_script(name, args.quick) if name in run else _earlier(name) for name in every
    }
    table = render(figures)
    (OUT / "table.txt").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
