"""Benchmark: apply → Ready of a DecisionModel against the floor measured in the same cluster.

Starts the local environment, a ``dmrollout worker`` and a ``dmrollout controller`` (real
processes, as bench/fleet.py does), then ``--runs`` times (6; 2 with ``--quick``), one after
the other: applies a new DecisionModel with 2 replicas and no evaluation and times apply →
``phase: Ready``; then, in the same cluster, the floor of that rollout: the prefetch Job alone
(a copy of the one the rollout ran, on a fresh PVC) and a plain Deployment with the same Pod
template (readiness gate removed, labels that no controller reads), each timed create → done.
Prints p50/p90 of apply → Ready beside the floor (p50 Job + p50 Deployment, the two steps a
rollout cannot skip) and the overhead = p50 - floor. Asserts nothing; bounded by
``--timeout`` per wait, it stops by itself. ``--json PATH`` writes the figures as one flat
object. Run inside the test namespace:

    hack/in-netns.sh .venv/bin/python bench/overhead.py [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_env import Product, start_product
from kubernetes import watch

from decisionmodel.api import GROUP, PLURAL, VERSION
from decisionmodel.engine.render.labels import deployment_name, prefetch_job_name, store_pvc_name
from kube.client import Kube
from localenv.env import LocalEnv

NAMESPACE = "overhead"
REPLICAS = 2
Obj = dict[str, Any]


def wait_object(
    lister: Callable[..., Any], args: tuple[Any, ...], name: str, done: Callable[[Obj], bool],
    timeout: float,
) -> float:  # fmt: skip
    """Monotonic time at which object ``name`` first satisfies ``done`` (list, then watch: the
    moment is the event's, not a poll's)."""
    deadline = time.monotonic() + timeout
    selector = f"metadata.name={name}"
    while time.monotonic() < deadline:
        body = json.loads(lister(*args, field_selector=selector, _preload_content=False).data)
        if any(done(item) for item in body["items"]):
            return time.monotonic()
        w = watch.Watch()
        for event in w.stream(
            lister, *args, field_selector=selector, resource_version=body["metadata"]
            ["resourceVersion"], timeout_seconds=max(1, int(deadline - time.monotonic())),
        ):  # fmt: skip
            if event["type"] in ("ADDED", "MODIFIED") and done(event["raw_object"]):
                w.stop()
                return time.monotonic()
    raise TimeoutError(f"{name} not done within {timeout:.0f} s")


def dm_ready(dm: Obj) -> bool:
    status = dm.get("status") or {}
    return status.get("phase") == "Ready" and bool((status.get("stableRevision") or {}).get("hash"))


def job_complete(job: Obj) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Complete" and c.get("status") == "True" for c in conditions)


def deployment_ready(dep: Obj) -> bool:
    return int((dep.get("status") or {}).get("readyReplicas") or 0) >= REPLICAS


def plain(obj: Obj, name: str) -> Obj:
    """A copy of ``obj`` under a new name, without what the API server or dmrollout set."""
    out = {k: copy.deepcopy(obj[k]) for k in ("apiVersion", "kind", "spec")}
    out["metadata"] = {"name": name, "namespace": NAMESPACE}
    return out


class Run:
    def __init__(self, env: LocalEnv, kube: Kube, timeout: float) -> None:
        self.env, self.kube, self.timeout = env, kube, timeout
        self.applied_wall = 0.0

    def rollout(self, name: str) -> tuple[float, str]:
        self.applied_wall = time.time()
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "DecisionModel",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"model": "laya:en", "replicas": REPLICAS, "device": "cpu"},
        }
        began = time.monotonic()
        self.kube.custom.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, body)

        def lister(**kw: Any) -> Any:
            return self.kube.custom.list_namespaced_custom_object(
                GROUP, VERSION, NAMESPACE, PLURAL, **kw
            )

        ready = wait_object(lister, (), name, dm_ready, self.timeout)
        dm = self.kube.custom.get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, name)
        return ready - began, str(dm["status"]["stableRevision"]["hash"])

    def floor_job(self, dm: str, rev: str, name: str) -> float:
        pvc = self.kube.raw(
            self.kube.core.read_namespaced_persistent_volume_claim, store_pvc_name(dm, rev),
            NAMESPACE,
        )  # fmt: skip
        job = self.kube.raw(self.kube.batch.read_namespaced_job, prefetch_job_name(dm, rev),
                            NAMESPACE)  # fmt: skip
        fresh_pvc = plain(pvc, f"{name}-store")
        fresh_pvc["spec"].pop("volumeName", None)
        fresh_job = plain(job, name)
        spec = fresh_job["spec"]
        for key in ("selector", "manualSelector"):
            spec.pop(key, None)
        # The Job controller's labels of the original (its UID) would select the wrong Pods.
        spec["template"]["metadata"] = {"labels": {"app": name}}
        for volume in spec["template"]["spec"].get("volumes") or []:
            claim = volume.get("persistentVolumeClaim")
            if claim and claim.get("claimName") == store_pvc_name(dm, rev):
                claim["claimName"] = fresh_pvc["metadata"]["name"]
        self.kube.core.create_namespaced_persistent_volume_claim(NAMESPACE, fresh_pvc)
        began = time.monotonic()
        self.kube.batch.create_namespaced_job(NAMESPACE, fresh_job)
        done = wait_object(
            self.kube.batch.list_namespaced_job, (NAMESPACE,), name, job_complete, self.timeout
        )
        return done - began

    def floor_deployment(self, dm: str, rev: str, name: str) -> float:
        served = self.kube.raw(
            self.kube.apps.read_namespaced_deployment, deployment_name(dm, rev), NAMESPACE
        )
        dep = plain(served, name)
        spec = dep["spec"]
        spec["selector"] = {"matchLabels": {"app": name}}
        spec["template"]["metadata"]["labels"] = {"app": name}
        # No readiness gate: nobody would set it; this is what the Pods cost by themselves.
        spec["template"]["spec"].pop("readinessGates", None)
        began = time.monotonic()
        self.kube.apps.create_namespaced_deployment(NAMESPACE, dep)
        done = wait_object(
            self.kube.apps.list_namespaced_deployment, (NAMESPACE,), name, deployment_ready,
            self.timeout,
        )  # fmt: skip
        return done - began


async def _history(address: str, workflow: str) -> list[tuple[float, str]]:
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import Client

    client = await Client.connect(address)
    async for found in client.list_workflows(f'WorkflowId STARTS_WITH "{workflow}"'):
        workflow = found.id
    history = await client.get_workflow_handle(workflow).fetch_history()
    names: dict[int, str] = {}
    out = []
    for e in history.events:
        kind = EventType.Name(e.event_type).removeprefix("EVENT_TYPE_").lower()
        if e.HasField("activity_task_scheduled_event_attributes"):
            names[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
            kind = f"{names[e.event_id]} scheduled"
        for field in ("started", "completed", "failed"):
            attr = f"activity_task_{field}_event_attributes"
            if e.HasField(attr):  # type: ignore[arg-type]
                kind = f"{names.get(getattr(e, attr).scheduled_event_id, '?')} {field}"
        out.append((e.event_time.ToDatetime().timestamp(), kind))
    return out


def timeline(env: LocalEnv, dm: str, rev: str, applied: float) -> None:
    """Where one rollout's time went: its workflow's history, from the apply."""
    import asyncio

    workflow = f"rollout/{NAMESPACE}/{dm}/"
    try:
        events = asyncio.run(_history(env.temporal.address, workflow))
    except Exception as e:  # a diagnostic only: the figures stand without it
        print(f"\nno timeline of {dm}: {e}")
        return
    print(f"\ntimeline of {dm} (seconds after the apply; workflow history)")
    for at, what in events:
        print(f"  {at - applied:6.2f}  {what}")


def start(env: LocalEnv, state: Path) -> None:
    start_product(env, state, NAMESPACE, Product(leader_election=True))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(runs: int, timeout: float, state: Path, show: bool = False) -> dict[str, float]:
    t0 = time.monotonic()
    env = LocalEnv(state)
    try:
        start(env, state)
        kube = Kube.from_config(str(env.cluster.kubeconfig))
        print(f"environment, worker and controller up in {time.monotonic() - t0:.1f} s")
        bench = Run(env, kube, timeout)
        # One rollout first, not counted: imports, connections and caches warm up.
        bench.rollout("warm")
        rollouts, jobs, deployments = [], [], []
        for i in range(runs):
            took, rev = bench.rollout(f"m{i}")
            job = bench.floor_job(f"m{i}", rev, f"floor-job-{i}")
            dep = bench.floor_deployment(f"m{i}", rev, f"floor-dep-{i}")
            rollouts.append(took)
            jobs.append(job)
            deployments.append(dep)
            print(f"  run {i + 1}/{runs}: apply→Ready {took:5.2f} s   "
                  f"floor: Job {job:5.2f} s + Deployment {dep:5.2f} s")  # fmt: skip
        if show:
            timeline(env, f"m{runs - 1}", rev, bench.applied_wall)
        p50 = statistics.median(rollouts)
        floor = statistics.median(jobs) + statistics.median(deployments)
        figures = {
            "overhead_runs": float(runs),
            "overhead_apply_ready_p50_s": round(p50, 3),
            "overhead_apply_ready_p90_s": round(percentile(rollouts, 0.9), 3),
            "overhead_floor_job_p50_s": round(statistics.median(jobs), 3),
            "overhead_floor_deployment_p50_s": round(statistics.median(deployments), 3),
            "overhead_floor_s": round(floor, 3),
            "overhead_s": round(p50 - floor, 3),
        }
        report(figures)
        print(f"whole run {time.monotonic() - t0:.1f} s (state and logs in {state})")
        return figures
    finally:
        env.stop()


def report(f: dict[str, float]) -> None:
    print(f"\napply → Ready, {REPLICAS} replicas, no evaluation, {int(f['overhead_runs'])} runs")
    print(f"  {'measure':34} {'measured':>9}   floor in the same run")
    print(f"  {'apply → Ready p50':34} {f['overhead_apply_ready_p50_s']:8.2f}s   "
          f"{f['overhead_floor_s']:.2f} s = prefetch Job {f['overhead_floor_job_p50_s']:.2f} s "
          f"+ plain Deployment {f['overhead_floor_deployment_p50_s']:.2f} s")  # fmt: skip
    print(f"  {'apply → Ready p90':34} {f['overhead_apply_ready_p90_s']:8.2f}s")
    print(f"  {'overhead (p50 - floor)':34} {f['overhead_s']:8.2f}s   target ≤ 1 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6, help="rollouts timed (6)")
    parser.add_argument("--quick", action="store_true", help="2 runs: a smoke run")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per wait")
    parser.add_argument(
        "--timeline", action="store_true", help="print the last rollout's workflow history"
    )
    parser.add_argument("--json", type=Path, help="write the figures as a flat JSON object")
    args = parser.parse_args()
    runs = 2 if args.quick else max(1, args.runs)
    state = Path(tempfile.mkdtemp(prefix="dmrollout-overhead-"))
    figures = measure(runs, args.timeout, state, args.timeline)
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
