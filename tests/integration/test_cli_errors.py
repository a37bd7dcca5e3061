"""Issue 13, point 1: an expected failure is one line on stderr naming what failed, where and
the fix, with a documented exit code; never a traceback, never a signal at teardown.

Every peer here is local to the test's network namespace: a refused port, or a listener that
accepts connections and never answers (a silent API server or Temporal frontend)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from controller.cli.errors import ExitCode
from localenv.cluster import in_private_netns

REPEATS = 20


@pytest.fixture(autouse=True)
def _netns() -> None:
    if not in_private_netns():
        pytest.fail("socket tests run inside the test netns: hack/in-netns.sh .venv/bin/pytest …")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def silent_port() -> Iterator[int]:
    """Accepts (the kernel completes the handshake) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield int(s.getsockname()[1])


def kubeconfig(tmp_path: Path, server: str, extra: str = "insecure-skip-tls-verify: true") -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}', {extra}}}}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u, namespace: team-a}}]\n"
        "current-context: x\nusers: [{name: u, user: {token: abc}}]\n"
    )
    return path


def dmrollout(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        env={**os.environ, "DMROLLOUT_KUBE_READ_TIMEOUT_SECONDS": "2", **(env or {})},
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("dmrollout: ")
    return lines[0]


def test_temporal_refused_is_unreachable_naming_the_address() -> None:
    address = f"127.0.0.1:{free_port()}"
    done = dmrollout("history", "x", "-n", "y", "--address", address)
    assert done.returncode == ExitCode.UNREACHABLE
    line = one_line(done)
    assert address in line and "TEMPORAL_ADDRESS" in line


def test_temporal_address_from_the_temporal_cli_convention() -> None:
    address = f"127.0.0.1:{free_port()}"
    done = dmrollout("history", "x", env={"TEMPORAL_ADDRESS": address, "TEMPORAL_NAMESPACE": "t"})
    assert done.returncode == ExitCode.UNREACHABLE
    assert f"{address} (namespace t)" in one_line(done)


def test_a_silent_temporal_frontend_is_bounded(silent_port: int) -> None:
    done = dmrollout("history", "x", "--address", f"127.0.0.1:{silent_port}")
    assert done.returncode == ExitCode.UNREACHABLE
    assert f"127.0.0.1:{silent_port}" in one_line(done)


def test_api_server_refused_and_silent(tmp_path: Path, silent_port: int) -> None:
    for port in (free_port(), silent_port):
        config = kubeconfig(tmp_path, f"https://127.0.0.1:{port}")
        done = dmrollout("status", "x", "--kubeconfig", str(config))
        assert done.returncode == ExitCode.UNREACHABLE
        line = one_line(done)
        assert f"https://127.0.0.1:{port}" in line and str(config) in line


def test_a_missing_ca_file_is_setup_naming_the_file(tmp_path: Path) -> None:
    config = kubeconfig(tmp_path, "https://127.0.0.1:1", "certificate-authority: /no/ca.crt")
    done = dmrollout("get", "--kubeconfig", str(config))
    assert done.returncode == ExitCode.SETUP
    assert "/no/ca.crt" in one_line(done)


def test_a_bad_flag_value_is_a_usage_error_naming_the_setting() -> None:
    done = dmrollout("controller", "--max-concurrent-rollouts", "-1")
    assert done.returncode == ExitCode.USAGE
    assert "max_concurrent_rollouts" in one_line(done)


def test_an_unknown_temporal_profile_is_setup() -> None:
    done = dmrollout("history", "x", "--profile", "nope")
    assert done.returncode == ExitCode.SETUP
    assert "nope" in one_line(done)


def test_version() -> None:
    done = dmrollout("--version")
    assert done.returncode == 0 and done.stdout.startswith("dmrollout ")


def test_every_connection_path_exits_with_its_code_never_a_signal(tmp_path: Path) -> None:
    """The teardown crash (SIGABRT in PyGILState_Release, 2 runs in 3 with an API key): each
    path 20 times, each run ends with its own exit code."""
    temporal = f"127.0.0.1:{free_port()}"
    config = str(kubeconfig(tmp_path, f"https://127.0.0.1:{free_port()}"))
    paths = {
        "temporal": (("history", "x", "--address", temporal), {}),
        "temporal+api-key": (
            ("history", "x", "--address", temporal),
            {"DMROLLOUT_TEMPORAL_API_KEY": "not-a-key"},
        ),
        "kubernetes": (("status", "x", "--kubeconfig", config), {}),
    }
    runs = [(name, args, env) for name, (args, env) in paths.items() for _ in range(REPEATS)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        codes = list(pool.map(lambda r: (r[0], dmrollout(*r[1], env=r[2]).returncode), runs))
    assert {(name, code) for name, code in codes} == {
        (name, ExitCode.UNREACHABLE) for name in paths
    }
