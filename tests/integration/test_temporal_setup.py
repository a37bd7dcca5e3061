"""`dmrollout temporal setup`, and a worker that fails fast on an unprepared namespace."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

from localenv.paths import python_tool
from localenv.temporal import TemporalDevServer


def dmrollout(
    server: TemporalDevServer, namespace: str, *args: str, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        **(extra or {}),
        "DMROLLOUT_TEMPORAL_ADDRESS": server.address,
        "DMROLLOUT_TEMPORAL_NAMESPACE": namespace,
        "DMROLLOUT_KUBECONFIG": "/nonexistent",  # never reached: the namespace check comes first
    }
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def create_namespace(server: TemporalDevServer, namespace: str, retention: str) -> None:
    subprocess.run(
        [python_tool("temporal"), "operator", "namespace", "create", "--namespace", namespace,
         "--retention", retention, "--address", server.address],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip


def test_worker_fails_fast_then_setup_prepares_the_namespace(
    temporal_server: TemporalDevServer,
) -> None:
    namespace = f"bare-{uuid.uuid4().hex[:6]}"
    create_namespace(temporal_server, namespace, "24h")
    worker = dmrollout(temporal_server, namespace, "worker")
    assert worker.returncode == 3, worker.stderr
    assert "dmrollout temporal setup" in worker.stderr
    assert "DmName" in worker.stderr

    setup = dmrollout(temporal_server, namespace, "temporal", "setup")
    assert setup.returncode == 0, setup.stderr
    assert "registered search attributes" in setup.stdout
    # The history is the audit trail: a 24 h retention is flagged with the fix.
    assert "WARNING" in setup.stdout and "--retention 7d" in setup.stdout

    again = dmrollout(temporal_server, namespace, "temporal", "setup")
    assert "already registered" in again.stdout


def test_a_pipeline_worker_fails_fast_on_an_unprepared_pipelines_namespace(
    temporal_server: TemporalDevServer,
) -> None:
    """Issue 25: the pipelines' namespace needs the pipeline attributes too; setup registers
    them there (and only the rollouts' in the rollouts' namespace)."""
    rollouts, pipelines = (f"{kind}-{uuid.uuid4().hex[:6]}" for kind in ("roll", "pipe"))
    for namespace in (rollouts, pipelines):
        create_namespace(temporal_server, namespace, "7d")
    extra = {"DMROLLOUT_TEMPORAL_PIPELINES_NAMESPACE": pipelines, "DMROLLOUT_PIPELINE_HUB": "true"}
    setup = dmrollout(temporal_server, rollouts, "temporal", "setup", extra=extra)
    assert setup.returncode == 0, setup.stderr
    assert f"in {pipelines!r}: DmNamespace" in setup.stdout
    assert "DmPipeline" in setup.stdout.split(f"in {pipelines!r}")[1]
    assert "DmPipeline" not in setup.stdout.split(f"in {pipelines!r}")[0]

    fresh = f"pipe-{uuid.uuid4().hex[:6]}"
    create_namespace(temporal_server, fresh, "7d")
    extra["DMROLLOUT_TEMPORAL_PIPELINES_NAMESPACE"] = fresh
    worker = dmrollout(temporal_server, rollouts, "worker", extra=extra)
    assert worker.returncode == 3, worker.stderr
    assert fresh in worker.stderr and "DmPipeline" in worker.stderr
    assert "dmrollout temporal setup" in worker.stderr
