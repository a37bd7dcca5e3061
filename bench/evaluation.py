"""Benchmark: evaluation throughput against the runtime's limit.

Starts the local control plane, the fake kubelet and the simulators (no Temporal: the evaluate
activity runs in ``temporalio.testing.ActivityEnvironment``, heartbeats included, as the worker
runs it), serves revisions of a simulated model with 2 replicas each (``--replicas``), makes
them model-ready with the warmup activity, and times the ``evaluate`` activity on a golden
dataset of N cases:

- at 50 ms per decision (``--latency-ms``; the simulator's ``latency-ms`` Pod annotation):
  cases/s beside the runtime's limit, replicas x forward passes per Pod / latency
  (RUNTIME_API.md: one forward pass at a time per model, so 2 / 0.05 s = 40 cases/s), and the
  percentage (issue 14: >= 95 %);
- at zero latency: cases/s and the fixed cost per case (everything but the model's own time),
  in wall time and in CPU milliseconds of the activity and of the runtime simulator (CPU does
  not depend on what else the shared machine runs; wall time does);
- (full run) with a relative gate, the candidate then the stable as the baseline, both at 50 ms
  (or ``--latency-ms``):
  twice the cases, against the same limit; then the same with ``confidence: "0.95"`` (issue 24:
  the intervals, ECE bootstrap included, computed after the last case, >= 95 % of the limit).

"cases/s" is the whole activity (policy check, dataset read, Pod listing included), as a rollout
sees it; "from the first case counted to the last" is the rate of the cases alone. Before each
run one ``GET /api/version`` per Pod refreshes the simulator's Pod cache (a real runtime does not
look itself up in the Kubernetes API).

Prints numbers, asserts nothing; bounded by ``--timeout``, it stops by itself. Run inside the
test namespace:

    hack/in-netns.sh .venv/bin/python bench/evaluation.py [--cases 500] [--replicas 2]
        [--latency-ms 50] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from temporalio.testing import ActivityEnvironment

from activities.evaluate import EvaluateActivities
from activities.resolve import ResolveActivities
from activities.warmup_inspect import WarmupActivities
from decisionmodel.api.crd import CRD_NAME
from decisionmodel.engine.params import OwnerRef, PrefetchParams, ServingParams, StoreParams
from decisionmodel.engine.render import (
    render_prefetch_job,
    render_serving_deployment,
    render_store_pvc,
)
from decisionmodel.engine.render.labels import selector_labels, store_pvc_name
from decisionmodel.engine.runtime_client import RuntimeClient
from decisionmodel.rollout.contracts import (
    DMRef,
    EvaluateInput,
    EvaluationOutcome,
    EvaluationPolicy,
    KeyRef,
    ResolveInput,
    ResolveResult,
    RevisionSpec,
    WarmupInput,
)
from decisionmodel.rollout.settings import RolloutSettings
from kube.client import Kube
from localenv.demo import CRD
from localenv.env import REGISTRY_HOST, REGISTRY_URL, LocalEnv
from simulators.answers import make_golden_set

NAMESPACE = "bench-eval"
DM_NAME = "bench"
REPLICAS = 2
LATENCY_MS = 50
FORWARD_PASSES_PER_POD = 1  # RUNTIME_API.md "Concurrency": one forward pass at a time per model
SIM = "sim.dmrollout.dev/"
SETTINGS = RolloutSettings(
    allowed_registries=[REGISTRY_HOST],
    allow_insecure_registries=True,
    ollaya_registry=REGISTRY_URL,
    poll_interval_seconds=0.2,
)


def limit(latency_ms: float, replicas: int) -> float:
    return replicas * FORWARD_PASSES_PER_POD / (latency_ms / 1000)


def policy(cases: int, baseline: bool, confidence: str | None = None) -> EvaluationPolicy:
    return EvaluationPolicy(
        dataset=KeyRef(kind="ConfigMap", name="golden", key="cases.jsonl"),
        min_accuracy="0",
        max_accuracy_drop="1" if baseline else None,
        max_cases=cases,
        confidence=confidence,
        on_inconclusive="Promote" if confidence else None,
    )


def wire(p: EvaluationPolicy) -> dict[str, Any]:
    return {
        "datasetRef": {"configMapRef": {"name": p.dataset.name, "key": p.dataset.key}},
        "minAccuracy": p.min_accuracy,
        "maxAccuracyDrop": p.max_accuracy_drop,
        "maxCases": p.max_cases,
        **({"confidence": p.confidence, "onInconclusive": "Promote"} if p.confidence else {}),
    }


class Bench:
    def __init__(self, env: LocalEnv, cases: int, replicas: int) -> None:
        self.env = env
        self.cases = cases
        self.replicas = replicas
        self.kube = Kube.from_config(str(env.cluster.kubeconfig))
        self.dm = DMRef(namespace=NAMESPACE, name=DM_NAME, uid="")
        self.first_case_at = 0.0  # seconds from the activity's start to the first case counted
        self.steady_rate = 0.0  # cases/s from the first case counted to the last
        # CPU seconds of the last evaluation: this process (the activity, as in a worker) and
        # the runtime simulator. Unlike wall time, they do not depend on what else the
        # machine runs.
        self.cpu_seconds = 0.0
        self.sim_cpu_seconds = 0.0

    def setup(self) -> None:
        cluster = self.env.cluster
        cluster.establish_crd(CRD, CRD_NAME, timeout=120)
        cluster.kubectl("create", "namespace", NAMESPACE)
        self._apply_dm(policy(self.cases, baseline=False))
        uid = cluster.kubectl_json("get", "dm", DM_NAME, "-n", NAMESPACE)["metadata"]["uid"]
        self.dm = DMRef(namespace=NAMESPACE, name=DM_NAME, uid=uid)
        lines = "".join(json.dumps(c) + "\n" for c in make_golden_set(self.cases, seed=14))
        golden = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "golden", "namespace": NAMESPACE},
            "data": {"cases.jsonl": lines},
        }
        # Server-side: 500 cases are past the 256 KiB of a last-applied annotation.
        cluster.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(golden))

    def _apply_dm(self, p: EvaluationPolicy) -> None:
        """The live spec carries the gates the input does (evaluate refuses any other)."""
        spec = {"model": "laya:lat50", "rollout": {"evaluation": wire(p)}}
        self.env.cluster.apply(
            {
                "apiVersion": "decisionmodel.io/v1alpha1",
                "kind": "DecisionModel",
                "metadata": {"name": DM_NAME, "namespace": NAMESPACE},
                "spec": spec,
            }
        )

    async def serve(self, tag: str, latency_ms: int) -> ResolveResult:
        """A revision of ``laya:<tag>``: its Pods at ``latency_ms`` per decision, model-ready."""
        with httpx.Client(trust_env=False) as http:
            http.put(
                f"{REGISTRY_URL}/_sim/models/library/laya/{tag}",
                json={"accuracy": 0.9, "confidence": 0.8},
            ).raise_for_status()
        inp = ResolveInput(dm=self.dm, revision=RevisionSpec(model=f"laya:{tag}", device="cpu"))
        resolved: ResolveResult = await ActivityEnvironment().run(
            ResolveActivities(SETTINGS).resolve, inp
        )
        record = resolved.record
        common: dict[str, Any] = {
            "owner": OwnerRef(name=self.dm.name, uid=self.dm.uid),
            "namespace": NAMESPACE,
            "revision": record.hash,
        }
        model: dict[str, Any] = {
            **common,
            "model": record.model,
            "digest": record.digest,
            "device": record.device,
            "image": record.image,
            "store_claim_name": store_pvc_name(self.dm.name, record.hash),
            "registry_url": REGISTRY_URL,
        }
        deployment = render_serving_deployment(ServingParams(**model, replicas=self.replicas))
        template = deployment["spec"]["template"]["metadata"]
        template.setdefault("annotations", {})[f"{SIM}latency-ms"] = str(latency_ms)
        prefetch = PrefetchParams(
            **model,
            digest_pinned=False,
            store_manifest_path=resolved.store_manifest_path,
            caching_timeout_seconds=300,
        )
        self.env.cluster.apply(
            [render_store_pvc(StoreParams(**common)), render_prefetch_job(prefetch), deployment]
        )
        await self._running(record.hash)
        warm = WarmupInput(
            dm=self.dm,
            record=record,
            model=record.model,
            replicas=self.replicas,
            warmup_timeout_seconds=60,
        )
        await asyncio.wait_for(
            ActivityEnvironment().run(WarmupActivities(self.kube, SETTINGS).warmup_inspect, warm),
            120,
        )
        return resolved

    async def _touch(self, revision: str) -> None:
        """One GET /api/version per Pod: the simulator (not a real runtime) looks a Pod up in
        the API when it has not seen it for 2 s; that is not the product's time."""
        for pod in self._pods(revision):
            async with RuntimeClient.for_pod(pod["status"]["podIP"]) as client:
                await client.version()

    def _pods(self, revision: str) -> list[dict[str, Any]]:
        selector = ",".join(f"{k}={v}" for k, v in selector_labels(DM_NAME, revision).items())
        pods: list[dict[str, Any]] = self.env.cluster.kubectl_json(
            "get", "pods", "-n", NAMESPACE, "-l", selector
        )["items"]
        return pods

    def _runtime_cpu(self) -> float:
        process = self.env.simulators.runtime
        pid = process.pid if process is not None else None
        if pid is None:
            return 0.0
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    async def _running(self, revision: str) -> None:
        selector = ",".join(f"{k}={v}" for k, v in selector_labels(DM_NAME, revision).items())
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            pods = self.env.cluster.kubectl_json("get", "pods", "-n", NAMESPACE, "-l", selector)[
                "items"
            ]
            up = [p for p in pods if p["status"].get("podIP") and p["status"].get("phase")]
            if len(up) == self.replicas and all(p["status"]["phase"] == "Running" for p in up):
                return
            await asyncio.sleep(0.2)
        raise TimeoutError(f"the Pods of revision {revision} are not running after 120 s")

    async def evaluate(
        self,
        candidate: ResolveResult,
        stable: ResolveResult | None = None,
        confidence: str | None = None,
    ) -> tuple[float, EvaluationOutcome]:
        p = policy(self.cases, baseline=stable is not None, confidence=confidence)
        self._apply_dm(p)
        inp = EvaluateInput(
            dm=self.dm,
            candidate=candidate.record,
            model=candidate.record.model,
            stable=stable.record if stable is not None else None,
            policy=p,
        )
        for revision in (candidate, stable):
            if revision is not None:
                await self._touch(revision.record.hash)
        acts = EvaluateActivities(self.kube, SETTINGS)
        env = ActivityEnvironment()
        cpu0, sim0 = time.process_time(), self._runtime_cpu()
        # (time, cases counted) each time the candidate's count moves; the heartbeat ticker
        # also re-sends unchanged details in the background, those are not counted.
        commits: list[tuple[float, int]] = []

        def beat(*details: Any) -> None:
            progress = details[0].get("candidate") if details else None
            done = progress.get("next_case_index", 0) if isinstance(progress, dict) else 0
            if done and (not commits or done > commits[-1][1]):
                commits.append((time.perf_counter(), done))

        env.on_heartbeat = beat
        t0 = time.perf_counter()
        outcome: EvaluationOutcome = await env.run(acts.evaluate, inp)
        took = time.perf_counter() - t0
        self.cpu_seconds = time.process_time() - cpu0
        self.sim_cpu_seconds = self._runtime_cpu() - sim0
        self.first_case_at = self.steady_rate = 0.0
        if commits:
            (t_first, n_first), (t_last, n_last) = commits[0], commits[-1]
            self.first_case_at = t_first - t0
            if t_last > t_first:
                self.steady_rate = (n_last - n_first) / (t_last - t_first)
        return took, outcome


