"""The `decisionmodel_*` Prometheus series of seed 004, fed only from accepted status writes.

Seed 004: per-DecisionModel series are "updated only after a status write the API server
accepted" and "when a DecisionModel is deleted, every series for it is removed". So nothing here
reads the cluster: the controller calls `record_accepted_status` with the status before and after
a write (or two consecutive watch observations, which are persisted by definition), and `forget`
on deletion. Every labelled child created for a DecisionModel is tracked so `forget` can remove
exactly those.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.metrics_core import Metric

from decisionmodel.vocabulary import Phase

# Seed 004's `phase` label values, in its order, plus AwaitingPromotion: dmrollout adds that phase
# for manual promotion (REFERENCE "Manual promotion"), so the one-hot must cover it too or a held
# candidate would show every phase at 0.
PHASES: Final[tuple[str, ...]] = tuple(
    str(p)
    for p in (
        Phase.PENDING,
        Phase.RESOLVING,
        Phase.CACHING,
        Phase.STARTING,
        Phase.EVALUATING,
        Phase.DEGRADED,
        Phase.PROMOTING,
        Phase.READY,
        Phase.FAILED,
        Phase.ROLLED_BACK,
        Phase.AWAITING_PROMOTION,
    )
)
ENDED: Final = (Phase.ROLLED_BACK, Phase.FAILED)
ROLLOUT_PROMOTED: Final = "promoted"
ROLLOUT_ROLLED_BACK: Final = "rolled_back"
ROLLOUT_FAILED: Final = "failed"
ROLLOUT_RESULTS: Final[tuple[str, ...]] = (ROLLOUT_PROMOTED, ROLLOUT_ROLLED_BACK, ROLLOUT_FAILED)
PROBE_RESULTS: Final[tuple[str, ...]] = (
    "ready",
    "digest_mismatch",
    "device_mismatch",
    "not_pinned",
    "error",
)
# Seed 004: "Buckets span 5s to 1h".
PHASE_DURATION_BUCKETS: Final[tuple[float, ...]] = (
    5,
    15,
    30,
    60,
    120,
    300,
    600,
    1200,
    1800,
    3600,
)

_PHASE_SET: Final = frozenset(PHASES)
_CREATED_SUFFIX: Final = "_created"

Clock = Callable[[], datetime]
DMKey = tuple[str, str]
# A promotion is identified by (stable hash, lastPromotionTime), a failure by (failed hash,
# failedAt): the same record seen again (a re-entered RolledBack after a Degraded spell, a replayed
# watch event) is never counted twice, while a genuinely new promotion of an earlier hash
# (A → B → A) or a retried revision failing again still is.
_EventKey = tuple[str | None, str | None]


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class _DMState:
    """What the metrics remember about one DecisionModel."""

    series: set[tuple[MetricWrapperBase, tuple[str, ...]]] = field(default_factory=set)
    last_promotion: _EventKey | None = None
    last_failure: _EventKey | None = None


class ControllerMetrics:
    """The seed-004 series on their own registry (a fresh one unless `registry` is given)."""

    def __init__(self, registry: CollectorRegistry | None = None, clock: Clock = _utcnow) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self._clock = clock
        self._dms: dict[DMKey, _DMState] = {}
        dm = ("namespace", "name")
        reg = self.registry
        self.phase = Gauge(
            "decisionmodel_phase",
            "1 for the DecisionModel's current phase, 0 for every other phase.",
            [*dm, "phase"],
            registry=reg,
        )
        self.model_ready_replicas = Gauge(
            "decisionmodel_model_ready_replicas",
            "Serving replicas that passed the model-ready gate (status.replicas.modelReady).",
            dm,
            registry=reg,
        )
        self.desired_replicas = Gauge(
            "decisionmodel_desired_replicas",
            "Desired number of serving replicas (status.replicas.desired).",
            dm,
            registry=reg,
        )
        self.rollouts = Counter(
            "decisionmodel_rollouts",
            "Rollout outcomes: promoted, rolled_back or failed.",
            [*dm, "result"],
            registry=reg,
        )
        self.phase_duration = Histogram(
            "decisionmodel_phase_duration_seconds",
            "Time spent in a phase, observed when that phase is left.",
            [*dm, "phase"],
            buckets=PHASE_DURATION_BUCKETS,
            registry=reg,
        )
        self.evaluation_accuracy = Gauge(
            "decisionmodel_evaluation_accuracy",
            "Accuracy of the last completed evaluation.",
            dm,
            registry=reg,
        )
        self.evaluation_ece = Gauge(
            "decisionmodel_evaluation_ece",
            "Expected Calibration Error of the last completed evaluation.",
            dm,
            registry=reg,
        )
        self.probe_results = Counter(
            "decisionmodel_probe_results",
            "Model-readiness probe outcomes, counted on a gate transition.",
            [*dm, "result"],
            registry=reg,
        )
        # dmrollout's own fault series (beyond seed 004).
        self.reaped_objects = Counter(
            "dmrollout_reaped_objects",
            "Objects of a revision no rollout owned, deleted by the reaper.",
            [*dm, "kind"],
            registry=reg,
        )
        self.rollout_restarts = Counter(
            "dmrollout_rollout_restarts",
            "Rollouts that ended without a verdict: restarted, or given up (exhausted).",
            [*dm, "result"],
            registry=reg,
        )
        self.registry_resolve_duration = Histogram(
            "decisionmodel_registry_resolve_duration_seconds",
            "Duration of a model registry tag to digest resolution.",
            registry=reg,
        )

    # --- recording --------------------------------------------------------------------------

    def record_accepted_status(
        self,
        namespace: str,
        name: str,
        old_status: Mapping[str, Any] | None,
        new_status: Mapping[str, Any],
    ) -> None:
        """Update the DecisionModel's series from a status the API server accepted.

        `old_status` is the status the write replaced; `None` means it is unknown (the first
        observation after the controller started), so no transition is inferred from it: no
        phase duration and no rollout result, only the current values and the memory that keeps
        the already-recorded promotion/failure from being counted later. Pass `{}` for a
        DecisionModel known to have had no status yet.
        """
        state = self._state(namespace, name)
        old = old_status if old_status is not None else {}
        new_phase = _known_phase(new_status.get("phase"))
        old_phase = _known_phase(old.get("phase"))

        if new_phase is not None:
            for phase in PHASES:
                self._set(
                    state, self.phase, (namespace, name, phase), 1 if phase == new_phase else 0
                )

        replicas = new_status.get("replicas")
        if isinstance(replicas, Mapping):
            ready = _number(replicas.get("modelReady"))
            desired = _number(replicas.get("desired"))
            if ready is not None:
                self._set(state, self.model_ready_replicas, (namespace, name), ready)
            if desired is not None:
                self._set(state, self.desired_replicas, (namespace, name), desired)

        self._record_evaluation(state, namespace, name, new_status.get("evaluation"))

        # A phase is left when the accepted status names another known phase; the time spent is
        # measured from the old phaseTransitionTime (when it was entered) to now.
        entered = _timestamp(old.get("phaseTransitionTime"))
        if old_phase is not None and new_phase not in (None, old_phase) and entered is not None:
            seconds = max(0.0, (self._clock() - entered).total_seconds())
            labels = (namespace, name, old_phase)
            self.phase_duration.labels(*labels).observe(seconds)
            state.series.add((self.phase_duration, labels))

        self._record_rollout_result(state, namespace, name, old_status, new_status)

    def record_probe_transition(self, namespace: str, name: str, result: str) -> None:
        """Count one model-readiness gate transition of a Pod (not a steady-state re-check)."""
        if result not in PROBE_RESULTS:
            raise ValueError(f"unknown probe result {result!r}; expected one of {PROBE_RESULTS}")
        state = self._state(namespace, name)
        self._ensure_counters(state, namespace, name)
        self.probe_results.labels(namespace, name, result).inc()

    def record_reaped(self, namespace: str, name: str, kind: str) -> None:
        state = self._state(namespace, name)
        labels = (namespace, name, kind)
        self.reaped_objects.labels(*labels).inc()
        state.series.add((self.reaped_objects, labels))

    def record_restart(self, namespace: str, name: str, result: str) -> None:
        """``result``: "restarted" or "exhausted"."""
        state = self._state(namespace, name)
        labels = (namespace, name, result)
        self.rollout_restarts.labels(*labels).inc()
        state.series.add((self.rollout_restarts, labels))

    def observe_resolve(self, seconds: float) -> None:
        """One registry tag→digest resolution (only actual registry calls, seed 004)."""
        self.registry_resolve_duration.observe(seconds)

    def forget(self, namespace: str, name: str) -> None:
        """Remove every series of a deleted DecisionModel and what was remembered about it."""
        state = self._dms.pop((namespace, name), None)
        if state is None:
            return
        for metric, labels in state.series:
            metric.remove(*labels)

    def render(self) -> bytes:
        """The registry in the Prometheus text format 0.0.4.

        The client library adds a `<name>_created` sample to counters and histograms; seed 004
        lists exactly its series, so those are left out here instead of being disabled
        process-wide (`disable_created_metrics` is a global switch).
        """
        return generate_latest(_WithoutCreated(self.registry))

    # --- helpers ----------------------------------------------------------------------------

    def _state(self, namespace: str, name: str) -> _DMState:
        key = (namespace, name)
        state = self._dms.get(key)
        if state is None:
            state = self._dms[key] = _DMState()
        return state

    def _set(self, state: _DMState, gauge: Gauge, labels: tuple[str, ...], value: float) -> None:
        gauge.labels(*labels).set(value)
        state.series.add((gauge, labels))

    def _ensure_counters(self, state: _DMState, namespace: str, name: str) -> None:
        # Counters start at 0 for every result, so the first real increment shows up in
        # increase()/rate() instead of being the series' first sample.
        for counter, results in (
            (self.rollouts, ROLLOUT_RESULTS),
            (self.probe_results, PROBE_RESULTS),
        ):
            for result in results:
                labels = (namespace, name, result)
                if (counter, labels) not in state.series:
                    counter.labels(*labels)
                    state.series.add((counter, labels))

    def _record_evaluation(
        self, state: _DMState, namespace: str, name: str, evaluation: object
    ) -> None:
        # Seed 004: "Only set once an evaluation has completed"; a running or cleared evaluation
        # leaves the last completed values in place.
        if not isinstance(evaluation, Mapping):
            return
        if evaluation.get("result") is None and evaluation.get("completedAt") is None:
            return
        accuracy = _number(evaluation.get("accuracy"))
        ece = _number(evaluation.get("ece"))
        if accuracy is not None:
            self._set(state, self.evaluation_accuracy, (namespace, name), accuracy)
        if ece is not None:
            self._set(state, self.evaluation_ece, (namespace, name), ece)

    def _record_rollout_result(
        self,
        state: _DMState,
        namespace: str,
        name: str,
        old_status: Mapping[str, Any] | None,
        new: Mapping[str, Any],
    ) -> None:
        self._ensure_counters(state, namespace, name)
        promotion = _promotion_key(new)
        failure = _failure_key(new)
        new_phase = new.get("phase")
        if old_status is None:
            # Unknown past: remember what is already recorded, count nothing.
            if promotion[0] is not None:
                state.last_promotion = promotion
            if new_phase in ENDED:
                state.last_failure = failure
            return

        old_promotion = _promotion_key(old_status)
        if (
            promotion[0] is not None
            and promotion[0] != old_promotion[0]
            and promotion[1] != old_promotion[1]
            and promotion != state.last_promotion
        ):
            state.last_promotion = promotion
            self.rollouts.labels(namespace, name, ROLLOUT_PROMOTED).inc()

        old_phase = old_status.get("phase")
        entered_terminal = new_phase in ENDED and new_phase != old_phase
        if entered_terminal and failure != state.last_failure:
            state.last_failure = failure
            result = ROLLOUT_ROLLED_BACK if new_phase == Phase.ROLLED_BACK else ROLLOUT_FAILED
            self.rollouts.labels(namespace, name, result).inc()


class _WithoutCreated:
    """A collector view of a registry without the `_created` samples."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterable[Metric]:
        return _strip_created(self._registry.collect())


