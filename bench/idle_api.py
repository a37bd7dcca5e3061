"""Benchmark: what an idle controller costs the API server, at N DecisionModels (issue 14, point 2).

Starts the local environment, a ``dmrollout worker`` and a ``dmrollout controller`` (real
processes, as bench/fleet.py does). The controller runs as its own ServiceAccount with the
shipped cluster-wide RBAC (deploy/rbac), so the API server's audit log (localenv/cluster.py logs
only dmrollout's ServiceAccounts; the worker uses the admin identity here) holds exactly the
controller's requests. For each size (``--sizes 20,100``: cumulative, the same fleet grows) it
applies DecisionModels until there are N, waits until all are Ready, lets them settle, then counts
the controller's requests over ``--window`` seconds and samples its CPU (and the API server's)
from /proc, and the Temporal frontend's requests over the same window from the dev server's own
counters (bench/temporal_requests.py; the workers' task polls apart). Prints them beside the
issue's figures from before the watch-fed cache (controller/machinery/cache.py); ``--json
PATH`` writes them as one flat JSON object. Asserts
nothing;
bounded by ``--timeout`` per size. Leader election is off: a Lease renewal is a constant cost,
not a per-DecisionModel one. Run inside the test namespace:

    hack/in-netns.sh .venv/bin/python bench/idle_api.py --sizes 20,100
    hack/in-netns.sh .venv/bin/python bench/idle_api.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from bench_env import (
    Product,
    api_key_secret,
    apply_fleet,
    fleet_nodes,
    start_env,
    start_processes,
)
from temporal_requests import TemporalIdle, between, frontend_requests
from temporalio.client import Client

from localenv import audit
from localenv.env import LocalEnv
from localenv.identities import CONTROLLER, username
from localenv.processes import ManagedProcess

NAMESPACE = "idle"
ROOT = Path(__file__).resolve().parents[1]
RBAC = ROOT / "deploy" / "rbac"
MAX_MODELS = 1000
# Issue 14, measured before the cache on the same 2-core machine: DecisionModels ->
# (controller -> API server requests/s, controller CPU % of a core).
BEFORE: dict[int, tuple[float, float]] = {
    20: (3.6, 1.2),
    100: (14.2, 6.5),
    300: (53.7, 19.6),
    1000: (133.9, 55.3),
}
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Idle:
    models: int
    requests_per_second: float
    by_verb: dict[str, int]
    controller_cpu_pct: float
    apiserver_cpu_pct: float
    ready_seconds: float
    temporal: TemporalIdle


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU of a process so far (0 when it is gone)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def controller_requests(env: LocalEnv) -> list[audit.Request]:
    user = username(CONTROLLER)
    return [r for r in audit.read(env.cluster.audit_log) if r.user == user]


def grant_cluster_wide(env: LocalEnv) -> Path:
    """The controller's ServiceAccount, its kubeconfig and the shipped ClusterRole + binding."""
    kubeconfig = env.cluster.component_kubeconfig(CONTROLLER)
    docs: list[dict[str, Any]] = []
    for name in ("cluster_role_controller.yaml", "cluster_role_binding_controller.yaml"):
        docs += [d for d in yaml.safe_load_all((RBAC / name).read_text()) if d]
    env.cluster.apply(docs)
    return kubeconfig


def start(env: LocalEnv, state: Path, reinspect: float, budget: int) -> ManagedProcess:
    start_env(env)
    product = Product(
        controller_args=["--max-concurrent-rollouts", str(budget)] if budget else [],
        controller_env={
            "DMROLLOUT_KUBECONFIG": str(grant_cluster_wide(env)),
            "DMROLLOUT_CONTROLLER_REINSPECT_SECONDS": str(reinspect),
        },
    )
    controller = start_processes(env, state, NAMESPACE, product)["controller"]
    api_key_secret(env, NAMESPACE)
    return controller


def ready_count(env: LocalEnv) -> int:
    r = env.cluster.kubectl("get", "dm", "-n", NAMESPACE, "-o", "json", check=False)
    if r.returncode != 0:
        return 0
    items = json.loads(r.stdout).get("items", [])
    return sum(1 for dm in items if (dm.get("status") or {}).get("phase") == "Ready")


