"""Benchmark: Temporal history events per rollout, without evaluation and with it.

Starts the local environment, a ``dmrollout worker`` and a ``dmrollout controller`` (real
processes, as in the demo), then rolls out:

- ``plain``: a first revision without evaluation (resolve, prefetch, start, warmup_inspect,
  promote);
- ``eval-<N>``: for each case count N, a DecisionModel's first revision, then a second one
  evaluated on a golden set of N cases against the stable (baseline), promoted, the previous
  revision deleted after the grace.

For each rollout it reads the workflow's history and prints its events, activities (by name)
and workflow tasks, beside the figures before issue 14 (91 events without evaluation, 121 with
at any case count). Prints numbers, asserts nothing; bounded by ``--timeout``, it stops by
itself. Run inside the test namespace:

    hack/in-netns.sh .venv/bin/python bench/history_events.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench_env import Product, start_product
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory

from localenv.env import LocalEnv
from simulators.answers import make_golden_set

NAMESPACE = "history"
# Measured before issue 14 (its table): the figures to beat, printed beside ours.
BEFORE = {"plain": 91, "eval": 121}
TARGET_PLAIN = 45


def _dm(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "decisionmodel.io/v1alpha1",
        "kind": "DecisionModel",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


def _golden(name: str, cases: int) -> dict[str, Any]:
    jsonl = "".join(json.dumps(c) + "\n" for c in make_golden_set(cases, seed=7))
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "data": {"cases.jsonl": jsonl},
    }


def _status(env: LocalEnv, name: str) -> dict[str, Any]:
    r = env.cluster.kubectl("get", "dm", name, "-n", NAMESPACE, "-o", "json", check=False)
    return dict(json.loads(r.stdout).get("status") or {}) if r.returncode == 0 else {}


def _wait_stable(env: LocalEnv, name: str, previous: str | None, deadline: float) -> str:
    """Wait until ``name`` is Ready on a stable revision other than ``previous``."""
    while time.monotonic() < deadline:
        st = _status(env, name)
        stable = (st.get("stableRevision") or {}).get("hash")
        if st.get("phase") == "Ready" and stable and stable != previous:
            return str(stable)
        if st.get("phase") in ("Failed", "RolledBack"):
            raise RuntimeError(f"{name}: {st.get('phase')}: {st.get('failedRevision')}")
        time.sleep(0.5)
    raise TimeoutError(f"{name} not Ready on a new revision in time")


def shape(history: WorkflowHistory) -> dict[str, Any]:
    """Events, activities (in order, by name) and workflow tasks of one history."""
    names = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    tasks = sum(
        e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED for e in history.events
    )
    timeouts = sum(
        e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT for e in history.events
    )
    return {
        "events": len(history.events),
        "activities": names,
        "workflow_tasks": tasks,
        "task_timeouts": timeouts,  # each adds 3 events: the machine's load, not the shape
    }


async def _latest_history(client: Client, name: str, deadline: float) -> WorkflowHistory:
    """The history of the DecisionModel's latest closed rollout (visibility may lag a little)."""
    query = f"DmNamespace = '{NAMESPACE}' AND DmName = '{name}' AND ExecutionStatus = 'Completed'"
    while time.monotonic() < deadline:
        runs = [w async for w in client.list_workflows(query)]
        if runs:
            latest = max(runs, key=lambda w: w.start_time)
            return await client.get_workflow_handle(latest.id, run_id=latest.run_id).fetch_history()
        await asyncio.sleep(0.5)
    raise TimeoutError(f"no completed rollout of {name} in visibility")


