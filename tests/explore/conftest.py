"""The lifecycle explorer's fixtures, its budget and the summary printed at the end.

``make explore`` (``DMROLLOUT_FULL=explore``) runs random lifecycles for ``EXPLORE_SECONDS``
(default 1800), ``EXPLORE_PARALLEL`` at a time (default 6), ``EXPLORE_OPS`` operations each
(default 20), from ``EXPLORE_SEED`` (default: the clock, printed). ``make test`` runs a bounded
budget: the same two seeds every time (``CI_SEEDS``), so a red CI is a reproducible finding.

The explorer runs after the other tests of its worker and before the chaos cells: its
environment faults stop Temporal and the API server under the whole local environment.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from explore_run import Env
from harness import run_summaries
from harness.rollout_harness import connect, install_crd
from harness.run_summaries import Summary

from localenv.cluster import LocalCluster
from localenv.env import Simulators
from localenv.temporal import TemporalDevServer

HERE = Path(__file__).resolve().parent
SUMMARY = pytest.StashKey[list[str]]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mine = [i for i in items if HERE in i.path.parents]
    if mine:
        rest = [i for i in items if HERE not in i.path.parents]
        chaos = [i for i in rest if "chaos" in i.path.parts]
        items[:] = [i for i in rest if i not in chaos] + mine + chaos


def pytest_sessionfinish(session: pytest.Session) -> None:
    lines = session.config.stash.get(SUMMARY, [])
    if lines:
        run_summaries.add(
            session.config,
            Summary("lifecycle explorer", "\n".join(lines), "build/explore-summary.txt"),
        )


@pytest.fixture(scope="session")
def explore_summary(pytestconfig: pytest.Config) -> list[str]:
    return pytestconfig.stash.setdefault(SUMMARY, [])


@pytest.fixture(scope="session")
async def explore_env(
    local_cluster: LocalCluster,
    simulators: Simulators,
    temporal_server: TemporalDevServer,
    pytestconfig: pytest.Config,
) -> AsyncIterator[Env]:
    install_crd(local_cluster)
    client = await connect(temporal_server.address)
    logs = pytestconfig.rootpath / "build" / "explore"
    yield Env(local_cluster, temporal_server, client, logs)
