"""`dmrollout temporal setup`, and a worker that fails fast on an unprepared namespace."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

from localenv.paths import python_tool
from localenv.temporal import TemporalDevServer


def dmrollout(
    server: TemporalDevServer, namespace: str, *args: str
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DMROLLOUT_TEMPORAL_ADDRESS": server.address,
        "DMROLLOUT_TEMPORAL_NAMESPACE": namespace,
        "DMROLLOUT_KUBECONFIG": "/nonexistent",  # never reached: the namespace check comes first
    }
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_worker_fails_fast_then_setup_prepares_the_namespace(
    temporal_server: TemporalDevServer,
) -> None:
    namespace = f"bare-{uuid.uuid4().hex[:6]}"
    subprocess.run(
        [python_tool("temporal"), "operator", "namespace", "create", "--namespace", namespace,
         "--retention", "24h", "--address", temporal_server.address],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
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
