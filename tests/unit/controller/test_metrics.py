"""ControllerMetrics: the seed-004 series, fed only by accepted status writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from controller.serve.metrics import PHASES, ControllerMetrics, transition_memory
from decisionmodel.api.status import Phase

NS, NAME = "team-a", "fraud"
T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


class FakeClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def ts(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def metrics(clock: FakeClock) -> ControllerMetrics:
    return ControllerMetrics(CollectorRegistry(), clock=clock)


def value(m: ControllerMetrics, metric: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(metric, labels)


def dm_samples(m: ControllerMetrics, namespace: str = NS, name: str = NAME) -> list[Any]:
    """Every sample carrying this DecisionModel's labels."""
    return [
        s
        for family in m.registry.collect()
        for s in family.samples
        if s.labels.get("namespace") == namespace and s.labels.get("name") == name
    ]


def status(phase: str, since: datetime = T0, **extra: Any) -> dict[str, Any]:
    return {"phase": phase, "phaseTransitionTime": ts(since), **extra}


def test_phase_list_is_the_seed_list_plus_awaiting_promotion() -> None:
    seed = [
        "Pending",
        "Resolving",
        "Caching",
        "Starting",
        "Evaluating",
        "Degraded",
        "Promoting",
        "Ready",
        "Failed",
        "RolledBack",
    ]
    assert list(PHASES) == [*seed, "AwaitingPromotion"]
    # Every phase the API can write has a label value.
    assert set(PHASES) == {p.value for p in Phase}


def test_nothing_exported_before_a_call(metrics: ControllerMetrics) -> None:
    assert dm_samples(metrics) == []
    text = metrics.render().decode()
    assert 'namespace="team-a"' not in text
    assert "decisionmodel_registry_resolve_duration_seconds_count 0.0" in text
    assert "_created" not in text


def test_phase_is_one_hot_over_all_phases(metrics: ControllerMetrics) -> None:
    metrics.record_accepted_status(NS, NAME, {}, status("Starting"))
    got = {
        p: value(metrics, "decisionmodel_phase", namespace=NS, name=NAME, phase=p) for p in PHASES
    }
    assert got == {p: (1.0 if p == "Starting" else 0.0) for p in PHASES}

    metrics.record_accepted_status(NS, NAME, status("Starting"), status("AwaitingPromotion"))
    got = {
        p: value(metrics, "decisionmodel_phase", namespace=NS, name=NAME, phase=p) for p in PHASES
    }
    assert got == {p: (1.0 if p == "AwaitingPromotion" else 0.0) for p in PHASES}
    assert sum(v or 0.0 for v in got.values()) == 1.0


def test_status_without_phase_leaves_the_phase_gauge_alone(metrics: ControllerMetrics) -> None:
    metrics.record_accepted_status(NS, NAME, {}, status("Ready"))
    metrics.record_accepted_status(NS, NAME, status("Ready"), {"replicas": {"desired": 2}})
    assert value(metrics, "decisionmodel_phase", namespace=NS, name=NAME, phase="Ready") == 1.0


def test_replicas_gauges(metrics: ControllerMetrics) -> None:
    metrics.record_accepted_status(
        NS, NAME, {}, status("Degraded", replicas={"desired": 3, "modelReady": 1})
    )
    assert value(metrics, "decisionmodel_desired_replicas", namespace=NS, name=NAME) == 3.0
    assert value(metrics, "decisionmodel_model_ready_replicas", namespace=NS, name=NAME) == 1.0


def test_evaluation_gauges_only_after_completion(metrics: ControllerMetrics) -> None:
    running = status("Evaluating", evaluation={"revision": "abc", "accuracy": "0.5000"})
    metrics.record_accepted_status(NS, NAME, {}, running)
    assert value(metrics, "decisionmodel_evaluation_accuracy", namespace=NS, name=NAME) is None
    assert value(metrics, "decisionmodel_evaluation_ece", namespace=NS, name=NAME) is None

    done = status(
        "Promoting",
        evaluation={"accuracy": "0.9400", "ece": "0.0312", "result": "Passed"},
    )
    metrics.record_accepted_status(NS, NAME, running, done)
    assert value(metrics, "decisionmodel_evaluation_accuracy", namespace=NS, name=NAME) == 0.94
    assert value(metrics, "decisionmodel_evaluation_ece", namespace=NS, name=NAME) == 0.0312

    # A new rollout clears status.evaluation: the last completed values stay.
    metrics.record_accepted_status(NS, NAME, done, status("Resolving"))
    assert value(metrics, "decisionmodel_evaluation_accuracy", namespace=NS, name=NAME) == 0.94


def _bucket(m: ControllerMetrics, phase: str, le: str) -> float | None:
    return value(
        m,
        "decisionmodel_phase_duration_seconds_bucket",
        namespace=NS,
        name=NAME,
        phase=phase,
        le=le,
    )


