"""Benchmark: the post-promotion watch over many runs (issue 22's "Done when": 0 rollbacks in
20 runs with a scale-down or a Pod delete in the window; every injected gate failure rolls back).

One local environment, a ``dmrollout worker`` and a ``dmrollout controller`` (real processes, as
in the demo and the other benchmarks). Per scenario, ``--runs`` DecisionModels at once in their
own namespace, each with ``spec.rollout.postPromotionWatch`` (``--window``): Ready on
``laya:en``, then moved to ``laya:multilingual``; as soon as the new revision is promoted (the
previous one still running: the watch is on), the scenario's event is injected, the way
tests/e2e/controller/test_controller_watch.py does it:

- ``scale-down``: ``kubectl scale dm/<name> --replicas=1`` (3 → 1), what an HPA or an operator
  does right after a promotion; the promotion must be kept;
- ``pod-delete``: one Pod of the new revision deleted (its successor warms up while the watch
  looks); the promotion must be kept;
- ``digest``: every Pod of the new revision annotated ``sim.dmrollout.dev/digest`` (the runtime
  simulator then reports another digest, simulators/pod_faults.py): a real gate failure, which
  must switch the Service back (``failedRevision`` with reason PostPromotionGateFailed);
- ``silent``: every Pod of the new revision annotated ``sim.dmrollout.dev/unauthorized`` (401
  on every request: a runtime that does not answer) while the previous revision answers: must
  switch back at once, not after the probe-error window (issue 34).

A run is "rolled back" when ``status.failedRevision`` names the new revision; "kept" when the
watch ended (the previous revision's Pods deleted after it) with the new revision stable.
Measured with ``--quick`` (5 runs, watch period 5 s, error window 180 s; issue 34), the Service
switched back after the event: digest 9.8 s p50 / 13.4 s max and silent 188 s / 194 s before
the watch looked after Pod changes and compared with the previous revision; 2.0 s / 4.3 s and
2.0 s / 5.3-9.1 s after (the bench polls every 2 s); scale-down and Pod delete 0/5 rolled back.

Prints one table, the figures beside the goal, and the reason of every rollback where none was
expected. Prints numbers, asserts nothing; each scenario is bounded by ``--timeout``, stops by
itself and deletes its DecisionModels. Run inside the test namespace (``make bench-watch``):

    hack/in-netns.sh .venv/bin/python bench/watch_runs.py
    hack/in-netns.sh .venv/bin/python bench/watch_runs.py --quick --json /tmp/watch.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_env import Product, fleet_nodes, start_product

from localenv.env import LocalEnv

NAMESPACE = "watch"  # one namespace per scenario: watch-<scenario>
MAX_RUNS = 50
OLD_MODEL, NEW_MODEL = "laya:en", "laya:multilingual"
SIM_DIGEST = "sim.dmrollout.dev/digest=sha256:" + "e" * 64
SIM_SILENT = "sim.dmrollout.dev/unauthorized=true"
NAME_LABEL, REVISION_LABEL = "decisionmodel.io/name", "decisionmodel.io/revision"
POLL_SECONDS = 2.0
# The previous revision is deleted this long after the watch ended (the product's default).
PROMOTION_GRACE_SECONDS = 30


@dataclass(frozen=True)
class Scenario:
    key: str
    label: str
    replicas: int
    expect_rollback: bool

    @property
    def goal(self) -> str:
        return "all" if self.expect_rollback else "0"


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("scale_down", "scale-down 3→1 in the window", 3, False),
    Scenario("pod_delete", "one Pod deleted in the window", 3, False),
    Scenario("digest", "every Pod serving another digest", 2, True),
    Scenario("silent", "every Pod not answering (401)", 2, True),
)


@dataclass
class Run:
    """One DecisionModel through the scenario: Ready → new model → promoted → event → verdict."""

    name: str
    old: str | None = None
    new: str | None = None
    patched_at: float | None = None
    promoted_at: float | None = None
    injected_at: float | None = None
    # The previous revision's Pods were still there when the event was injected (the watch on).
    in_window: bool = False
    outcome: str = ""  # "rolled back", "kept", or "" (not finished)
    finished_at: float | None = None
    reason: str = ""
    message: str = ""
    phase: str = ""


@dataclass
class Result:
    scenario: Scenario
    runs: list[Run] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, outcome: str) -> int:
        return sum(r.outcome == outcome for r in self.runs)

    def figures(self) -> dict[str, float]:
        k = self.scenario.key
        after = [
            r.finished_at - r.injected_at
            for r in self.runs
            if r.outcome == "rolled back" and r.finished_at and r.injected_at
        ]
        delay = [
            r.injected_at - r.promoted_at for r in self.runs if r.injected_at and r.promoted_at
        ]
        out: dict[str, float] = {
            f"watch_{k}_runs": len(self.runs),
            f"watch_{k}_rolled_back": self.count("rolled back"),
            f"watch_{k}_kept": self.count("kept"),
            f"watch_{k}_unfinished": sum(not r.outcome for r in self.runs),
            f"watch_{k}_in_window": sum(r.in_window for r in self.runs),
            f"watch_{k}_seconds": round(self.seconds, 1),
        }
        if delay:
            out[f"watch_{k}_inject_delay_max_s"] = round(max(delay), 1)
        if after:
            out[f"watch_{k}_rollback_after_p50_s"] = round(statistics.median(after), 1)
            out[f"watch_{k}_rollback_after_max_s"] = round(max(after), 1)
        return out


def dm_doc(name: str, namespace: str, model: str, replicas: int, window: int) -> dict[str, Any]:
    return {
        "apiVersion": "decisionmodel.io/v1alpha1",
        "kind": "DecisionModel",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "model": model,
            "replicas": replicas,
            "rollout": {"postPromotionWatch": f"{window}s"},
        },
    }


class Bench:
    def __init__(self, env: LocalEnv, window: int, timeout: float) -> None:
        self.env = env
        self.window = window
        self.timeout = timeout

    def kubectl(self, *args: str, input: str | None = None) -> str:
        return self.env.cluster.kubectl(*args, input=input, timeout=120).stdout

    def listed(self, namespace: str, kind: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = json.loads(
            self.kubectl("-n", namespace, "get", kind, "-o", "json")
        )["items"]
        return items

    def apply(self, namespace: str, docs: list[dict[str, Any]]) -> None:
        if docs:
            self.kubectl(
                "-n",
                namespace,
                "apply",
                "-f",
                "-",
                input="\n---\n".join(json.dumps(d) for d in docs),
            )

    def run(self, scenario: Scenario, runs: int) -> Result:
        ns = f"{NAMESPACE}-{scenario.key.replace('_', '-')}"
        self.kubectl("create", "namespace", ns)
        result = Result(
            scenario, [Run(f"{scenario.key.replace('_', '-')}-{i:02d}") for i in range(runs)]
        )
        by_name = {r.name: r for r in result.runs}
        began = time.monotonic()
        deadline = began + self.timeout
        doc = {
            r.name: dm_doc(r.name, ns, OLD_MODEL, scenario.replicas, self.window)
            for r in result.runs
        }
        self.apply(ns, list(doc.values()))
        print(f"[{scenario.key}] {runs} DecisionModels applied in {ns}", flush=True)
        while time.monotonic() < deadline and any(not r.outcome for r in result.runs):
            time.sleep(POLL_SECONDS)
            self.step(scenario, ns, by_name, doc)
        result.seconds = time.monotonic() - began
        for r in result.runs:
            if not r.outcome:
                print(f"  {r.name}: not finished within {self.timeout:.0f} s (phase {r.phase})")
        # Cleanup: the DecisionModels go (the product deletes their objects), bounded.
        self.kubectl("-n", ns, "delete", "dm", "--all", "--wait=false")
        gone_by = time.monotonic() + 120
        while time.monotonic() < gone_by and (self.listed(ns, "dm") or self.listed(ns, "pods")):
            time.sleep(POLL_SECONDS)
        return result

    def step(
        self, scenario: Scenario, ns: str, by_name: dict[str, Run], doc: dict[str, dict[str, Any]]
    ) -> None:
        """One look at every DecisionModel and Pod of the scenario, then the batched actions."""
        now = time.monotonic()
        dms = {dm["metadata"]["name"]: dm for dm in self.listed(ns, "dm")}
        pods: dict[tuple[str, str], list[str]] = {}
        for pod in self.listed(ns, "pods"):
            labels = pod["metadata"].get("labels") or {}
            key = (labels.get(NAME_LABEL, ""), labels.get(REVISION_LABEL, ""))
            pods.setdefault(key, []).append(pod["metadata"]["name"])
        to_patch: list[Run] = []
        to_inject: list[Run] = []
        for name, r in by_name.items():
            if r.outcome or name not in dms:
                continue
            st = dms[name].get("status") or {}
            r.phase = st.get("phase", "")
            stable = (st.get("stableRevision") or {}).get("hash")
            failed = st.get("failedRevision") or {}
            if r.old is None:
                if r.phase == "Ready" and stable:
                    r.old = stable
                    to_patch.append(r)
                elif failed:
                    r.outcome, r.reason = "first rollout failed", str(failed.get("reason", ""))
                continue
            if r.new is None:
                if stable and stable != r.old:
                    r.new, r.promoted_at = stable, now
                    to_inject.append(r)
                elif failed:
                    r.outcome, r.finished_at = "promotion failed", now
                    r.reason, r.message = str(failed.get("reason", "")), str(failed.get("message"))
                continue
            if r.injected_at is None:
                continue
            if failed.get("hash") == r.new:
                r.outcome, r.finished_at = "rolled back", now
                r.reason, r.message = str(failed.get("reason", "")), str(failed.get("message"))
            elif not pods.get((name, r.old)) and stable == r.new:
                r.outcome, r.finished_at = "kept", now
        if to_patch:
            for r in to_patch:
                doc[r.name]["spec"]["model"] = NEW_MODEL
                r.patched_at = now
            self.apply(ns, [doc[r.name] for r in to_patch])
        if to_inject:
            for r in to_inject:
                r.in_window = bool(pods.get((r.name, r.old or "")))
            self.inject(scenario, ns, to_inject, pods)

    def inject(
        self, scenario: Scenario, ns: str, runs: list[Run], pods: dict[tuple[str, str], list[str]]
    ) -> None:
        """The scenario's event on every run just promoted, in one kubectl call."""
        if scenario.key == "scale_down":
            self.kubectl("-n", ns, "scale", *(f"dm/{r.name}" for r in runs), "--replicas=1")
        elif scenario.key == "pod_delete":
            victims = [
                sorted(pods[(r.name, r.new or "")])[0]
                for r in runs
                if pods.get((r.name, r.new or ""))
            ]
            if victims:
                self.kubectl("-n", ns, "delete", "pod", *victims, "--wait=false")
        else:
            fault = SIM_SILENT if scenario.key == "silent" else SIM_DIGEST
            names = [p for r in runs for p in pods.get((r.name, r.new or ""), [])]
            if names:
                self.kubectl("-n", ns, "annotate", "pod", *names, fault, "--overwrite")
        at = time.monotonic()
        for r in runs:
            r.injected_at = at


