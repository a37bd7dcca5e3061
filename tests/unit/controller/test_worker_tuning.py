"""The worker's concurrency is bounded and follows its settings (issue 14, point 5): under load,
tasks wait in Temporal's queues instead of timing out inside a busy worker."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.worker import PollerBehaviorSimpleMaximum

from controller.worker.run import tuning_options
from decisionmodel.rollout.settings import RolloutSettings


def test_defaults_bound_every_concurrency() -> None:
    options = tuning_options(RolloutSettings())
    assert options["max_concurrent_activities"] == 64
    # The SDK's default is 100 workflow tasks at once: on 2 cores they outlast their 10 s.
    assert options["max_concurrent_workflow_tasks"] == 8
    assert options["max_cached_workflows"] == 1000
    assert options["workflow_task_poller_behavior"] == PollerBehaviorSimpleMaximum(2)
    assert options["activity_task_poller_behavior"] == PollerBehaviorSimpleMaximum(4)
    assert options["sticky_queue_schedule_to_start_timeout"] == timedelta(seconds=60)


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DMROLLOUT_WORKER_MAX_CONCURRENT_ACTIVITIES", "16")
    monkeypatch.setenv("DMROLLOUT_WORKER_MAX_CONCURRENT_WORKFLOW_TASKS", "4")
    monkeypatch.setenv("DMROLLOUT_WORKER_MAX_CACHED_WORKFLOWS", "300")
    monkeypatch.setenv("DMROLLOUT_WORKER_WORKFLOW_TASK_POLLERS", "8")
    monkeypatch.setenv("DMROLLOUT_WORKER_STICKY_SCHEDULE_TO_START_SECONDS", "90")
    options = tuning_options(RolloutSettings())
    assert options["max_concurrent_activities"] == 16
    assert options["max_concurrent_workflow_tasks"] == 4
    assert options["max_cached_workflows"] == 300
    # Never more polls than slots.
    assert options["workflow_task_poller_behavior"] == PollerBehaviorSimpleMaximum(4)
    assert options["sticky_queue_schedule_to_start_timeout"] == timedelta(seconds=90)