async def _measure(env: LocalEnv, cases: list[int], deadline: float) -> dict[str, dict[str, Any]]:
    cluster = env.cluster
    client = await Client.connect(env.temporal.address)
    shapes: dict[str, dict[str, Any]] = {}
    cluster.apply(_dm("plain", {"model": "laya:en", "replicas": 1}))
    _wait_stable(env, "plain", None, deadline)
    shapes["plain"] = shape(await _latest_history(client, "plain", deadline))
    _progress("plain", shapes["plain"])
    for n in cases:
        name = f"eval-{n}"
        # Created, not applied: 500 cases are more than kubectl apply's annotation may hold.
        cluster.kubectl("create", "-f", "-", input=json.dumps(_golden(f"golden-{n}", n)))
        cluster.apply(_dm(name, {"model": "laya:en", "replicas": 1}))
        first = _wait_stable(env, name, None, deadline)
        evaluation = {
            "datasetRef": {"configMapRef": {"name": f"golden-{n}", "key": "cases.jsonl"}},
            "minAccuracy": "0.50",
            "maxAccuracyDrop": "0.20",
            "maxCases": n,
        }
        spec = {"model": "laya:v2", "rollout": {"evaluation": evaluation}}
        cluster.kubectl(
            "patch", "dm", name, "-n", NAMESPACE, "--type=merge", "-p", json.dumps({"spec": spec})
        )
        _wait_stable(env, name, first, deadline)
        shapes[name] = await _wait_for_grace(client, name, deadline)
        _progress(name, shapes[name])
    return shapes


def _progress(name: str, found: dict[str, Any]) -> None:
    """One line as soon as a rollout is measured (a later one may run out of time)."""
    print(f"measured {name}: {found['events']} events", flush=True)


async def _wait_for_grace(client: Client, name: str, deadline: float) -> dict[str, Any]:
    """Ready comes before the grace and the delete of the previous revision: the workflow
    completes after them, and only then is its history whole."""
    while True:
        found = shape(await _latest_history(client, name, deadline))
        if "evaluate" in found["activities"] or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.5)


def report(shapes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Print the table; return the flat figures for ``--json``."""
    flat: dict[str, Any] = {}
    print(
        f"{'rollout':<12} {'events':>7} {'before':>7} {'activities':>11} {'wf tasks':>9} "
        f"{'wf task timeouts':>17}"
    )
    for name, found in shapes.items():
        before = BEFORE["plain" if name == "plain" else "eval"]
        acts = found["activities"]
        print(
            f"{name:<12} {found['events']:>7} {before:>7} {len(acts):>11} "
            f"{found['workflow_tasks']:>9} {found['task_timeouts']:>17}"
        )
        key = name.replace("-", "_")
        flat[f"history_events_{key}"] = found["events"]
        flat[f"history_events_{key}_before"] = before
        flat[f"history_activities_{key}"] = len(acts)
        flat[f"history_workflow_tasks_{key}"] = found["workflow_tasks"]
        flat[f"history_workflow_task_timeouts_{key}"] = found["task_timeouts"]
    print(f"target without evaluation: ≤ {TARGET_PLAIN} events; with evaluation: flat in cases")
    for name, found in shapes.items():
        counts = Counter(found["activities"])
        print(f"  {name}: " + " → ".join(found["activities"]) + f"  ({dict(counts)})")
    flat["history_events_target_plain"] = TARGET_PLAIN
    return flat


def run(cases: list[int], timeout: float, state: Path) -> dict[str, Any]:
    t0 = time.monotonic()
    env = LocalEnv(state)
    try:
        start_product(env, state, NAMESPACE, Product(leader_election=True))
        print(f"environment, worker and controller up in {time.monotonic() - t0:.1f} s")
        shapes = asyncio.run(_measure(env, cases, time.monotonic() + timeout))
        flat = report(shapes)
        print(f"whole run {time.monotonic() - t0:.1f} s (state and logs in {state})")
        return flat
    finally:
        env.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one evaluated rollout, 50 cases")
    parser.add_argument("--json", type=Path, help="write the figures as a flat JSON object")
    parser.add_argument("--timeout", type=float, default=600, help="seconds for all rollouts")
    args = parser.parse_args()
    cases = [50] if args.quick else [50, 500]
    flat = run(cases, args.timeout, Path(tempfile.mkdtemp(prefix="dmrollout-history-")))
    if args.json is not None:
        args.json.write_text(json.dumps(flat, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
