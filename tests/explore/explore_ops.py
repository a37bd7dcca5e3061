"""The lifecycle explorer's vocabulary: the operations a user or a fault applies to one
DecisionModel, a seeded generator of sequences of them, and the spec they lead to.

Pure (no cluster): an operation is data, so a sequence is a seed's reproducible output, can be
written to a file (``seeds/``), read back, and shrunk by dropping operations. What an operation
does to the live environment is ``explore_apply``'s business.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Final

# The model's tags in the lifecycle's own registry repository. "bad" answers at 0.3, under the
# gate's 0.5: with evaluation on it must be rolled back, never served.
GOOD_TAGS: Final = ("v1", "v2", "v3")
BAD_TAG: Final = "bad"
RUNTIME_FAULTS: Final = ("digest", "device", "load-fails", "unauthorized", "latency-ms")
# A CPU request no node of the local cluster has: the candidate's Pods stay Pending
# (PodsUnschedulable) until a later spec change, or the healing at the end, asks for less.
UNSCHEDULABLE_CPU: Final = "9000"

# Weights: what a platform team does often weighs more than what happens rarely. Faults of the
# whole environment (Temporal, the API server) are rare and short: each stops every lifecycle
# running beside this one.
WEIGHTS: Final[dict[str, int]] = {
    "tag": 10,
    "replicas": 4,
    "gate": 4,
    "promotion": 4,
    "republish": 3,
    "resources": 2,
    "unschedulable": 2,
    "pin": 2,
    "manual_promotion_field": 1,
    "approve": 6,
    "reject": 2,
    "abort": 3,
    "retry": 4,
    "undo": 3,
    "rollback_to": 2,
    "scale": 3,
    "delete_pod": 4,
    "delete_deployment": 2,
    "foreign_service": 2,
    "foreign_service_gone": 3,
    "runtime_fault": 4,
    "runtime_heal": 5,
    "secret_unlabel": 2,
    "secret_fix": 3,
    "worker_restart": 3,
    "controller_restart": 3,
    # A new worker build (a helm upgrade of the worker Deployment), plain or with the old
    # build kept on the draining list; a standby controller taking the Lease from a killed one.
    "worker_upgrade": 2,
    "controller_failover": 2,
    "temporal_stop": 1,
    "temporal_refused": 2,
    "apiserver_pause": 1,
    "wait": 10,
    # Until the DecisionModel rests (bounded): what a person does who watches `kubectl get dm`.
    "rest": 3,
    # The decision records' signing key Secret deleted, and created again (issue 38).
    "record_key_gone": 1,
    "record_key_back": 2,
}
FAULT_KINDS: Final = frozenset(
    {
        "delete_pod",
        "delete_deployment",
        "foreign_service",
        "runtime_fault",
        "secret_unlabel",
        "record_key_gone",
        "worker_restart",
        "controller_restart",
        "worker_upgrade",
        "controller_failover",
        "temporal_stop",
        "temporal_refused",
        "apiserver_pause",
        "scale",
    }
)
GLOBAL_KINDS: Final = frozenset({"temporal_stop", "apiserver_pause"})


@dataclass(frozen=True)
class Op:
    kind: str
    arg: str = ""

    def __str__(self) -> str:
        return f"{self.kind}({self.arg})" if self.arg else self.kind


@dataclass
class Desired:
    """The spec the operations so far ask for, as a user would read it back."""

    tag: str = "v1"
    replicas: int = 1
    gate: bool = False
    # The gate judged by the sequential test (issue 35): stops early, keeps a ledger.
    sequential: bool = False
    # A gate the golden set can never pass (minAccuracy 0.99 on 30 cases, confidence 0.95)
    # under onInconclusive Reject: each rollout is refused before anything is made (issue 35
    # item 6), the stable serves.
    strict: bool = False
    manual: bool = False
    # spec.manualPromotion (the reference's boolean) instead of rollout.promotion: Manual.
    manual_field: bool = False
    cpu: str = "100m"
    # spec.digest pinned to the tag's digest when pinned; a re-publish of the tag since then
    # makes the pin stale (the registry no longer answers it for the tag).
    pinned: bool = False
    pin_stale: bool = False

    @property
    def should_serve(self) -> bool:
        """Whether this spec, with every fault healed, must end up serving."""
        return (self.tag != BAD_TAG or not self.gate) and not self.pin_stale and not self.strict

    def spec(self, repo: str, dataset: str, digest: str | None = None) -> dict[str, Any]:
        rollout: dict[str, Any] = {"promotion": "Manual" if self.manual else "Automatic"}
        if self.manual_field:  # the reference's boolean alone, as a migrated spec has it
            rollout = {"promotion": None, "manualPromotion": True}
        else:
            rollout["manualPromotion"] = None
        if self.strict:
            rollout["evaluation"] = {
                "datasetRef": {"configMapRef": {"name": dataset, "key": "cases.jsonl"}},
                "minAccuracy": "0.99",
                "confidence": "0.95",
                "onInconclusive": "Reject",
            }
        elif self.gate:
            rollout["evaluation"] = {
                "datasetRef": {"configMapRef": {"name": dataset, "key": "cases.jsonl"}},
                # The good tags score 0.68 on this 30-case set, the bad one 0.33 (simulated
                # answers): 0.50 splits them at point values; the sequential test needs room
                # to decide within 30 cases (0.30: passed after 9; the bad one undecided, so
                # rejected) — at 0.50 it cannot, and a retry on the same cases never helps.
                "minAccuracy": "0.30" if self.sequential else "0.50",
                "confidence": "0.95" if self.sequential else None,
                "sequential": True if self.sequential else None,
                # An undecided bad model (30 cases) is rolled back, as the point gate fails it.
                "onInconclusive": "Reject" if self.sequential else None,
                # Judged against the stable and on calibration too, in rounds (loose ceilings:
                # they decide no candidate's fate here; the rounds and the ledger are tried).
                "maxNegativeFlipRate": "0.90" if self.sequential else None,
                "maxECE": "0.90" if self.sequential else None,
            }
        else:
            rollout["evaluation"] = None
        return {
            "model": f"{repo}:{self.tag}",
            "digest": digest if self.pinned else None,
            "replicas": self.replicas,
            "resources": {"requests": {"cpu": self.cpu}},
            "rollout": rollout,
        }

    def after(self, op: Op) -> Desired:
        d = replace(self)
        if op.kind == "tag":  # a GitOps commit of a new tag writes no digest of the old one
            d.tag, d.pinned, d.pin_stale = op.arg, False, False
        elif op.kind == "pin":
            d.pinned, d.pin_stale = op.arg == "on", False
        elif op.kind == "republish" and op.arg == d.tag and d.pinned:
            d.pin_stale = True
        elif op.kind in ("resources", "unschedulable"):
            d.cpu = op.arg
        elif op.kind == "manual_promotion_field":
            d.manual, d.manual_field = op.arg == "true", op.arg == "true"
        elif op.kind == "replicas":
            d.replicas = int(op.arg)
        elif op.kind == "gate":
            d.gate, d.sequential = op.arg != "off", op.arg == "sequential"
            d.strict = op.arg == "strict"
        elif op.kind == "promotion":
            d.manual, d.manual_field = op.arg == "Manual", False
        return d


def _arg(kind: str, rng: random.Random, desired: Desired) -> str:
    if kind == "tag":
        return rng.choice([t for t in (*GOOD_TAGS, BAD_TAG) if t != desired.tag])
    if kind == "replicas":
        return "2" if desired.replicas == 1 else "1"
    if kind == "gate":
        return "off" if desired.gate else rng.choice(("on", "sequential", "strict"))
    if kind == "promotion":
        return "Automatic" if desired.manual else "Manual"
    if kind == "republish":
        return rng.choice(GOOD_TAGS)
    if kind == "resources":
        return "200m" if desired.cpu == "100m" else "100m"
    if kind == "unschedulable":
        return UNSCHEDULABLE_CPU
    if kind == "pin":
        return "off" if desired.pinned else "on"
    if kind == "manual_promotion_field":
        return "false" if desired.manual_field else "true"
    if kind == "scale":
        return str(rng.choice((0, 1, 3)))
    if kind == "rollback_to":
        return rng.choice(("last", "previous"))
    if kind == "runtime_fault":
        return rng.choice(RUNTIME_FAULTS)
    if kind == "worker_upgrade":
        return rng.choice(("plain", "draining"))
    if kind == "temporal_stop":
        return str(rng.choice((5, 15)))
    if kind == "temporal_refused":
        return str(rng.choice((10, 40)))
    if kind == "apiserver_pause":
        return str(rng.choice((3, 10)))
    if kind == "wait":
        return str(rng.choice((2, 5, 10, 20)))
    return ""


def generate(seed: int, count: int, allow_global: bool = True) -> list[Op]:
    """``count`` operations from ``seed``: the same seed gives the same sequence."""
    rng = random.Random(seed)
    kinds = [k for k in WEIGHTS if allow_global or k not in GLOBAL_KINDS]
    weights = [WEIGHTS[k] for k in kinds]
    desired = Desired()
    ops: list[Op] = []
    while len(ops) < count:
        kind = rng.choices(kinds, weights)[0]
        op = Op(kind, _arg(kind, rng, desired))
        desired = desired.after(op)
        ops.append(op)
    return ops


def final_desired(ops: list[Op]) -> Desired:
    desired = Desired()
    for op in ops:
        desired = desired.after(op)
    return desired


@dataclass
class Sequence:
    """A kept sequence: the seed that made it (or -1 for a hand-written one) and its ops."""

    seed: int
    ops: list[Op] = field(default_factory=list)
    note: str = ""

    def dumps(self) -> str:
        return json.dumps(
            {"seed": self.seed, "note": self.note, "ops": [asdict(o) for o in self.ops]}, indent=1
        )

    @classmethod
    def loads(cls, text: str) -> Sequence:
        raw = json.loads(text)
        return cls(raw["seed"], [Op(**o) for o in raw["ops"]], raw.get("note", ""))
