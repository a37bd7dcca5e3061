"""OpenTelemetry's CI/CD and deployment conventions on the rollout's activity spans.

With tracing on (controller/serve/tracing.py), temporalio's TracingInterceptor opens a
``RunActivity:<step>`` span around each activity; this interceptor, inside it, names the span
in the terms a platform team's tracing backend knows (semantic conventions, CICD and
deployment attribute groups, status Development):

- ``cicd.pipeline.name``: the rollout, ``rollout <namespace>/<name>`` (one per DecisionModel);
- ``cicd.pipeline.run.id``: the workflow run; ``cicd.pipeline.run.url.full``: its Temporal UI
  page when ``DMROLLOUT_TEMPORAL_UI_URL`` is known;
- ``cicd.pipeline.task.name`` / ``.task.run.id`` / ``.task.type``: the step, its activity
  attempt, and ``test`` for the steps that judge (warm-up inspection, evaluation, the
  candidate's check, the post-promotion watch), ``deploy`` for the others;
- ``cicd.pipeline.task.run.result``: ``success``, ``failure`` or ``cancellation``;
- ``deployment.name`` (the DecisionModel), ``deployment.id`` (the candidate revision, when the
  step knows it) and ``k8s.namespace.name``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from temporalio import activity, worker

from workflows.pipeline_details import ui_path

TEST_STEPS: Final = frozenset({"warmup_inspect", "evaluate", "check_candidate", "watch_promoted"})


def step_attributes(step: str, arg: Any, ui_url: str | None = None) -> dict[str, str]:
    """The conventions' attributes of one activity (pure, for the tests)."""
    info = activity.info()
    attributes = {
        "cicd.pipeline.task.name": step,
        "cicd.pipeline.task.type": "test" if step in TEST_STEPS else "deploy",
        "cicd.pipeline.task.run.id": f"{info.workflow_run_id}/{info.activity_id}/{info.attempt}",
        "cicd.pipeline.run.id": info.workflow_run_id or "",
    }
    dm = getattr(arg, "dm", None)
    if dm is not None:
        attributes["cicd.pipeline.name"] = f"rollout {dm.namespace}/{dm.name}"
        attributes["deployment.name"] = f"{dm.namespace}/{dm.name}"
        attributes["k8s.namespace.name"] = dm.namespace
    candidate = getattr(arg, "candidate", None) or getattr(arg, "record", None)
    revision = getattr(candidate, "hash", None)
    if isinstance(revision, str) and revision:
        attributes["deployment.id"] = revision
    if ui_url and info.workflow_id:
        page = ui_path(info.workflow_namespace or "default", info.workflow_id)
        attributes["cicd.pipeline.run.url.full"] = f"{ui_url.rstrip('/')}{page}"
    return attributes


class _Inbound(worker.ActivityInboundInterceptor):
    def __init__(self, next: worker.ActivityInboundInterceptor, ui_url: str | None) -> None:
        super().__init__(next)
        self._ui_url = ui_url

    async def execute_activity(self, input: worker.ExecuteActivityInput) -> Any:
        from opentelemetry import trace

        span = trace.get_current_span()
        step = activity.info().activity_type
        arg = input.args[0] if input.args else None
        span.set_attributes(step_attributes(step, arg, self._ui_url))
        try:
            result = await super().execute_activity(input)
        except asyncio.CancelledError:
            span.set_attribute("cicd.pipeline.task.run.result", "cancellation")
            raise
        except BaseException:
            span.set_attribute("cicd.pipeline.task.run.result", "failure")
            raise
        span.set_attribute("cicd.pipeline.task.run.result", "success")
        return result


class CicdSpanInterceptor(worker.Interceptor):
    """Add to a worker whose client carries the TracingInterceptor (tracing on)."""

    def __init__(self, ui_url: str | None = None) -> None:
        self.ui_url = ui_url

    def intercept_activity(
        self, next: worker.ActivityInboundInterceptor
    ) -> worker.ActivityInboundInterceptor:
        return _Inbound(next, self.ui_url)
