"""Benchmark: fleets of DecisionModels applied at once, one wave per size (issue 14, point 5).

For each size (``--sizes 20,100,300,1000``) a fresh local environment, a ``dmrollout worker`` and
a ``dmrollout controller`` (real processes, as in the demo; ``--budget`` sets
``--max-concurrent-rollouts``), then N DecisionModels applied at once. Prints per wave: time to
all Ready (and first, median, p90), rollouts per minute, the peak number in flight (phase from
``kubectl get dm``) and queued (RolloutQueued), peak RSS and CPU seconds of the controller and
the worker (``/proc/<pid>/status`` VmHWM, ``/proc/<pid>/stat``), and the workflow-task timeouts
found in the rollouts' histories. The figures of issue 14 (before this work) are printed
beside. ``--supersede`` adds a second wave moving every model to a new version. Prints numbers,
asserts nothing, each wave bounded by ``--timeout``; stops by itself. Run inside the test
namespace:

    hack/in-netns.sh .venv/bin/python bench/fleet.py --sizes 100,300 --budget 300
    hack/in-netns.sh .venv/bin/python bench/fleet.py --quick --json /tmp/fleet.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_env import Product, apply_fleet, fleet_nodes, start_product
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch
from temporalio.api.enums.v1 import EventType, TimeoutType
from temporalio.client import Client

from localenv.env import LocalEnv

NAMESPACE = "fleet"
MAX_MODELS = 1000
SIZES = (20, 100, 300, 1000)
IN_FLIGHT = {"Resolving", "Caching", "Starting", "Evaluating", "AwaitingPromotion", "Promoting"}
GROUP, VERSION, PLURAL = "decisionmodel.io", "v1alpha1", "decisionmodels"
CLK_TCK = os.sysconf("SC_CLK_TCK")
# Issue 14's figures, measured before this work on the same kind of machine (2 cores).
PREVIOUS: dict[int, str] = {
    100: "61 s to all Ready, peak 37 in flight (budget 100)",
    300: "280 at once: 170 s to all Ready, ~100 rollouts/min (budget 300)",
    1000: "785 s to all Ready, ~76/min, peak 49 (budget 50); RSS controller 155 + worker 165 MiB",
}


@dataclass
class Usage:
    """CPU seconds since ``begin`` and peak RSS of one process, from /proc."""

    pid: int
    cpu_at_begin: float = 0.0

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime

    def begin(self) -> None:
        self.cpu_at_begin = self.cpu_seconds()

    def cpu_since_begin(self) -> float:
        return self.cpu_seconds() - self.cpu_at_begin

    def peak_rss_mib(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return 0.0


@dataclass
class Wave:
    """What one wave looked like from the DecisionModels' status, fed by a watch."""

    began: float
    names: set[str]
    done: Any  # (dm) -> bool
    ready_at: dict[str, float] = field(default_factory=dict)
    phases: dict[str, tuple[bool, bool]] = field(default_factory=dict)  # in flight, queued
    in_flight: int = 0
    queued: int = 0
    peak_in_flight: int = 0
    peak_queued: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    finished: threading.Event = field(default_factory=threading.Event)

    def see(self, dm: dict[str, Any]) -> None:
        name, st = dm["metadata"]["name"], dm.get("status") or {}
        phase = st.get("phase", "")
        queued = phase == "Pending" and any(
            c.get("reason") == "RolloutQueued" for c in st.get("conditions") or []
        )
        with self.lock:
            was_in_flight, was_queued = self.phases.get(name, (False, False))
            self.phases[name] = (phase in IN_FLIGHT, queued)
            self.in_flight += (phase in IN_FLIGHT) - was_in_flight
            self.queued += queued - was_queued
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            self.peak_queued = max(self.peak_queued, self.queued)
            if name in self.names and name not in self.ready_at and self.done(dm):
                self.ready_at[name] = time.monotonic()
                if len(self.ready_at) == len(self.names):
                    self.finished.set()

    def figures(self) -> dict[str, float]:
        took = sorted(t - self.began for t in self.ready_at.values())
        out: dict[str, float] = {
            "ready": len(took),
            "peak_in_flight": self.peak_in_flight,
            "peak_queued": self.peak_queued,
        }
        if took:
            out |= {
                "first_ready_s": took[0],
                "median_s": statistics.median(took),
                "p90_s": took[min(len(took) - 1, round(0.9 * (len(took) - 1)))],
                "all_ready_s": took[-1],
                "rollouts_per_min": 60 * len(took) / max(took[-1], 1e-9),
            }
        return out


