"""Benchmark: a fleet of DecisionModels rolled at once, under the controller's rollout budget.

Starts the local environment, a ``dmrollout worker`` and a ``dmrollout controller`` (real
processes, as in the demo) with ``--max-concurrent-rollouts``, applies N DecisionModels at once,
waits until every one is Ready, then changes every model to a new version and waits for every
promotion. Prints, per wave: time to the first and the last Ready, median and p90, the peak
number of rollouts in flight (never above the budget) and of DecisionModels queued
(RolloutQueued). Prints numbers, asserts nothing; bounded by ``--models`` (≤ 60) and
``--timeout``, it stops by itself. Run inside the test namespace:

    hack/in-netns.sh .venv/bin/python bench/fleet.py --models 20 --budget 4
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from localenv.demo import CRD, product_env
from localenv.env import REGISTRY_URL, LocalEnv
from localenv.processes import ManagedProcess

NAMESPACE = "fleet"
MAX_MODELS = 60
IN_FLIGHT = {"Resolving", "Caching", "Starting", "Evaluating", "AwaitingPromotion", "Promoting"}


@dataclass
class Wave:
    """What one wave of rollouts looked like from `kubectl get dm`."""

    began: float
    ready_at: dict[str, float] = field(default_factory=dict)
    peak_in_flight: int = 0
    peak_queued: int = 0

    def report(self, title: str, models: int, budget: int) -> None:
        took = sorted(t - self.began for t in self.ready_at.values())
        print(f"{title}: {len(took)}/{models} Ready")
        if took:
            p90 = took[min(len(took) - 1, round(0.9 * (len(took) - 1)))]
            print(f"  first Ready                  {took[0]:7.1f} s")
            print(f"  median                       {statistics.median(took):7.1f} s")
            print(f"  p90                          {p90:7.1f} s")
            print(f"  last Ready (whole wave)      {took[-1]:7.1f} s")
            print(f"  rollouts per minute          {60 * len(took) / max(took[-1], 1e-9):7.1f}")
        limit = str(budget) if budget else "unlimited"
        print(f"  peak rollouts in flight      {self.peak_in_flight:7d}   (budget {limit})")
        print(f"  peak queued (RolloutQueued)  {self.peak_queued:7d}")


def _items(env: LocalEnv) -> list[dict[str, Any]]:
    r = env.cluster.kubectl("get", "dm", "-n", NAMESPACE, "-o", "json", check=False)
    return list(json.loads(r.stdout).get("items", [])) if r.returncode == 0 else []


def _queued(status: dict[str, Any]) -> bool:
    return any(c.get("reason") == "RolloutQueued" for c in status.get("conditions") or [])


def _watch(env: LocalEnv, wave: Wave, done: Any, names: list[str], deadline: float) -> None:
    while time.monotonic() < deadline:
        now = time.monotonic()
        items = _items(env)
        in_flight = queued = 0
        for dm in items:
            name, st = dm["metadata"]["name"], dm.get("status") or {}
            phase = st.get("phase", "")
            in_flight += phase in IN_FLIGHT
            queued += phase == "Pending" and _queued(st)
            if name not in wave.ready_at and done(dm):
                wave.ready_at[name] = now
        wave.peak_in_flight = max(wave.peak_in_flight, in_flight)
        wave.peak_queued = max(wave.peak_queued, queued)
        if len(wave.ready_at) == len(names):
            return
        time.sleep(0.25)


def run(models: int, budget: int, timeout: float, state: Path) -> None:
    t0 = time.monotonic()
    env = LocalEnv(state)
    try:
        env.start()
        cluster = env.cluster
        cluster.kubectl("apply", "--server-side", "-f", str(CRD))
        cluster.kubectl(
            "wait", "--for", "condition=established", "crd/decisionmodels.decisionmodel.io"
        )
        penv = {**os.environ, **product_env(env)}
        python = sys.executable
        for name, args in (
            ("worker", [python, "-m", "controller.cli", "worker"]),
            (
                "controller",
                [python, "-m", "controller.cli", "controller",
                 "--max-concurrent-rollouts", str(budget)],
            ),
        ):  # fmt: skip
            env.extra_processes.append(ManagedProcess(name, args, state / "logs", env=penv).start())
        with httpx.Client(trust_env=False) as http:
            http.put(
                f"{REGISTRY_URL}/_sim/models/library/laya/v2",
                json={"accuracy": 0.95, "revision": "v2"},
            ).raise_for_status()
        cluster.kubectl("create", "namespace", NAMESPACE)
        print(f"environment, worker and controller up in {time.monotonic() - t0:.1f} s")
        deadline = time.monotonic() + timeout
        names = [f"model-{i:02d}" for i in range(models)]

        first = Wave(began=time.monotonic())
        for name in names:
            cluster.apply(
                {
                    "apiVersion": "decisionmodel.io/v1alpha1",
                    "kind": "DecisionModel",
                    "metadata": {"name": name, "namespace": NAMESPACE},
                    "spec": {"model": "laya:en", "replicas": 1, "device": "cpu"},
                }
            )
        _watch(env, first, lambda dm: (dm.get("status") or {}).get("phase") == "Ready",
               names, deadline)  # fmt: skip
        first.report("wave 1: first rollout of each DecisionModel (laya:en)", models, budget)
        stable = {
            dm["metadata"]["name"]: (dm["status"].get("stableRevision") or {}).get("hash")
            for dm in _items(env)
        }

        second = Wave(began=time.monotonic())
        for name in names:
            cluster.kubectl(
                "patch", "dm", name, "-n", NAMESPACE, "--type=merge",
                "-p", json.dumps({"spec": {"model": "laya:v2"}}),
            )  # fmt: skip

        def promoted(dm: dict[str, Any]) -> bool:
            st = dm.get("status") or {}
            now = (st.get("stableRevision") or {}).get("hash")
            return st.get("phase") == "Ready" and now not in (
                None,
                stable.get(dm["metadata"]["name"]),
            )

        _watch(env, second, promoted, names, deadline)
        second.report(
            "wave 2: every DecisionModel to laya:v2 (supersedes the stable)", models, budget
        )
        print(f"whole run {time.monotonic() - t0:.1f} s (state and logs in {state})")
    finally:
        env.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=20, help=f"DecisionModels (≤{MAX_MODELS})")
    parser.add_argument(
        "--budget", type=int, default=4, help="--max-concurrent-rollouts (0 = none)"
    )
    parser.add_argument("--timeout", type=float, default=600, help="seconds for both waves")
    args = parser.parse_args()
    models = max(1, min(args.models, MAX_MODELS))
    run(
        models, max(0, args.budget), args.timeout, Path(tempfile.mkdtemp(prefix="dmrollout-fleet-"))
    )


if __name__ == "__main__":
    main()