def test_phase_duration_observed_when_the_phase_is_left(
    metrics: ControllerMetrics, clock: FakeClock
) -> None:
    starting = status("Starting", since=T0)
    metrics.record_accepted_status(NS, NAME, {}, starting)
    # Still Starting (another field changed): nothing observed yet.
    clock.now = T0 + timedelta(seconds=30)
    metrics.record_accepted_status(NS, NAME, starting, {**starting, "replicas": {"desired": 1}})
    assert (
        value(
            metrics,
            "decisionmodel_phase_duration_seconds_count",
            namespace=NS,
            name=NAME,
            phase="Starting",
        )
        is None
    )

    # Leaves Starting 42 s after entering it: falls in le=60, not in le=30.
    clock.now = T0 + timedelta(seconds=42)
    metrics.record_accepted_status(NS, NAME, starting, status("Evaluating", since=clock.now))
    assert _bucket(metrics, "Starting", "30.0") == 0.0
    assert _bucket(metrics, "Starting", "60.0") == 1.0
    assert _bucket(metrics, "Starting", "+Inf") == 1.0
    assert (
        value(
            metrics,
            "decisionmodel_phase_duration_seconds_sum",
            namespace=NS,
            name=NAME,
            phase="Starting",
        )
        == 42.0
    )
    # Leaving Evaluating after 2 h lands only in +Inf (largest bucket is 3600).
    evaluating = status("Evaluating", since=clock.now)
    clock.now += timedelta(hours=2)
    metrics.record_accepted_status(NS, NAME, evaluating, status("Promoting", since=clock.now))
    assert _bucket(metrics, "Evaluating", "3600.0") == 0.0
    assert _bucket(metrics, "Evaluating", "+Inf") == 1.0


def test_bucket_bounds_are_the_seed_buckets(metrics: ControllerMetrics) -> None:
    metrics.record_accepted_status(NS, NAME, status("Pending"), status("Resolving"))
    les = sorted(
        float(s.labels["le"])
        for family in metrics.registry.collect()
        for s in family.samples
        if s.name == "decisionmodel_phase_duration_seconds_bucket"
    )
    assert les == [5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, float("inf")]


def test_no_duration_without_a_known_old_status(metrics: ControllerMetrics) -> None:
    metrics.record_accepted_status(NS, NAME, None, status("Ready"))
    names = {s.name for s in dm_samples(metrics)}
    assert not any(n.startswith("decisionmodel_phase_duration") for n in names)


def rollouts(m: ControllerMetrics, result: str) -> float | None:
    return value(m, "decisionmodel_rollouts_total", namespace=NS, name=NAME, result=result)


STABLE_A = {"hash": "aaaaaaaaaaaaaaaa"}
STABLE_B = {"hash": "bbbbbbbbbbbbbbbb"}


def test_promotion_counted_once(metrics: ControllerMetrics) -> None:
    promoting = status("Promoting")
    promoted = status(
        "Promoting", stableRevision=STABLE_A, lastPromotionTime=ts(T0 + timedelta(minutes=1))
    )
    metrics.record_accepted_status(NS, NAME, promoting, promoted)
    assert rollouts(metrics, "promoted") == 1.0
    # Further writes carrying the same stable record (Ready, replica updates) do not count.
    ready = {**promoted, "phase": "Ready"}
    metrics.record_accepted_status(NS, NAME, promoted, ready)
    metrics.record_accepted_status(NS, NAME, ready, {**ready, "replicas": {"desired": 1}})
    # Even a caller replaying the same transition (e.g. a re-delivered watch event).
    metrics.record_accepted_status(NS, NAME, promoting, promoted)
    assert rollouts(metrics, "promoted") == 1.0
    assert rollouts(metrics, "rolled_back") == 0.0
    assert rollouts(metrics, "failed") == 0.0

    # A second revision is promoted later: counted.
    promoted_b = status(
        "Promoting", stableRevision=STABLE_B, lastPromotionTime=ts(T0 + timedelta(hours=1))
    )
    metrics.record_accepted_status(NS, NAME, ready, promoted_b)
    assert rollouts(metrics, "promoted") == 2.0
    # And going back to A is a new promotion of A.
    promoted_a2 = status(
        "Promoting", stableRevision=STABLE_A, lastPromotionTime=ts(T0 + timedelta(hours=2))
    )
    metrics.record_accepted_status(NS, NAME, promoted_b, promoted_a2)
    assert rollouts(metrics, "promoted") == 3.0


def test_stable_hash_change_without_new_promotion_time_is_not_a_promotion(
    metrics: ControllerMetrics,
) -> None:
    lpt = ts(T0)
    metrics.record_accepted_status(
        NS,
        NAME,
        status("Ready", stableRevision=STABLE_A, lastPromotionTime=lpt),
        status("Ready", stableRevision=STABLE_B, lastPromotionTime=lpt),
    )
    assert rollouts(metrics, "promoted") == 0.0


