"""The chaos matrix's fixtures, its cells, and the table printed at the end of the run.

``DMROLLOUT_FULL=chaos`` runs every cell (``make chaos``); without it eight cells run, one per
fault kind (``tests/chaos/chaos_matrix.py``). The table goes to the terminal and to
``build/chaos-table.txt``; each cell's story and its worker and controller logs go to
``build/chaos/<fault>-<step>/``.

The cells run after every other test of the session: they stop the API server and Temporal
under the whole local environment, and the other tests should not start on a control plane
that has just been through that.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from chaos_matrix import cells, full_mode
from chaos_table import CellResult, render
from harness import run_summaries
from harness.rollout_harness import connect, install_crd
from harness.run_summaries import Summary
from temporalio.client import Client

from localenv.cluster import LocalCluster
from localenv.env import Simulators
from localenv.temporal import TemporalDevServer

RESULTS = pytest.StashKey[list[CellResult]]()
HERE = Path(__file__).resolve().parent


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "cell" in metafunc.fixturenames:
        chosen = cells(full_mode())
        metafunc.parametrize("cell", chosen, ids=[c.id for c in chosen])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    chaos = [i for i in items if HERE in i.path.parents]
    if chaos:
        items[:] = [i for i in items if HERE not in i.path.parents] + chaos


def pytest_sessionfinish(session: pytest.Session) -> None:
    rows = session.config.stash.get(RESULTS, [])
    if rows:
        run_summaries.add(
            session.config, Summary("chaos matrix", render(rows), "build/chaos-table.txt")
        )


@pytest.fixture(scope="session")
def chaos_results(pytestconfig: pytest.Config) -> list[CellResult]:
    return pytestconfig.stash.setdefault(RESULTS, [])


@pytest.fixture(scope="session")
def chaos_cluster(local_cluster: LocalCluster, simulators: Simulators) -> LocalCluster:
    install_crd(local_cluster)
    return local_cluster


@pytest.fixture(scope="session")
async def chaos_client(temporal_server: TemporalDevServer) -> Client:
    return await connect(temporal_server.address)


@pytest.fixture(scope="session")
def chaos_logs(pytestconfig: pytest.Config) -> Path:
    return pytestconfig.rootpath / "build" / "chaos"