def wait_ready(env: LocalEnv, models: int, timeout: float) -> float:
    began = time.monotonic()
    while ready_count(env) < models:
        if time.monotonic() - began > timeout:
            print(
                f"  only {ready_count(env)}/{models} Ready after {timeout:.0f} s; measuring anyway"
            )
            break
        time.sleep(5)  # a poll of up to 1,000 DecisionModels: not every second
    return time.monotonic() - began


RUNNING_ROLLOUTS = "WorkflowType = 'RolloutWorkflow' AND ExecutionStatus = 'Running'"


async def rollouts_left(address: str, timeout: float) -> int:
    """Wait, polling one client, until no RolloutWorkflow runs (visibility) or ``timeout``
    passes; the number still running."""
    client = await Client.connect(address)
    began = time.monotonic()
    while (left := (await client.count_workflows(RUNNING_ROLLOUTS)).count) > 0:
        if time.monotonic() - began > timeout:
            break
        await asyncio.sleep(5)
    return left


def wait_quiet(env: LocalEnv, settle: float, timeout: float) -> float:
    """Idle means no rollout running: wait for the last run to close (bounded), then
    ``settle`` for the reconciles that confirm it, so the window measures the idle fleet,
    not the wave's tail."""
    began = time.monotonic()
    left = asyncio.run(rollouts_left(env.temporal.address, timeout))
    if left:
        print(f"  {left} rollouts still running after {timeout:.0f} s; measuring anyway")
    time.sleep(settle)
    return time.monotonic() - began


def measure(
    env: LocalEnv, controller: ManagedProcess, models: int, window: float, ready: float
) -> Idle:
    apiserver = next((p for p in env.cluster.processes if p.name == "kube-apiserver"), None)
    api_pid = apiserver.pid if apiserver else None
    seen = len(controller_requests(env))
    temporal0 = frontend_requests(env.temporal.metrics_url)
    c0, a0, t0 = cpu_seconds(controller.pid), cpu_seconds(api_pid), time.monotonic()
    time.sleep(window)
    c1, a1, t1 = cpu_seconds(controller.pid), cpu_seconds(api_pid), time.monotonic()
    temporal = between(temporal0, frontend_requests(env.temporal.metrics_url), t1 - t0)
    during = controller_requests(env)[seen:]
    elapsed = t1 - t0
    return Idle(
        models=models,
        requests_per_second=len(during) / elapsed,
        by_verb=dict(Counter(f"{r.use.verb} {r.use.resource}" for r in during)),
        controller_cpu_pct=100 * (c1 - c0) / elapsed,
        apiserver_cpu_pct=100 * (a1 - a0) / elapsed,
        ready_seconds=ready,
        temporal=temporal,
    )