def test_rolled_back_and_failed_counted_once_per_failure(metrics: ControllerMetrics) -> None:
    failed_rev = {"hash": "cccccccccccccccc", "failedAt": ts(T0)}
    evaluating = status("Evaluating", stableRevision=STABLE_A)
    rolled_back = status("RolledBack", stableRevision=STABLE_A, failedRevision=failed_rev)
    metrics.record_accepted_status(NS, NAME, evaluating, rolled_back)
    assert rollouts(metrics, "rolled_back") == 1.0
    # The stable loses a Pod (Degraded) and recovers into RolledBack: same failure, not recounted.
    degraded = {**rolled_back, "phase": "Degraded"}
    metrics.record_accepted_status(NS, NAME, rolled_back, degraded)
    metrics.record_accepted_status(NS, NAME, degraded, rolled_back)
    assert rollouts(metrics, "rolled_back") == 1.0

    # The same revision retried and failing again records a new failedAt: counted.
    again = {**failed_rev, "failedAt": ts(T0 + timedelta(minutes=10))}
    metrics.record_accepted_status(NS, NAME, evaluating, {**rolled_back, "failedRevision": again})
    assert rollouts(metrics, "rolled_back") == 2.0

    # Without a stable revision the outcome is Failed.
    other = ("team-b", "churn")
    metrics.record_accepted_status(
        *other,
        status("Starting"),
        status("Failed", failedRevision={"hash": "dddddddddddddddd", "failedAt": ts(T0)}),
    )
    assert (
        value(
            metrics,
            "decisionmodel_rollouts_total",
            namespace="team-b",
            name="churn",
            result="failed",
        )
        == 1.0
    )
    assert rollouts(metrics, "failed") == 0.0
    assert rollouts(metrics, "promoted") == 0.0


def test_unknown_old_status_counts_nothing_and_remembers(metrics: ControllerMetrics) -> None:
    # First sight after a controller restart: the promotion and failure already happened.
    failed_rev = {"hash": "cccccccccccccccc", "failedAt": ts(T0)}
    seen = status(
        "RolledBack",
        stableRevision=STABLE_A,
        lastPromotionTime=ts(T0),
        failedRevision=failed_rev,
    )
    metrics.record_accepted_status(NS, NAME, None, seen)
    assert rollouts(metrics, "promoted") == 0.0
    assert rollouts(metrics, "rolled_back") == 0.0
    # A later write from a slightly older view still does not count them.
    metrics.record_accepted_status(NS, NAME, status("Evaluating"), seen)
    assert rollouts(metrics, "promoted") == 0.0
    assert rollouts(metrics, "rolled_back") == 0.0


def test_probe_results_counted_per_call(metrics: ControllerMetrics) -> None:
    metrics.record_probe_transition(NS, NAME, "digest_mismatch")
    metrics.record_probe_transition(NS, NAME, "ready")
    metrics.record_probe_transition(NS, NAME, "ready")

    def probes(result: str) -> float | None:
        return value(
            metrics, "decisionmodel_probe_results_total", namespace=NS, name=NAME, result=result
        )

    assert probes("ready") == 2.0
    assert probes("digest_mismatch") == 1.0
    assert probes("device_mismatch") == 0.0
    with pytest.raises(ValueError):
        metrics.record_probe_transition(NS, NAME, "ContainersReady")


def test_observe_resolve(metrics: ControllerMetrics) -> None:
    metrics.observe_resolve(0.2)
    metrics.observe_resolve(3.0)
    assert value(metrics, "decisionmodel_registry_resolve_duration_seconds_count") == 2.0
    assert value(metrics, "decisionmodel_registry_resolve_duration_seconds_sum") == 3.2
    # Default client buckets: 0.25 holds the first sample only.
    assert (
        value(metrics, "decisionmodel_registry_resolve_duration_seconds_bucket", le="0.25") == 1.0
    )


