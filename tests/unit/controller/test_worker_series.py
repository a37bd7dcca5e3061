"""The worker's probe series of a deleted DecisionModel are removed (seed 004), asked for only
once they are idle; a failed check keeps them."""

from __future__ import annotations

from prometheus_client import generate_latest

from controller.worker.run import WorkerMetrics


def text(metrics: WorkerMetrics) -> str:
    return generate_latest(metrics.registry).decode()


def test_a_deleted_decision_models_series_go_and_a_living_ones_stay() -> None:
    metrics = WorkerMetrics()
    metrics.record_probe_transition("ns", "gone", "ready")
    metrics.record_probe_transition("ns", "alive", "digest_mismatch")
    asked: list[str] = []

    def exists(namespace: str, name: str) -> bool:
        asked.append(name)
        return name == "alive"

    assert metrics.forget_deleted(exists, idle_seconds=0) == 1
    assert sorted(asked) == ["alive", "gone"]
    assert 'name="gone"' not in text(metrics)
    assert 'name="alive"' in text(metrics)
    asked.clear()
    assert metrics.forget_deleted(exists, idle_seconds=0) == 0
    assert asked == ["alive"]  # a removed one is not asked about again


def test_busy_series_are_not_asked_about_and_an_error_keeps_them() -> None:
    metrics = WorkerMetrics()
    metrics.record_probe_transition("ns", "busy", "ready")

    def never(namespace: str, name: str) -> bool:
        raise AssertionError("asked about a series that is not idle")

    assert metrics.forget_deleted(never, idle_seconds=3600) == 0

    def unreachable(namespace: str, name: str) -> bool:
        raise OSError("the API server did not answer")

    assert metrics.forget_deleted(unreachable, idle_seconds=0) == 0
    assert 'name="busy"' in text(metrics)
