"""`make bench`: every benchmark of the project in one run, one table side by side.

Runs each bench script (each starts its own local environment, measures, stops) with
``--json``, then prints every figure beside the figure before issue 14 and the floor or target
it is judged against. Prints numbers, asserts nothing; each script is bounded and stops by
itself. Run inside the test namespace (``make bench`` does):

    hack/in-netns.sh .venv/bin/python bench/all.py            # the whole run (~40 min)
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
    Row("apply → Ready p50, 2 replicas, no eval", "overhead", "p50_s", "s", "4.79", ""),
    Row("floor: plain Deployment + prefetch Job", "overhead", "floor_s", "s", "1.24", ""),
    Row("overhead: p50 - floor", "overhead", "overhead_s", "s", "3.55", "≤ 1 s"),
    Row("history events, no evaluation", "history_events", "events_no_eval", "", "91", "≤ 45"),
    Row("history events, 50 cases", "history_events", "events_eval_50", "", "121", "flat"),
    Row("history events, 500 cases", "history_events", "events_eval_500", "", "121", "flat"),
    Row("evaluation throughput", "evaluation", "cases_per_s", "cases/s", "17.9", ""),
    Row(
        "runtime's limit (replicas x conc. / latency)",
        "evaluation",
        "limit_cases_per_s",
        "cases/s",
        "40",
        "",
    ),
    Row("evaluation, % of the limit", "evaluation", "percent_of_limit", "%", "45", "≥ 95 %"),
    Row("idle API req/s, 20 DMs", "idle_api", "req_per_s_20", "req/s", "3.6", ""),
    Row("idle API req/s, 100 DMs", "idle_api", "req_per_s_100", "req/s", "14.2", "≤ at 20"),
    Row("fleet 20: all Ready", "fleet", "all_ready_s_20", "s", "—", ""),
    Row("fleet 100: all Ready", "fleet", "all_ready_s_100", "s", "61", ""),
    Row("fleet 300: all Ready", "fleet", "all_ready_s_300", "s", "170 (280)", ""),
    Row("fleet 1000: all Ready", "fleet", "all_ready_s_1000", "s", "785 (budget 50)", "bounded"),
    Row("fleet 1000: rollouts/min", "fleet", "per_min_1000", "/min", "76", ""),
    Row("fleet 1000: peak in flight", "fleet", "peak_in_flight_1000", "", "49", ""),
    Row("fleet 1000: workflow-task timeouts", "fleet", "wft_timeouts_1000", "", "yes (600)", "0"),
    Row("fleet 1000: RSS controller + worker", "fleet", "rss_mib_1000", "MiB", "320", "< 400 MB"),
)


def run_script(name: str, quick: bool) -> dict[str, object]:
    """Run ``bench/<name>.py`` and read its figures (empty when it could not run)."""
    out = OUT / f"{name}.json"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, str(ROOT / "bench" / f"{name}.py"), "--json", str(out)]
    if quick:
        cmd.append("--quick")
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


def _shown(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run of each benchmark")
    parser.add_argument("--only", default="", help="comma-separated scripts to run (default: all)")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    scripts = list(dict.fromkeys(row.script for row in ROWS))
    if args.only:
        scripts = [s for s in scripts if s in args.only.split(",")]
    figures = {name: run_script(name, args.quick) for name in scripts}
    table = render(figures)
    (OUT / "table.txt").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
