"""Following the API server's Pod events for the runtime simulator's Pod directory.

A real runtime at a Pod IP is the process of the Pod that holds the IP *now*. kwok hands a
freed IP to the next Pod at once, and the directory answers from a cache of up to two seconds
(simulators.kube_pods): without these events a replacement Pod that reuses a deleted Pod's IP
was answered as the deleted Pod for that long (its models "loaded", its gate then taken back
by the next inspection: seen in tests/e2e/controller/test_controller_approval.py on CI). The
watch runs in a daemon thread with the blocking client; each stream ends after a bounded time
and is opened again, an error is retried after a pause, and ``stop`` ends it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

STREAM_SECONDS = 60  # the API server ends each watch after this; the loop opens the next
REQUEST_TIMEOUT_SECONDS = 90  # bounds a stream the server never ends (lost connection)
RETRY_PAUSE_SECONDS = 1.0

PodEvent = Callable[[str, Any], None]  # (ADDED | MODIFIED | DELETED, V1Pod)


def follow_pods(api: Callable[[], Any], on_event: PodEvent, stop: threading.Event) -> None:
    """Call ``on_event`` for every Pod event of every namespace until ``stop`` is set or
    ``on_event`` raises (its event loop closed). ``api`` makes the CoreV1Api. Each stream goes
    on from the last one's resourceVersion; an error (a 410, the API server away) lists again
    after a pause, as does a stream that ends at once."""
    from kubernetes import watch

    version: str | None = None
    while not stop.is_set():
        stream, began = watch.Watch(), time.monotonic()
        options: dict[str, Any] = {"timeout_seconds": STREAM_SECONDS}
        if version:
            options["resource_version"] = version
        try:
            for event in stream.stream(
                api().list_pod_for_all_namespaces,
                _request_timeout=REQUEST_TIMEOUT_SECONDS,
                **options,
            ):
                if stop.is_set():
                    break
                if isinstance(event, dict) and event.get("type") != "ERROR":
                    on_event(str(event["type"]), event["object"])
            version = stream.resource_version
        except RuntimeError:  # the event loop that takes the events is closed
            return
        except Exception as exc:  # the API server restarting, a 410: list and watch again
            log.debug("pod watch ended (%s); watching again", exc)
            version = None
        finally:
            stream.stop()
        if time.monotonic() - began < RETRY_PAUSE_SECONDS:
            stop.wait(RETRY_PAUSE_SECONDS)


def start_following(api: Callable[[], Any], on_event: PodEvent) -> threading.Event:
    """``follow_pods`` in a daemon thread; set the returned Event to stop it."""
    stop = threading.Event()
    thread = threading.Thread(
        target=follow_pods, args=(api, on_event, stop), name="pod-watch", daemon=True
    )
    thread.start()
    return stop