async def measure(
    env: LocalEnv, cases: int, quick: bool, replicas: int, latency_ms: int
) -> dict[str, float | int]:
    bench = Bench(env, cases, replicas)
    bench.setup()
    slow = await bench.serve(f"lat{latency_ms}", latency_ms)
    fast = await bench.serve("lat0", 0)
    lim = limit(latency_ms, replicas)
    figures: dict[str, float | int] = {
        "eval_cases": cases,
        "eval_replicas": replicas,
        "eval_latency_ms": latency_ms,
        "eval_limit_cases_per_s": round(lim, 2),
    }
    took, outcome = await bench.evaluate(slow)
    rate = outcome.cases / took
    figures["eval_cases_per_s"] = round(rate, 2)
    figures["eval_percent_of_limit"] = round(100 * rate / lim, 1)
    figures["eval_first_case_after_s"] = round(bench.first_case_at, 3)
    figures["eval_steady_cases_per_s"] = round(bench.steady_rate, 2)
    figures["eval_steady_percent_of_limit"] = round(100 * bench.steady_rate / lim, 1)
    took, outcome = await bench.evaluate(fast)
    figures["eval_zero_latency_cases_per_s"] = round(outcome.cases / took, 1)
    figures["eval_fixed_cost_ms_per_case"] = round(1000 * took / outcome.cases, 3)
    figures["eval_worker_cpu_ms_per_case"] = round(1000 * bench.cpu_seconds / outcome.cases, 3)
    figures["eval_runtime_sim_cpu_ms_per_case"] = round(
        1000 * bench.sim_cpu_seconds / outcome.cases, 3
    )
    if not quick:
        stable = await bench.serve(f"stable{latency_ms}", latency_ms)
        took, outcome = await bench.evaluate(slow, stable)
        both = 2 * outcome.cases / took
        figures["eval_with_baseline_cases_per_s"] = round(both, 2)
        figures["eval_with_baseline_percent_of_limit"] = round(100 * both / lim, 1)
        # The same with 95 % intervals: the statistics (bootstrap included) run after the
        # last case, inside the activity, so they count against the rate.
        took, outcome = await bench.evaluate(slow, stable, confidence="0.95")
        assert outcome.decision is not None
        both = 2 * outcome.cases / took
        figures["eval_with_intervals_cases_per_s"] = round(both, 2)
        figures["eval_with_intervals_percent_of_limit"] = round(100 * both / lim, 1)
    return figures


