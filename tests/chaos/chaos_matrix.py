"""The cells of the chaos matrix: fault kind x rollout step, and how long each fault lasts.

Two modes (``DMROLLOUT_FULL=chaos`` or not):

- default (unset, as in ``make test``): one representative step per fault kind, eight cells,
  each fault held 20 s (a SIGKILLed process is down 5 s), so the whole suite stays under its
  20-minute budget on two cores;
- ``full`` (``make chaos``): every fault at every step it can reach, 54 cells, with the
  issue's lengths: API server stopped 60 s, registry 500 for 2 minutes, Temporal stopped 30 s,
  silent peers 60 s, the runtime unreachable from the worker 60 s; a SIGKILLed or OOM-killed
  process is down 10 s. The six kinds of issue 10 run at all eight steps; the worker's OOM kill
  mid-evaluation; the runtime unreachable at the five steps where the worker talks to the
  runtime's Pods (start, warm-up, evaluation, promote's re-check, the grace's watch); before
  start there are no Pods to reach, and awaiting an approval the worker does not call them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from harness.tiers import full


class FaultKind(enum.StrEnum):
    APISERVER = "apiserver_stop"
    TEMPORAL = "temporal_stop"
    REGISTRY = "registry_500"
    SILENT = "silent_peers"
    WORKER = "worker_kill"
    CONTROLLER = "controller_kill"
    OOM = "worker_oom"
    RUNTIME = "runtime_unreachable"

    @property
    def needs_cgroup(self) -> bool:
        """The worker runs in a cgroup of its own (localenv/cgroups.py)."""
        return self in (FaultKind.OOM, FaultKind.RUNTIME)

    @property
    def blocks_kube(self) -> bool:
        """Kubernetes calls of the worker and the controller do not get through."""
        return self in (FaultKind.APISERVER, FaultKind.SILENT)


class Step(enum.StrEnum):
    RESOLVE = "resolve"
    PREFETCH = "prefetch"
    START = "start"
    WARMUP_INSPECT = "warmup_inspect"
    EVALUATE = "evaluate"
    AWAITING_PROMOTION = "awaiting_promotion"
    PROMOTE = "promote"
    GRACE = "grace"

    @property
    def manual(self) -> bool:
        """The candidate is promoted by an approval (the test sends it)."""
        return self in (Step.AWAITING_PROMOTION, Step.PROMOTE)


@dataclass(frozen=True)
class Cell:
    fault: FaultKind
    step: Step
    seconds: float

    @property
    def id(self) -> str:
        return f"{self.fault}-{self.step}"


FULL_SECONDS = {
    FaultKind.APISERVER: 60.0,
    FaultKind.REGISTRY: 120.0,
    FaultKind.TEMPORAL: 30.0,
    FaultKind.SILENT: 60.0,
    FaultKind.WORKER: 10.0,
    FaultKind.CONTROLLER: 10.0,
    FaultKind.OOM: 10.0,
    FaultKind.RUNTIME: 60.0,
}
QUICK_SECONDS = {
    FaultKind.APISERVER: 20.0,
    FaultKind.REGISTRY: 20.0,
    FaultKind.TEMPORAL: 20.0,
    FaultKind.SILENT: 20.0,
    FaultKind.WORKER: 5.0,
    FaultKind.CONTROLLER: 5.0,
    FaultKind.OOM: 5.0,
    FaultKind.RUNTIME: 20.0,
}

# One step per fault kind, each step once: where that fault does the most to a rollout.
DEFAULT_STEPS = {
    FaultKind.REGISTRY: Step.RESOLVE,  # resolve's only peer is the registry
    FaultKind.WORKER: Step.PREFETCH,  # a Job in flight, adopted by the retried attempt
    FaultKind.APISERVER: Step.START,  # waiting for Pods through the API
    FaultKind.TEMPORAL: Step.WARMUP_INSPECT,  # a long activity heartbeating into the outage
    FaultKind.SILENT: Step.EVALUATE,  # decisions that never answer, status writes that hang
    FaultKind.CONTROLLER: Step.AWAITING_PROMOTION,  # the approval goes through the controller
    FaultKind.OOM: Step.EVALUATE,  # the case: a worker killed for its memory mid-run
    FaultKind.RUNTIME: Step.PROMOTE,  # the re-check before traffic moves cannot reach the Pods
}

# The steps a fault is tried at in the full matrix (every step unless named here).
REACHES = {
    FaultKind.OOM: (Step.EVALUATE,),
    FaultKind.RUNTIME: (
        Step.START,
        Step.WARMUP_INSPECT,
        Step.EVALUATE,
        Step.PROMOTE,
        Step.GRACE,
    ),
}


def full_mode() -> bool:
    return full("chaos")


def cells(full: bool) -> list[Cell]:
    seconds = FULL_SECONDS if full else QUICK_SECONDS
    if full:
        return [Cell(f, s, seconds[f]) for f in FaultKind for s in REACHES.get(f, tuple(Step))]
    return [Cell(f, s, seconds[f]) for f, s in DEFAULT_STEPS.items()]
