"""A post-promotion watch shorter than the probe-error window still judges a new stable whose
Pods stop answering in it (issue 34: the watch held at its end, and the previous revision was
deleted: an outage). The judgement still open at the window's end goes on past it; the previous
revision keeps running until it is decided, and the Service returns to it.

A controller of its own, scoped to one namespace, with a probe-error window of ERROR_WINDOW s
(longer than the shortest watch, 1m, as the default 180 s is) and a watch check every second.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.helpers import eventually
from harness.rollout_harness import SIM_PREFIX, ControllerProcess, RolloutHarness, WorkerProcess
from temporalio.client import Client

from localenv.cluster import LocalCluster
from localenv.env import LocalEnv

NAMESPACE = "watchwindow-0"
ERROR_WINDOW = 75  # seconds; the watch below is 60


@pytest.fixture
def short(
    crd: LocalCluster,
    ctl_worker: WorkerProcess,
    local_env: LocalEnv,
    ctl_queue: str,
    ctl_logs: Path,
    temporal_client: Client,
) -> Iterator[RolloutHarness]:
    harness = RolloutHarness(crd, temporal_client, ctl_queue, NAMESPACE)
    c = ControllerProcess(
        crd,
        local_env.temporal.address,
        ctl_queue,
        ctl_logs,
        health_port=18098,
        identity="watchwindow",
        extra_args=("--watch-namespaces", NAMESPACE),
        extra_env={
            "DMROLLOUT_CONTROLLER_LEASE_NAME": "dmrollout-watchwindow",
            "DMROLLOUT_CONTROLLER_PROBE_ERROR_WINDOW_SECONDS": str(ERROR_WINDOW),
            "DMROLLOUT_CONTROLLER_POST_PROMOTION_WATCH_PERIOD_SECONDS": "1",
        },
    )
    c.start()
    yield harness
    c.stop()


def selected(h: RolloutHarness, name: str) -> str | None:
    service = h.get("Service", name) or {}
    return ((service.get("spec") or {}).get("selector") or {}).get("decisionmodel.io/revision")


def judged(h: RolloutHarness, name: str, old: str) -> dict[str, Any] | None:
    """The watch's verdict: the failure recorded, or the previous revision gone (held)."""
    status = h.status(name)
    if status.get("failedRevision"):
        return dict(status)
    return None if h.pods(name, old) else dict(status)


async def test_pods_gone_silent_in_a_watch_shorter_than_the_error_window_are_judged(
    short: RolloutHarness,
) -> None:
    h = short
    spec = {"model": "laya:en", "replicas": 2, "rollout": {"postPromotionWatch": "1m"}}
    h.create_dm("silent", spec)
    await eventually(lambda: h.status("silent").get("phase") == "Ready", 120, what="Ready")
    old = h.status("silent")["stableRevision"]["hash"]
    h.update_spec("silent", {"model": "laya:multilingual"})
    new = await eventually(
        lambda: (
            s["hash"]
            if (s := h.status("silent").get("stableRevision")) and s["hash"] != old
            else None
        ),
        120,
        what="the new revision promoted",
    )
    # Right after the switch, every new Pod stops answering (401 on every request: to the
    # watch, as to the steady state, a runtime that does not answer, as a crashed one). The
    # previous revision's too: while it answered, the watch would switch back at once
    # (test_controller_watch_outage.py); here only the error window can judge.
    for pod in [*h.pods("silent", old), *h.pods("silent", new)]:
        h.kubectl("annotate", "pod", pod["metadata"]["name"], f"{SIM_PREFIX}unauthorized=true")

    status = await eventually(
        lambda: judged(h, "silent", old), 60 + ERROR_WINDOW + 90, what="the watch's verdict"
    )
    failed = status.get("failedRevision")
    assert failed is not None, "the watch held and the previous revision was deleted"
    assert failed["hash"] == new and failed["reason"] == "PostPromotionGateFailed", failed
    assert f"for {ERROR_WINDOW}s" in failed["message"], failed["message"]
    assert status["stableRevision"]["hash"] == old
    assert selected(h, "silent") == old
    assert h.pods("silent", old), "the previous revision must still serve"
    await eventually(lambda: h.status("silent").get("phase") == "RolledBack", 60, what="phase")
