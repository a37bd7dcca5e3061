"""The `decisionmodel_*` Prometheus series of seed 004, fed only from accepted status writes.

Seed 004: per-DecisionModel series are "updated only after a status write the API server
accepted" and "when a DecisionModel is deleted, every series for it is removed". So nothing here
reads the cluster: the controller calls `record_accepted_status` with the status before and after
a write (or two consecutive watch observations, which are persisted by definition), and `forget`
on deletion, which drops every series of that DecisionModel (they are kept per DecisionModel,
``controller/serve/dm_series.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.metrics_core import Metric

from controller.serve.dm_series import CounterSpec, DMSeries, DMSeriesCollector, Durations, EventKey
from decisionmodel.vocabulary import ConditionStatus, ConditionType, Phase, StatusKey

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
MODEL_READY: Final = "decisionmodel_model_ready_replicas"
DESIRED: Final = "decisionmodel_desired_replicas"
ACCURACY: Final = "decisionmodel_evaluation_accuracy"
ECE: Final = "decisionmodel_evaluation_ece"
RESTARTS: Final = "decisionmodel_rollout_restarts"
CLEANUP_PENDING: Final = "decisionmodel_cleanup_pending"
REAPED: Final = "decisionmodel_reaped_objects"
ROLLOUTS: Final = CounterSpec(
    "decisionmodel_rollouts", "Rollout outcomes: promoted, rolled_back or failed.", "result"
)
PROBES: Final = CounterSpec(
    "decisionmodel_probe_results",
    "Model-readiness probe outcomes, counted on a gate transition.",
    "result",
)
_CREATED_SUFFIX: Final = "_created"

Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


class ControllerMetrics:
    """The seed-004 series on their own registry (a fresh one unless `registry` is given)."""

    def __init__(self, registry: CollectorRegistry | None = None, clock: Clock = _utcnow) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self._clock = clock
        self._dms = DMSeriesCollector(
            PHASES,
            "1 for the DecisionModel's current phase, 0 for every other phase.",
            {
                MODEL_READY: "Serving replicas that passed the model-ready gate "
                "(status.replicas.modelReady).",
                DESIRED: "Desired number of serving replicas (status.replicas.desired).",
                ACCURACY: "Accuracy of the last completed evaluation.",
                ECE: "Expected Calibration Error of the last completed evaluation.",
                CLEANUP_PENDING: "1 while a rollout's cleanup keeps failing (condition "
                "CleanupPending=True), else 0.",
            },
            (
                ROLLOUTS,
                PROBES,
                # dmrollout's own fault series (beyond seed 004).
                CounterSpec(
                    REAPED,
                    "Objects of a revision no rollout owned, deleted by the reaper.",
                    "kind",
                ),
                CounterSpec(
                    RESTARTS,
                    "Rollouts that ended without a verdict: restarted, or given up (exhausted).",
                    "result",
                ),
            ),
            (
                "decisionmodel_phase_duration_seconds",
                "Time spent in a phase, observed when that phase is left.",
                PHASE_DURATION_BUCKETS,
            ),
        )
        self.registry.register(self._dms)
        self.registry_resolve_duration = Histogram(
            "decisionmodel_registry_resolve_duration_seconds",
            "Duration of a model registry tag to digest resolution.",
            registry=self.registry,
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
        old = old_status if old_status is not None else {}
        new_phase = _known_phase(new_status.get("phase"))
        old_phase = _known_phase(old.get("phase"))
        with self._dms.lock:
            state = self._state(namespace, name)
            _zero_counters(state)
            if new_phase is not None:
                state.phase = new_phase
            replicas = new_status.get("replicas")
            if isinstance(replicas, Mapping):
                for family, key in ((MODEL_READY, "modelReady"), (DESIRED, "desired")):
                    number = _number(replicas.get(key))
                    if number is not None:
                        state.gauges[family] = number
            _record_evaluation(state, new_status.get("evaluation"))
            state.gauges[CLEANUP_PENDING] = 1.0 if _cleanup_pending(new_status) else 0.0
            # A phase is left when the accepted status names another known phase; the time
            # spent is measured from the old phaseTransitionTime (when it was entered) to now.
            entered = _timestamp(old.get(StatusKey.PHASE_TRANSITION_TIME))
            if old_phase is not None and new_phase not in (None, old_phase) and entered:
                seconds = max(0.0, (self._clock() - entered).total_seconds())
                durations = state.durations.setdefault(
                    old_phase, Durations([0] * (len(PHASE_DURATION_BUCKETS) + 1))
                )
                durations.observe(PHASE_DURATION_BUCKETS, seconds)
            _record_rollout_result(state, old_status, new_status)

    def record_probe_transition(self, namespace: str, name: str, result: str) -> None:
        """Count one model-readiness gate transition of a Pod (not a steady-state re-check)."""
        if result not in PROBE_RESULTS:
            raise ValueError(f"unknown probe result {result!r}; expected one of {PROBE_RESULTS}")
        self._count(namespace, name, PROBES.name, result, zero_first=True)

    def record_reaped(self, namespace: str, name: str, kind: str) -> None:
        self._count(namespace, name, REAPED, kind)

    def record_restart(self, namespace: str, name: str, result: str) -> None:
        """``result``: "restarted" or "exhausted"."""
        self._count(namespace, name, RESTARTS, result)

    def observe_resolve(self, seconds: float) -> None:
        """One registry tag→digest resolution (only actual registry calls, seed 004)."""
        self.registry_resolve_duration.observe(seconds)

    def forget(self, namespace: str, name: str) -> None:
        """Remove every series of a deleted DecisionModel and what was remembered about it."""
        with self._dms.lock:
            self._dms.series.pop((namespace, name), None)

    def render(self) -> bytes:
        """The registry in the Prometheus text format 0.0.4.

        The client library adds a `<name>_created` sample to counters and histograms; seed 004
        lists exactly its series, so those are left out here instead of being disabled
        process-wide (`disable_created_metrics` is a global switch).
        """
        return generate_latest(_WithoutCreated(self.registry))

    # --- helpers ----------------------------------------------------------------------------

    def _state(self, namespace: str, name: str) -> DMSeries:
        """The DecisionModel's series (call under the collector's lock)."""
        state = self._dms.series.get((namespace, name))
        if state is None:
            state = self._dms.series[(namespace, name)] = DMSeries()
        return state

    def _count(
        self, namespace: str, name: str, family: str, label: str, zero_first: bool = False
    ) -> None:
        with self._dms.lock:
            state = self._state(namespace, name)
            if zero_first:
                _zero_counters(state)
            state.counters[(family, label)] = state.counters.get((family, label), 0.0) + 1


def _zero_counters(state: DMSeries) -> None:
    # The rollout and probe counters start at 0 for every result, so the first real increment
    # shows up in increase()/rate() instead of being the series' first sample.
    for counter, results in ((ROLLOUTS, ROLLOUT_RESULTS), (PROBES, PROBE_RESULTS)):
        for result in results:
            state.counters.setdefault((counter.name, result), 0.0)


def _cleanup_pending(status: Mapping[str, Any]) -> bool:
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return False
    return any(
        isinstance(c, Mapping)
        and c.get("type") == ConditionType.CLEANUP_PENDING
        and c.get("status") == ConditionStatus.TRUE
        for c in conditions
    )


def _record_evaluation(state: DMSeries, evaluation: object) -> None:
    # Seed 004: "Only set once an evaluation has completed"; a running or cleared evaluation
    # leaves the last completed values in place.
    if not isinstance(evaluation, Mapping):
        return
    if evaluation.get("result") is None and evaluation.get("completedAt") is None:
        return
    if evaluation.get("cases") == 0:
        return  # a sequential test with no new case: no figures of its own (issue 35)
    for family, key in ((ACCURACY, "accuracy"), (ECE, "ece")):
        number = _number(evaluation.get(key))
        if number is not None:
            state.gauges[family] = number


# A promotion is identified by (stable hash, lastPromotionTime), a failure by (failed hash,
# failedAt): the same record seen again (a re-entered RolledBack after a Degraded spell, a replayed
# watch event) is never counted twice, while a genuinely new promotion of an earlier hash
# (A → B → A) or a retried revision failing again still is.
def _record_rollout_result(
    state: DMSeries, old_status: Mapping[str, Any] | None, new: Mapping[str, Any]
) -> None:
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
        state.counters[(ROLLOUTS.name, ROLLOUT_PROMOTED)] += 1

    old_phase = old_status.get("phase")
    entered_terminal = new_phase in ENDED and new_phase != old_phase
    if entered_terminal and failure != state.last_failure:
        state.last_failure = failure
        result = ROLLOUT_ROLLED_BACK if new_phase == Phase.ROLLED_BACK else ROLLOUT_FAILED
        state.counters[(ROLLOUTS.name, result)] += 1


# What a later transition reads of the status before it (phase left and since when, the
# promotion and the failure already counted): all the controller keeps per DecisionModel.
_TRANSITION_FIELDS: Final = (
    "phase",
    StatusKey.PHASE_TRANSITION_TIME,
    StatusKey.LAST_PROMOTION_TIME,
)


def transition_memory(status: Mapping[str, Any]) -> dict[str, Any]:
    """The part of an accepted status that ``record_accepted_status`` needs as ``old_status``
    next time (the whole status, conditions and all, is several KiB per DecisionModel)."""
    kept: dict[str, Any] = {k: status[k] for k in _TRANSITION_FIELDS if k in status}
    stable = _revision_hash(status, StatusKey.STABLE_REVISION)
    if stable is not None:
        kept[StatusKey.STABLE_REVISION] = {"hash": stable}
    failed = status.get(StatusKey.FAILED_REVISION)
    if isinstance(failed, Mapping):
        kept[StatusKey.FAILED_REVISION] = {
            k: failed[k] for k in ("hash", "failedAt") if k in failed
        }
    return kept


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


def _promotion_key(status: Mapping[str, Any]) -> EventKey:
    return (
        _revision_hash(status, StatusKey.STABLE_REVISION),
        _text(status.get(StatusKey.LAST_PROMOTION_TIME)),
    )


def _failure_key(status: Mapping[str, Any]) -> EventKey:
    failed = status.get(StatusKey.FAILED_REVISION)
    failed_at = failed.get("failedAt") if isinstance(failed, Mapping) else None
    return (_revision_hash(status, StatusKey.FAILED_REVISION), _text(failed_at))
