"""``dmrollout demo``: the local environment, the product, and two rollouts to watch.

Starts the control plane, Temporal (UI), the simulators, a ``dmrollout worker`` and a
``dmrollout controller`` (real processes, the same commands a cluster runs), applies the sample
DecisionModel ``support-router`` (laya:en), waits for Ready, then rolls ``laya:v2`` with a
golden-set evaluation (minAccuracy, maxAccuracyDrop against the stable, judged on 95 % intervals)
and shows the promotion with each gate's verdict line.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

import httpx

from decisionmodel.api.crd import CRD_NAME
from decisionmodel.rollout.evaluation_status import decision_lines, design_lines
from localenv.env import REGISTRY_HOST, REGISTRY_URL, LocalEnv
from localenv.paths import REPO_ROOT
from localenv.processes import ManagedProcess
from simulators.answers import make_golden_set

NAMESPACE = "demo"
NAME = "support-router"
CRD = REPO_ROOT / "deploy" / "crd" / "decisionmodels.decisionmodel.io.yaml"
HEALTH_PORT = 8080
GOLDEN_REF = {"name": "support-router-golden", "key": "cases.jsonl"}


def _say(text: str) -> None:
    print(f"==> {text}", flush=True)


def product_env(env: LocalEnv) -> dict[str, str]:
    return {
        "DMROLLOUT_KUBECONFIG": str(env.cluster.kubeconfig),
        "DMROLLOUT_OLLAYA_REGISTRY": REGISTRY_URL,
        "DMROLLOUT_ALLOWED_REGISTRIES": json.dumps([REGISTRY_HOST]),
        "DMROLLOUT_ALLOW_INSECURE_REGISTRIES": "true",
        "DMROLLOUT_TEMPORAL_ADDRESS": env.temporal.address,
        "DMROLLOUT_TEMPORAL_UI_URL": "http://127.0.0.1:8233",
        "DMROLLOUT_CONTROLLER_LEASE_NAMESPACE": "default",
        "DMROLLOUT_CONTROLLER_HEALTH_PORT": str(HEALTH_PORT),
        "DMROLLOUT_WORKER_METRICS_PORT": "8081",
        # Plain /metrics next to the probes (the explicit opt-in): the controller and the
        # worker share the host here, and the HTTPS default would put both on 8443.
        "DMROLLOUT_METRICS_SECURE": "false",
        # As the chart: the worker is a build of a Worker Deployment, its rollouts pinned to
        # it (docs/operations.md "Upgrades and workflow versioning";
        # `temporal worker deployment list`).
        "DMROLLOUT_WORKER_DEPLOYMENT_NAME": "dmrollout",
    }


def _wait(check: Any, timeout: float, what: str, stop: threading.Event) -> Any:
    deadline = time.monotonic() + timeout
    while not stop.is_set():
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"demo: {what} did not happen within {timeout:.0f}s")
        stop.wait(0.5)
    raise KeyboardInterrupt


def run_demo(env: LocalEnv, stop: threading.Event, state: Path) -> float:
    """Run the two rollouts; returns the seconds they took."""
    began = time.monotonic()
    cluster = env.cluster
    cluster.establish_crd(CRD, CRD_NAME)
    penv = product_env(env)
    logs = state / "logs"
    python = sys.executable
    for name, args in (
        ("worker", [python, "-m", "controller.cli", "worker"]),
        ("controller", [python, "-m", "controller.cli", "controller"]),
    ):
        proc = ManagedProcess(name, args, logs, env={**os.environ, **penv}).start()
        env.extra_processes.append(proc)
    _say(f"worker and controller started (logs in {logs})")

    with httpx.Client(trust_env=False) as http:
        # The next model version: a better one, so the evaluation passes and promotes.
        http.put(
            f"{REGISTRY_URL}/_sim/models/library/laya/v2", json={"accuracy": 0.95, "revision": "v2"}
        ).raise_for_status()
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    golden = "".join(json.dumps(c) + "\n" for c in make_golden_set(50, seed=2026))
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "support-router-golden", "namespace": NAMESPACE},
            "data": {"cases.jsonl": golden},
        }
    )
    dm = {
        "apiVersion": "decisionmodel.io/v1alpha1",
        "kind": "DecisionModel",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        # Two replicas share one model store: ReadWriteMany, else the DecisionModel is rightly
        # Degraded (CacheNotShareable, seed 001) while it serves.
        "spec": {
            "model": "laya:en",
            "replicas": 2,
            "device": "cpu",
            "cache": {"accessModes": ["ReadWriteMany"]},
        },
    }
    cluster.apply(dm)
    _say(f"applied DecisionModel {NAMESPACE}/{NAME} (laya:en, 2 replicas)")

    def status() -> dict[str, Any]:
        r = cluster.kubectl("get", "dm", NAME, "-n", NAMESPACE, "-o", "json", check=False)
        return (json.loads(r.stdout).get("status") or {}) if r.returncode == 0 else {}

    _wait(lambda: status().get("phase") == "Ready", 300, "first rollout Ready", stop)
    print(cluster.kubectl("get", "dm", "-n", NAMESPACE, "-o", "wide").stdout, flush=True)
    first = status()["stableRevision"]["hash"]

    cluster.kubectl(
        "patch", "dm", NAME, "-n", NAMESPACE, "--type=merge", "-p",
        json.dumps(
            {
                "spec": {
                    "model": "laya:v2",
                    "rollout": {
                        "evaluation": {
                            "datasetRef": {"configMapRef": GOLDEN_REF},
                            "minAccuracy": "0.85",
                            "maxAccuracyDrop": "0.02",
                            "confidence": "0.95",
                        }
                    },
                }
            }
        ),
    )  # fmt: skip
    _say("changed the model to laya:v2 with a golden-set evaluation: watch it roll")
    seen: set[str] = set()

    def promoted() -> bool:
        st = status()
        phase = st.get("phase", "")
        if phase and phase not in seen:
            seen.add(phase)
            print(f"    phase {phase}", flush=True)
        stable = (st.get("stableRevision") or {}).get("hash")
        return bool(stable and stable != first and phase == "Ready")

    _wait(promoted, 300, "second rollout promoted", stop)
    st = status()
    ev = st.get("evaluation") or {}
    _say(
        f"promoted laya:v2: accuracy {ev.get('accuracy')} (stable {ev.get('baselineAccuracy')}), "
        f"ECE {ev.get('ece')}, {ev.get('cases')} cases"
    )
    confidence = (ev.get("decision") or {}).get("confidence")
    for line in decision_lines(ev.get("decision")):
        print(f"    {line} (confidence {confidence}, {ev.get('cases')} cases)", flush=True)
    # What the golden set could decide, checked before the rollout made anything (issue 35).
    for line in design_lines(st.get("evaluationDesign")):
        print(f"    before the rollout: {line}", flush=True)
    print(cluster.kubectl("get", "dm", "-n", NAMESPACE, "-o", "wide").stdout, flush=True)
    return time.monotonic() - began


def ui_link() -> str:
    query = urllib.parse.quote(f'DmName="{NAME}"')
    return f"http://127.0.0.1:8233/namespaces/default/workflows?query={query}"