def _strip_created(families: Iterable[Metric]) -> Iterator[Metric]:
    for family in families:
        if family.type in ("counter", "histogram", "summary"):
            stripped = Metric(family.name, family.documentation, family.type, family.unit)
            stripped.samples = [s for s in family.samples if not s.name.endswith(_CREATED_SUFFIX)]
            yield stripped
        else:
            yield family


def _known_phase(value: object) -> str | None:
    return value if isinstance(value, str) and value in _PHASE_SET else None


def _number(value: object) -> float | None:
    """Status decimals are strings ("0.9400"), replica counts integers."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _timestamp(value: object) -> datetime | None:
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return None
    else:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _text(value: object) -> str | None:
    if value is None:
        return None
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _revision_hash(status: Mapping[str, Any], field_name: str) -> str | None:
    revision = status.get(field_name)
    if isinstance(revision, Mapping):
        value = revision.get("hash")
        return value if isinstance(value, str) and value else None
    return None


def _promotion_key(status: Mapping[str, Any]) -> _EventKey:
    return (_revision_hash(status, "stableRevision"), _text(status.get("lastPromotionTime")))


def _failure_key(status: Mapping[str, Any]) -> _EventKey:
    failed = status.get("failedRevision")
    failed_at = failed.get("failedAt") if isinstance(failed, Mapping) else None
    return (_revision_hash(status, "failedRevision"), _text(failed_at))