def _watch(api: k8s.CustomObjectsApi, wave: Wave, deadline: float) -> None:
    """List, then watch the DecisionModels until the wave is done or the deadline passes."""
    while not wave.finished.is_set() and time.monotonic() < deadline:
        listed = api.list_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL)
        for dm in listed.get("items", []):
            wave.see(dm)
        w = k8s_watch.Watch()
        try:
            for event in w.stream(
                api.list_namespaced_custom_object,
                GROUP,
                VERSION,
                NAMESPACE,
                PLURAL,
                resource_version=listed["metadata"]["resourceVersion"],
                timeout_seconds=30,
            ):
                if event["type"] in ("ADDED", "MODIFIED"):
                    wave.see(event["object"])
                if wave.finished.is_set() or time.monotonic() >= deadline:
                    break
        except k8s.ApiException as e:
            if e.status != 410:  # expired resourceVersion: list again
                raise
        finally:
            w.stop()


async def _task_timeouts(address: str) -> dict[str, float]:
    """Workflow-task timeouts (and failures) in every rollout's history, and the longest wait
    of a workflow task from scheduled to started (how long the queue held it)."""
    client = await Client.connect(address)
    ids = [
        (wf.id, wf.run_id) async for wf in client.list_workflows("WorkflowType = 'RolloutWorkflow'")
    ]
    gate = asyncio.Semaphore(8)
    counts: dict[str, float] = {
        "rollouts": len(ids),
        "wft_wait_max_s": 0.0,
        "wft_timeouts": 0,
        "wft_timeouts_sticky": 0,  # schedule-to-start on a busy worker's sticky queue
        "wft_failures": 0,
        "events": 0,
    }

    async def one(wid: str, run_id: str) -> None:
        async with gate:
            handle = client.get_workflow_handle(wid, run_id=run_id)
            # From the first scheduling: a task re-scheduled after a timeout waited from there.
            scheduled: float | None = None
            async for event in handle.fetch_history_events():
                counts["events"] += 1
                at = event.event_time.ToMicroseconds() / 1e6
                if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
                    scheduled = at if scheduled is None else scheduled
                elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
                    if scheduled is not None:
                        counts["wft_wait_max_s"] = max(counts["wft_wait_max_s"], at - scheduled)
                    scheduled = None
                if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
                    counts["wft_timeouts"] += 1
                    kind = event.workflow_task_timed_out_event_attributes.timeout_type
                    counts["wft_timeouts_sticky"] += (
                        kind == TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START
                    )
                elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                    counts["wft_failures"] += 1

    await asyncio.gather(*(one(wid, run_id) for wid, run_id in ids))
    return counts


def _report(title: str, size: int, f: dict[str, float], budget: int) -> None:
    print(f"{title}: {int(f['ready'])}/{size} Ready")
    if "all_ready_s" in f:
        print(f"  first Ready                  {f['first_ready_s']:7.1f} s")
        print(f"  median                       {f['median_s']:7.1f} s")
        print(f"  p90                          {f['p90_s']:7.1f} s")
        print(f"  all Ready (whole wave)       {f['all_ready_s']:7.1f} s")
        print(f"  rollouts per minute          {f['rollouts_per_min']:7.1f}")
    limit = str(budget) if budget else "unlimited"
    print(f"  peak rollouts in flight      {int(f['peak_in_flight']):7d}   (budget {limit})")
    print(f"  peak queued (RolloutQueued)  {int(f['peak_queued']):7d}")


