"""The worker's progress, seen by a Temporal interceptor: activities started, heartbeating,
finished. Feeds the worker's ``/healthz`` (``controller.serve.liveness``).

A heartbeat counts as progress because the activities heartbeat from their work (each Job or
Pod poll, each evaluated case); their background ticker stops beating once a step has not
reported for its stall time (``activities.warmup_inspect.HeartbeatTicker``), so a wedged step
stops counting here too.
"""

from __future__ import annotations

from typing import Any

from temporalio import worker

from controller.serve.liveness import LoopProgress


class _Outbound(worker.ActivityOutboundInterceptor):
    def __init__(self, next: worker.ActivityOutboundInterceptor, progress: LoopProgress) -> None:
        super().__init__(next)
        self._progress = progress

    def heartbeat(self, *details: Any) -> None:
        self._progress.progressed()
        super().heartbeat(*details)


class _Inbound(worker.ActivityInboundInterceptor):
    def __init__(self, next: worker.ActivityInboundInterceptor, progress: LoopProgress) -> None:
        super().__init__(next)
        self._progress = progress

    def init(self, outbound: worker.ActivityOutboundInterceptor) -> None:
        super().init(_Outbound(outbound, self._progress))

    async def execute_activity(self, input: worker.ExecuteActivityInput) -> Any:
        self._progress.started()
        try:
            return await super().execute_activity(input)
        finally:
            self._progress.finished()


class ProgressInterceptor(worker.Interceptor):
    def __init__(self, progress: LoopProgress) -> None:
        self.progress = progress

    def intercept_activity(
        self, next: worker.ActivityInboundInterceptor
    ) -> worker.ActivityInboundInterceptor:
        return _Inbound(next, self.progress)
