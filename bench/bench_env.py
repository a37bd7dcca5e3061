"""What every benchmark that runs the product starts with: the local environment with the CRD,
a ``dmrollout worker`` and a ``dmrollout controller`` as real processes (as ``make demo`` runs
them), the ``laya:v2`` model in the registry and the namespace the benchmark works in.

One place for it, so the benchmarks measure the same product set-up (overhead, history events,
idle API, fleet) and a change to how the product starts reaches all of them.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from decisionmodel.api.crd import CRD_NAME
from localenv.cluster import DEFAULT_NODES, FakeNode
from localenv.demo import CRD, product_env
from localenv.env import REGISTRY_URL, LocalEnv
from localenv.processes import ManagedProcess


@dataclass
class Product:
    """How the worker and the controller are started: arguments after ``python -m controller.cli
    controller`` and environment beyond the product's own (``localenv.demo.product_env``)."""

    controller_args: list[str] = field(default_factory=list)
    controller_env: dict[str, str] = field(default_factory=dict)
    # One controller, nothing to elect: on a saturated host a missed Lease renewal ends the
    # process (as it must in a cluster, where its Deployment restarts it) and with it the run.
    leader_election: bool = False


def fleet_nodes(size: int) -> tuple[FakeNode, ...]:
    """The default nodes plus a CPU node per 100 DecisionModels (and a fifth more, for
    prefetch Jobs and candidates): a node holds 250 Pods (MAX_PODS), so this leaves room; a
    Pod the scheduler cannot place would hold its rollout (and its activity slot) until a phase
    deadline."""
    extra = -(-size * 12 // 1000)  # ceil(1.2 * size / 100)
    cpu = {"dmrollout.dev/node-class": "cpu"}
    return DEFAULT_NODES + tuple(
        FakeNode(f"kwok-cpu-{i}", f"100.72.{10 + i}.0/24", cpu) for i in range(1, extra + 1)
    )


def start_env(env: LocalEnv) -> None:
    """The local environment with the DecisionModel CRD established."""
    env.start()
    env.cluster.establish_crd(CRD, CRD_NAME)


def start_product(
    env: LocalEnv, state: Path, namespace: str, product: Product | None = None
) -> dict[str, ManagedProcess]:
    """Start ``env`` and the product in it; the worker and controller processes by name
    (stopped with ``env.stop()``)."""
    start_env(env)
    return start_processes(env, state, namespace, product)


def start_processes(
    env: LocalEnv, state: Path, namespace: str, product: Product | None = None
) -> dict[str, ManagedProcess]:
    """The product in an environment already started (``start_env``)."""
    product = product or Product()
    cluster = env.cluster
    penv = {**os.environ, **product_env(env)}
    if not product.leader_election:
        penv["DMROLLOUT_CONTROLLER_LEADER_ELECTION"] = "false"
    cli = [sys.executable, "-m", "controller.cli"]
    procs: dict[str, ManagedProcess] = {}
    for name, args, extra in (
        ("worker", [*cli, "worker"], {}),
        ("controller", [*cli, "controller", *product.controller_args], product.controller_env),
    ):
        procs[name] = ManagedProcess(name, args, state / "logs", env=penv | extra).start()
        env.extra_processes.append(procs[name])
    with httpx.Client(trust_env=False) as http:
        http.put(
            f"{REGISTRY_URL}/_sim/models/library/laya/v2",
            json={"accuracy": 0.95, "revision": "v2"},
        ).raise_for_status()
    cluster.kubectl("create", "namespace", namespace)
    return procs


FLEET_KEY_SECRET = "fleet-api-key"


def fleet_model(
    name: str, namespace: str, model: str = "laya:en", auth: bool = False
) -> dict[str, Any]:
    """One DecisionModel of a fleet: one CPU replica of ``model``; with ``auth``, its API key
    from the fleet's Secret (``api_key_secret``)."""
    spec: dict[str, Any] = {"model": model, "replicas": 1, "device": "cpu"}
    if auth:
        spec["auth"] = {"apiKeySecretRef": {"name": FLEET_KEY_SECRET, "key": "token"}}
    return {
        "apiVersion": "decisionmodel.io/v1alpha1",
        "kind": "DecisionModel",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def api_key_secret(env: LocalEnv, namespace: str) -> None:
    """The API-key Secret the fleet's ``auth`` DecisionModels name (a bench value, not a secret)."""
    env.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": FLEET_KEY_SECRET,
                "namespace": namespace,
                "labels": {"decisionmodel.io/api-key": "true"},
            },
            "stringData": {"token": "bench-fleet-key"},
        }
    )


def apply_fleet(
    env: LocalEnv, namespace: str, names: list[str], auth_every: int = 0, first: int = 0
) -> None:
    """The DecisionModels ``names``, one ``kubectl apply`` per 100: "at once", in bounded calls.
    With ``auth_every`` k, every k-th of the fleet (``names`` are its members from number
    ``first`` on) has ``spec.auth``."""
    for i in range(0, len(names), 100):
        docs = (
            fleet_model(n, namespace, auth=auth_every > 0 and (first + i + j) % auth_every == 0)
            for j, n in enumerate(names[i : i + 100])
        )
        env.cluster.kubectl(
            "apply", "-f", "-", timeout=300, input="\n---\n".join(json.dumps(d) for d in docs)
        )
