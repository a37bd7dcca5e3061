"""OpenTelemetry tracing, off unless the standard OTEL_* variables ask for it.

On (``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` set, or
``OTEL_TRACES_EXPORTER=otlp|console``; never with ``OTEL_SDK_DISABLED=true``): the Temporal
client of the controller and of the worker carries ``temporalio.contrib.opentelemetry``'s
TracingInterceptor, so one trace runs from the controller's reconcile through StartWorkflow,
the workflow and each activity (the context travels in Temporal headers). The exporter reads the
rest of its configuration (endpoint, headers, protocol, batch delays) from OTEL_* itself.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any, Final

from temporalio.client import Interceptor

ENDPOINT_VARS: Final = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
TRACER_NAME: Final = "dmrollout"

_provider: Any = None


def tracing_enabled() -> bool:
    if os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "").lower()
    if exporter == "none":
        return False
    return exporter in ("otlp", "console") or any(os.environ.get(v) for v in ENDPOINT_VARS)


def tracing_interceptors(service: str) -> list[Interceptor]:
    """The interceptors for Client.connect; sets up the process's tracer provider once."""
    global _provider
    if not tracing_enabled():
        return []
    from opentelemetry import trace
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    from temporalio.contrib.opentelemetry import TracingInterceptor

    if _provider is None:
        name = os.environ.get("OTEL_SERVICE_NAME") or service
        provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
        provider.add_span_processor(BatchSpanProcessor(_exporter(ConsoleSpanExporter)))
        trace.set_tracer_provider(provider)
        _provider = provider
    return [TracingInterceptor()]


def _exporter(console: Any) -> Any:
    if os.environ.get("OTEL_TRACES_EXPORTER", "").lower() == "console":
        return console()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


@contextlib.contextmanager
def span(name: str, **attributes: str) -> Iterator[None]:
    """A span around a unit of the controller's work (a reconcile); nothing when off."""
    if _provider is None:
        yield
        return
    from opentelemetry import trace

    with trace.get_tracer(TRACER_NAME).start_as_current_span(name, attributes=attributes):
        yield


def shutdown_tracing() -> None:
    """Export what is buffered: the process leaves through os._exit, which skips atexit."""
    if _provider is not None:
        _provider.shutdown()