def report(results: list[Idle], window: float, reinspect: float) -> dict[str, float]:
    print(f"\nidle controller, window {window:.0f} s, re-inspection every {reinspect:.0f} s")
    print(f"{'DMs':>6} {'req/s':>8} {'before':>8} {'ctl CPU %':>10} {'before':>8} "
          f"{'apiserver CPU %':>16} {'Temporal req/s':>15} {'goal':>5} {'polls/s':>8}")  # fmt: skip
    flat: dict[str, float] = {"window_seconds": window, "reinspect_seconds": reinspect}
    for r in results:
        before = BEFORE.get(r.models)
        b_rps = f"{before[0]:.1f}" if before else "-"
        b_cpu = f"{before[1]:.1f}" if before else "-"
        t = r.temporal
        print(f"{r.models:>6} {r.requests_per_second:>8.2f} {b_rps:>8} "
              f"{r.controller_cpu_pct:>10.1f} {b_cpu:>8} {r.apiserver_cpu_pct:>16.1f} "
              f"{t.product_per_second:>15.3f} {'0.1':>5} {t.polls_per_second:>8.2f}")  # fmt: skip
        if r.by_verb:
            print("         " + ", ".join(f"{k} x{v}" for k, v in sorted(r.by_verb.items())))
        if t.by_operation:
            print("         Temporal: " + ", ".join(
                f"{k} x{v}" for k, v in sorted(t.by_operation.items())))  # fmt: skip
        n = r.models
        flat[f"idle_api_rps_{n}"] = round(r.requests_per_second, 3)
        flat[f"idle_controller_cpu_pct_{n}"] = round(r.controller_cpu_pct, 2)
        flat[f"idle_apiserver_cpu_pct_{n}"] = round(r.apiserver_cpu_pct, 2)
        flat[f"idle_all_ready_seconds_{n}"] = round(r.ready_seconds, 1)
        flat[f"idle_temporal_rps_{n}"] = round(t.product_per_second, 3)
        flat[f"idle_temporal_polls_rps_{n}"] = round(t.polls_per_second, 3)
        if before:
            flat[f"idle_api_rps_{n}_before"] = before[0]
            flat[f"idle_controller_cpu_pct_{n}_before"] = before[1]
    print("before: issue 14 (every re-inspection read each DecisionModel's objects from the API)")
    print("Temporal req/s: frontend requests besides the workers' task polls (polls/s), from the "
          "dev server's service_requests; goal 0.1/s at every size (issue 23; before it, every "
          "reconcile listed visibility: ~N/60 per second)")  # fmt: skip
    return flat


def run(
    sizes: list[int], window: float, reinspect: float, timeout: float, budget: int, state: Path
) -> dict[str, float]:
    env = LocalEnv(state)
    env.cluster.nodes = fleet_nodes(max(sizes))
    results: list[Idle] = []
    try:
        t0 = time.monotonic()
        controller = start(env, state, reinspect, budget)
        print(f"environment, worker and controller up in {time.monotonic() - t0:.1f} s")
        have = 0
        for n in sizes:
            # Half with spec.auth (issue 23): their Secret is read by name at each reconcile.
            names = [f"model-{i:04d}" for i in range(have, n)]
            apply_fleet(env, NAMESPACE, names, auth_every=2, first=have)
            have = n
            ready = wait_ready(env, n, timeout)
            print(f"{n} DecisionModels: all Ready {ready:.1f} s after applying; settling")
            # The Ready write lands just before a run's end, so the controller confirms the
            # run closed at that DecisionModel's next re-inspection (one describe): idle is
            # one re-inspection period after the last run closed.
            quiet = wait_quiet(env, reinspect + 5.0, timeout)
            print(f"  no rollout running {quiet:.1f} s later")
            results.append(measure(env, controller, n, window, ready))
            print(f"  {results[-1].requests_per_second:.2f} req/s over {window:.0f} s")
        # The log is live: every request of the controller since it started (lists, watches,
        # status writes of the rollouts), so a 0 above is a measured 0.
        print(f"controller requests in the audit log since start: {len(controller_requests(env))}")
    finally:
        env.stop()
    return report(results, window, reinspect)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20,100", help="DecisionModel counts, ascending")
    parser.add_argument("--window", type=float, default=120.0, help="seconds measured per size")
    parser.add_argument("--reinspect", type=float, default=60.0, help="re-inspection period")
    parser.add_argument("--timeout", type=float, default=1500.0, help="seconds to all Ready")
    parser.add_argument(
        "--budget", type=int, default=50, help="--max-concurrent-rollouts while the fleet grows"
    )
    parser.add_argument("--quick", action="store_true", help="5 and 10 DMs, short windows")
    parser.add_argument("--json", type=Path, help="write the figures as a flat JSON object")
    args = parser.parse_args()
    sizes = sorted({max(1, min(int(s), MAX_MODELS)) for s in args.sizes.split(",") if s})
    window, reinspect, timeout = args.window, args.reinspect, args.timeout
    if args.quick:
        sizes, window, reinspect, timeout = [5, 10], 20.0, 10.0, 90.0
    state = Path(tempfile.mkdtemp(prefix="dmrollout-idle-"))
    flat = run(sizes, window, reinspect, timeout, args.budget, state)
    if args.json:
        args.json.write_text(json.dumps(flat, indent=2, sort_keys=True) + "\n")
        print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