def run_size(
    size: int, budget: int, timeout: float, supersede: bool, state: Path
) -> dict[str, float]:
    """One fresh environment, ``size`` DecisionModels at once; the wave's flat figures."""
    t0 = time.monotonic()
    env = LocalEnv(state)
    env.cluster.nodes = fleet_nodes(size)
    figures: dict[str, float] = {"budget": budget, "nodes": len(env.cluster.nodes)}
    try:
        product = Product(controller_args=["--max-concurrent-rollouts", str(budget)])
        procs = start_product(env, state, NAMESPACE, product)
        cluster = env.cluster
        usage = {name: Usage(p.pid or 0) for name, p in procs.items()}
        api = k8s.CustomObjectsApi(k8s_config.new_client_from_config(str(cluster.kubeconfig)))
        print(f"[{size}] environment, worker and controller up in {time.monotonic() - t0:.1f} s")
        names = [f"model-{i:04d}" for i in range(size)]

        def ready(dm: dict[str, Any]) -> bool:
            return bool((dm.get("status") or {}).get("phase") == "Ready")

        for u in usage.values():
            u.begin()
        wave = Wave(began=time.monotonic(), names=set(names), done=ready)
        watcher = threading.Thread(
            target=_watch, args=(api, wave, wave.began + timeout), daemon=True
        )
        watcher.start()
        apply_fleet(env, NAMESPACE, names)
        watcher.join(timeout + 60)
        figures |= wave.figures()
        for name, u in usage.items():
            figures[f"{name}_cpu_s"] = u.cpu_since_begin()
            figures[f"{name}_rss_mib"] = u.peak_rss_mib()
        # The target is in MB (10^6 bytes); the per-process figures stay in MiB as before.
        figures["rss_sum_mb"] = sum(figures[f"{n}_rss_mib"] for n in usage) * 2**20 / 1e6
        _report(f"[{size}] first rollout of each DecisionModel (laya:en)", size, figures, budget)
        if supersede:
            _supersede(api, cluster, names, budget, timeout, figures)
        figures |= asyncio.run(_task_timeouts(env.temporal.address))
        for name in usage:
            print(
                f"  {name:<10} peak RSS {figures[f'{name}_rss_mib']:6.0f} MiB, "
                f"CPU {figures[f'{name}_cpu_s']:6.1f} s"
            )
        print(f"  controller + worker peak RSS {figures['rss_sum_mb']:.0f} MB (target < 400 MB)")
        print(
            f"  histories: {int(figures['rollouts'])} rollouts, "
            f"{int(figures['wft_timeouts'])} workflow-task timeouts "
            f"({int(figures['wft_timeouts_sticky'])} of them schedule-to-start), "
            f"{int(figures['wft_failures'])} workflow-task failures, "
            f"{figures['events'] / max(figures['rollouts'], 1):.0f} events per rollout; "
            f"a workflow task waited at most {figures['wft_wait_max_s']:.1f} s to start"
        )
        print(f"  before (issue 14): {PREVIOUS.get(size, '—')}")
        print(f"[{size}] whole run {time.monotonic() - t0:.1f} s (state and logs in {state})")
    finally:
        env.stop()
    return figures


def _supersede(
    api: k8s.CustomObjectsApi,
    cluster: Any,
    names: list[str],
    budget: int,
    timeout: float,
    figures: dict[str, float],
) -> None:
    listed = api.list_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL)["items"]
    stable = {
        dm["metadata"]["name"]: ((dm.get("status") or {}).get("stableRevision") or {}).get("hash")
        for dm in listed
    }

    def promoted(dm: dict[str, Any]) -> bool:
        st = dm.get("status") or {}
        now = (st.get("stableRevision") or {}).get("hash")
        return st.get("phase") == "Ready" and now not in (None, stable.get(dm["metadata"]["name"]))

    wave = Wave(began=time.monotonic(), names=set(names), done=promoted)
    watcher = threading.Thread(target=_watch, args=(api, wave, wave.began + timeout), daemon=True)
    watcher.start()
    for name in names:
        cluster.kubectl(
            "patch", "dm", name, "-n", NAMESPACE, "--type=merge",
            "-p", json.dumps({"spec": {"model": "laya:v2"}}),
        )  # fmt: skip
    watcher.join(timeout + 60)
    second = wave.figures()
    _report("  then every DecisionModel to laya:v2 (supersedes)", len(names), second, budget)
    figures |= {f"supersede_{k}": v for k, v in second.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default="20,100,300,1000", help=f"wave sizes, each ≤{MAX_MODELS}"
    )
    parser.add_argument("--models", type=int, default=None, help="one wave of this size")
    parser.add_argument(
        "--budget",
        default="0",
        help="--max-concurrent-rollouts (0 = none): one value, or one per size",
    )
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per wave")
    parser.add_argument("--supersede", action="store_true", help="then move every model")
    parser.add_argument("--quick", action="store_true", help="one wave of 20 (a smoke run)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.models is not None:
        sizes = [args.models]
    if args.quick:
        sizes = [20]
    sizes = [max(1, min(s, MAX_MODELS)) for s in sizes]
    budgets = [max(0, int(b)) for b in str(args.budget).split(",")]
    budgets = budgets * len(sizes) if len(budgets) == 1 else budgets
    out: dict[str, float] = {}
    for size, budget in zip(sizes, budgets, strict=True):
        state = Path(tempfile.mkdtemp(prefix=f"dmrollout-fleet-{size}-"))
        figures = run_size(size, budget, args.timeout, args.supersede, state)
        out |= {f"fleet_{size}_{k}": round(v, 2) for k, v in figures.items()}
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
        print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