def render(results: list[Result], runs: int) -> str:
    """The table: rollbacks among the runs whose event came inside the watch, beside the goal;
    runs that never got there (a rollout failing before its promotion, a timeout) are named."""
    lines = [f"{f'post-promotion watch, {runs} runs each':44} {'rolled back':>11}   goal"]
    for res in results:
        s = res.scenario
        watched = [r for r in res.runs if r.in_window]
        shown = f"{sum(r.outcome == 'rolled back' for r in watched)}/{len(watched)}"
        missed = Counter(
            f"{r.outcome or 'unfinished'}{f': {r.reason}' if r.reason else ''}"
            for r in res.runs
            if not r.in_window
        )
        note = "; ".join(f"{n} {what}" for what, n in missed.items())
        row = f"{s.label:44} {shown:>11}   {s.goal:4}" + (f"  ({note})" if note else "")
        lines.append(row.rstrip())
    return "\n".join(lines)


def details(res: Result) -> list[str]:
    s = res.scenario
    f = res.figures()
    k = s.key
    out = [
        f"  {s.label}: {f[f'watch_{k}_rolled_back']:.0f} rolled back, {f[f'watch_{k}_kept']:.0f} "
        f"kept, {f[f'watch_{k}_unfinished']:.0f} unfinished; event inside the watch for "
        f"{f[f'watch_{k}_in_window']:.0f}/{len(res.runs)} (at most "
        f"{f.get(f'watch_{k}_inject_delay_max_s', float('nan')):.1f} s after the promotion was "
        f"seen); {res.seconds:.0f} s"
    ]
    if f"watch_{k}_rollback_after_p50_s" in f:
        out.append(
            f"    switched back {f[f'watch_{k}_rollback_after_p50_s']:.1f} s (p50), "
            f"{f[f'watch_{k}_rollback_after_max_s']:.1f} s (max) after the event"
        )
    reasons = Counter(r.reason for r in res.runs if r.outcome == "rolled back")
    if reasons:
        shown = ", ".join(f"{reason or '?'} x{n}" for reason, n in reasons.most_common())
        out.append(f"    failedRevision reasons: {shown}")
    for r in res.runs:
        unexpected = (r.outcome == "rolled back") != s.expect_rollback
        if (r.outcome and unexpected) or r.outcome not in ("", "kept", "rolled back"):
            out.append(f"    {r.name}: {r.outcome} ({r.reason}) {r.message}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help=f"runs per scenario (≤{MAX_RUNS})")
    parser.add_argument(
        "--window", type=int, default=60, help="spec.rollout.postPromotionWatch, seconds (≥60)"
    )
    parser.add_argument(
        "--period", type=int, default=5, help="the controller's watch period, seconds (1-300)"
    )
    parser.add_argument("--timeout", type=float, default=600, help="seconds per scenario")
    parser.add_argument(
        "--scenarios",
        default=",".join(s.key for s in SCENARIOS),
        help="comma-separated, of " + ", ".join(s.key for s in SCENARIOS),
    )
    parser.add_argument("--quick", action="store_true", help="5 runs per scenario (a smoke run)")
    parser.add_argument("--keep-state", action="store_true", help="keep the state and logs")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    runs = max(1, min(5 if args.quick else args.runs, MAX_RUNS))
    window = max(60, min(args.window, 86400))
    period = max(1, min(args.period, 300))
    chosen = [s for s in SCENARIOS if s.key in {k.strip() for k in args.scenarios.split(",")}]
    t0 = time.monotonic()
    state = Path(tempfile.mkdtemp(prefix="dmrollout-watch-"))
    env = LocalEnv(state)
    # Two revisions of every DecisionModel run side by side during the window.
    env.cluster.nodes = fleet_nodes(runs * max(s.replicas for s in SCENARIOS) * 2)
    results: list[Result] = []
    try:
        product = Product(
            controller_env={
                "DMROLLOUT_CONTROLLER_POST_PROMOTION_WATCH_PERIOD_SECONDS": str(period),
                "DMROLLOUT_CONTROLLER_PROMOTION_GRACE_SECONDS": str(PROMOTION_GRACE_SECONDS),
            }
        )
        start_product(env, state, NAMESPACE, product)
        print(f"environment, worker and controller up in {time.monotonic() - t0:.1f} s", flush=True)
        print(
            f"settings: postPromotionWatch {window}s, watch period {period} s, promotion grace "
            f"{PROMOTION_GRACE_SECONDS} s, {runs} DecisionModels at once per scenario, "
            f"{OLD_MODEL} → {NEW_MODEL}, scenarios one after another",
            flush=True,
        )
        bench = Bench(env, window, args.timeout)
        for scenario in chosen:
            results.append(res := bench.run(scenario, runs))
            print("\n".join(details(res)), flush=True)
    finally:
        env.stop()
    print()
    print(render(results, runs))
    print(f"(window {window}s, watch period {period} s; whole run {time.monotonic() - t0:.0f} s)")
    figures: dict[str, float] = {"watch_window_s": window, "watch_period_s": period}
    for res in results:
        figures |= res.figures()
    surprising = any(
        (r.outcome == "rolled back") != res.scenario.expect_rollback or not r.in_window
        for res in results
        for r in res.runs
    )
    if args.keep_state or surprising:
        print(f"state and logs in {state}")
    else:
        shutil.rmtree(state, ignore_errors=True)
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
        print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
