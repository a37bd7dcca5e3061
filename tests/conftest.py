"""Session fixtures: the local control plane, Temporal and the simulators, each started once.

They start lazily (only when a test asks for them) and only inside the private network
namespace of ``hack/in-netns.sh``; ``make test`` runs pytest there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localenv.cluster import LocalCluster, in_private_netns
from localenv.env import LocalEnv, Simulators
from localenv.temporal import TemporalDevServer

sys.path.insert(0, str(Path(__file__).parent))
from harness import run_summaries

TESTS = Path(__file__).parent
# A test stuck beyond its own timeout ends its worker with the stacks printed (harness/backstop).
pytest_plugins = ["harness.backstop"]

# A test's tier is its folder (kopf mirrors its package tree the same way): the marker is set
# here, never by hand, so `pytest -m unit` and `make unit` mean the same files.
TIERS = ("unit", "integration", "e2e", "explore", "chaos", "fuzz", "image")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = item.path.relative_to(TESTS).parts[0]
        if tier in TIERS:
            item.add_marker(tier)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    run_summaries.relay(session.config)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    run_summaries.receive(node.config, getattr(node, "workeroutput", {}))


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    run_summaries.report(config, terminalreporter)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden", action="store_true", help="rewrite golden files from current output"
    )


@pytest.fixture(scope="session")
def update_golden(request: pytest.FixtureRequest) -> bool:
    return (
        bool(request.config.getoption("--update-golden")) or os.environ.get("UPDATE_GOLDEN") == "1"
    )


@pytest.fixture(scope="session")
def local_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEnv]:
    """The environment object; parts are started by the fixtures below on first use."""
    if not in_private_netns():
        pytest.fail(
            "tests that start the local cluster, Temporal or the simulators must run inside the "
            "private network namespace: use `make test` or `hack/in-netns.sh .venv/bin/pytest …`"
        )
    state = os.environ.get("DMROLLOUT_TEST_STATE")
    root = Path(state) if state else tmp_path_factory.mktemp("localenv")
    env = LocalEnv(root)
    yield env
    env.stop()


@pytest.fixture(scope="session")
def local_cluster(local_env: LocalEnv) -> LocalCluster:
    if not local_env.cluster.processes:
        local_env.start_cluster()
        print(f"\nlocal cluster started in {local_env.timings['cluster']:.1f}s", file=sys.stderr)
    return local_env.cluster


@pytest.fixture(scope="session")
def temporal_server(local_env: LocalEnv) -> TemporalDevServer:
    if "temporal" not in local_env.timings:
        local_env.start_temporal()
    return local_env.temporal


@pytest.fixture(scope="session")
def simulators(local_env: LocalEnv, local_cluster: LocalCluster) -> Simulators:
    if "simulators" not in local_env.timings:
        local_env.start_simulators()
    return local_env.simulators