def test_forget_removes_every_series_of_the_dm(
    metrics: ControllerMetrics, clock: FakeClock
) -> None:
    other = ("team-a", "churn")
    for ns, name in ((NS, NAME), other):
        metrics.record_accepted_status(ns, name, {}, status("Starting"))
        clock.now = T0 + timedelta(seconds=10)
        metrics.record_accepted_status(
            ns,
            name,
            status("Starting"),
            status(
                "RolledBack",
                stableRevision=STABLE_A,
                lastPromotionTime=ts(T0),
                replicas={"desired": 2, "modelReady": 2},
                evaluation={"accuracy": "0.9", "ece": "0.05", "result": "Failed"},
                failedRevision={"hash": "c" * 16},
            ),
        )
        metrics.record_probe_transition(ns, name, "not_pinned")
    families_before = {s.name for s in dm_samples(metrics)}
    assert {
        "decisionmodel_phase",
        "decisionmodel_model_ready_replicas",
        "decisionmodel_desired_replicas",
        "decisionmodel_rollouts_total",
        "decisionmodel_phase_duration_seconds_bucket",
        "decisionmodel_evaluation_accuracy",
        "decisionmodel_evaluation_ece",
        "decisionmodel_probe_results_total",
    } <= families_before

    metrics.forget(NS, NAME)
    assert dm_samples(metrics) == []
    assert 'name="fraud"' not in metrics.render().decode()
    # The other DecisionModel keeps all its series.
    assert {s.name for s in dm_samples(metrics, *other)} == families_before

    # Forgetting also drops the memory: a re-created DM with the same name counts afresh.
    metrics.record_accepted_status(
        NS,
        NAME,
        status("Promoting"),
        status("Ready", stableRevision=STABLE_A, lastPromotionTime=ts(T0)),
    )
    assert rollouts(metrics, "promoted") == 1.0
    metrics.forget(NS, NAME)
    metrics.forget(NS, NAME)  # idempotent
    assert dm_samples(metrics) == []


def test_render_is_prometheus_text(metrics: ControllerMetrics) -> None:
    metrics.record_accepted_status(NS, NAME, {}, status("Ready"))
    text = metrics.render().decode()
    assert "# TYPE decisionmodel_phase gauge" in text
    assert "# TYPE decisionmodel_rollouts_total counter" in text
    assert 'decisionmodel_phase{name="fraud",namespace="team-a",phase="Ready"} 1.0' in text
    assert "_created" not in text


def test_default_registry_is_private() -> None:
    # Two instances (two tests, or a test next to the running manager) never clash.
    a, b = ControllerMetrics(), ControllerMetrics()
    a.record_accepted_status(NS, NAME, {}, status("Ready"))
    assert (
        b.registry.get_sample_value(
            "decisionmodel_phase", {"namespace": NS, "name": NAME, "phase": "Ready"}
        )
        is None
    )


def test_what_is_remembered_of_a_status_counts_as_the_whole_status(clock: FakeClock) -> None:
    """The controller keeps ``transition_memory(status)`` per DecisionModel, not the status:
    fed back as the old status it gives the same series as the whole status would."""
    failed = {"hash": "cccccccccccccccc", "failedAt": ts(T0), "reason": "EvaluationFailed",
              "message": "accuracy 0.5 < 0.9"}  # fmt: skip
    conditions = [{"type": "Ready", "status": "True", "reason": "Promoted", "message": "x" * 500}]
    steps = [
        status("Pending", conditions=conditions),
        status("Evaluating", since=T0 + timedelta(seconds=7), conditions=conditions),
        status("RolledBack", since=T0 + timedelta(seconds=50), failedRevision=failed),
        status(
            "Promoting",
            since=T0 + timedelta(minutes=2),
            stableRevision=STABLE_A,
            lastPromotionTime=ts(T0 + timedelta(minutes=3)),
        ),
        status(
            "Ready",
            since=T0 + timedelta(minutes=3),
            stableRevision=STABLE_A,
            lastPromotionTime=ts(T0 + timedelta(minutes=3)),
            failedRevision=failed,
        ),
    ]
    whole = ControllerMetrics(CollectorRegistry(), clock=clock)
    kept = ControllerMetrics(CollectorRegistry(), clock=clock)
    old_whole: dict[str, Any] | None = {}
    old_kept: dict[str, Any] | None = {}
    for i, new in enumerate(steps):
        clock.now = T0 + timedelta(seconds=30 * (i + 1))
        whole.record_accepted_status(NS, NAME, old_whole, new)
        kept.record_accepted_status(NS, NAME, old_kept, new)
        old_whole, old_kept = new, transition_memory(new)
    assert "conditions" not in transition_memory(steps[0])
    assert whole.render() == kept.render()
    assert rollouts(kept, "promoted") == 1.0 and rollouts(kept, "rolled_back") == 1.0


def test_a_reaped_object_alone_adds_only_its_own_series(metrics: ControllerMetrics) -> None:
    """The rollout and probe counters start at 0 with the first status or gate transition, not
    with a reaper's or a restart's count for a DecisionModel seen no other way."""
    metrics.record_reaped(NS, NAME, "Job")
    metrics.record_restart(NS, NAME, "restarted")
    assert sorted(s.name for s in dm_samples(metrics)) == [
        "decisionmodel_reaped_objects_total",
        "decisionmodel_rollout_restarts_total",
    ]
    metrics.record_probe_transition(NS, NAME, "ready")
    assert rollouts(metrics, "promoted") == 0.0