def report(f: dict[str, float | int]) -> None:
    print(
        f"evaluation of {f['eval_cases']} cases, {f['eval_replicas']} replicas, "
        f"{f['eval_latency_ms']} ms per decision; limit = replicas x "
        f"{FORWARD_PASSES_PER_POD} forward pass / latency"
    )
    print(f"{'measure':44} {'measured':>10} {'limit':>10} {'of limit':>9}")
    lim = f["eval_limit_cases_per_s"]
    print(
        f"{'candidate, cases/s':44} {f['eval_cases_per_s']:>10} {lim:>10} "
        f"{f['eval_percent_of_limit']:>8}%"
    )
    if "eval_with_baseline_cases_per_s" in f:
        print(
            f"{'candidate + stable baseline, cases/s':44} "
            f"{f['eval_with_baseline_cases_per_s']:>10} {lim:>10} "
            f"{f['eval_with_baseline_percent_of_limit']:>8}%"
        )
    if "eval_with_intervals_cases_per_s" in f:
        print(
            f"{'  the same, gates on 95 % intervals, cases/s':44} "
            f"{f['eval_with_intervals_cases_per_s']:>10} {lim:>10} "
            f"{f['eval_with_intervals_percent_of_limit']:>8}%"
        )
    print(
        f"{'  from the first case counted to the last':44} {f['eval_steady_cases_per_s']:>10} "
        f"{lim:>10} {f['eval_steady_percent_of_limit']:>8}%"
    )
    print(f"{'  first case counted after (s)':44} {f['eval_first_case_after_s']:>10}")
    print(f"{'zero latency, cases/s':44} {f['eval_zero_latency_cases_per_s']:>10}")
    print(f"{'zero latency, fixed cost per case (ms)':44} {f['eval_fixed_cost_ms_per_case']:>10}")
    print(f"{'  CPU of the activity per case (ms)':44} {f['eval_worker_cpu_ms_per_case']:>10}")
    print(
        f"{'  CPU of the runtime simulator per case (ms)':44} "
        f"{f['eval_runtime_sim_cpu_ms_per_case']:>10}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", type=int, default=500, help="golden cases (1-5000)")
    parser.add_argument("--quick", action="store_true", help="100 cases, no baseline run")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--timeout", type=float, default=900, help="seconds for the whole run")
    parser.add_argument(
        "--replicas", type=int, default=REPLICAS, help="Pods of each revision (1-10)"
    )
    parser.add_argument(
        "--latency-ms", type=int, default=LATENCY_MS, help="the model's time per decision"
    )
    args = parser.parse_args()
    cases = 100 if args.quick else max(1, min(args.cases, 5000))
    replicas = max(1, min(args.replicas, 10))
    latency_ms = max(1, args.latency_ms)
    state = Path(tempfile.mkdtemp(prefix="dmrollout-bench-eval-"))
    env = LocalEnv(state)
    t0 = time.monotonic()
    try:
        env.start_cluster()
        env.start_simulators()
        print(f"cluster and simulators up in {time.monotonic() - t0:.1f} s")
        figures = asyncio.run(
            asyncio.wait_for(measure(env, cases, args.quick, replicas, latency_ms), args.timeout)
        )
    finally:
        env.stop()
    report(figures)
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"whole run {time.monotonic() - t0:.1f} s (state and logs in {state})")


if __name__ == "__main__":
    main()
