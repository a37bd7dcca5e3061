"""The hub's pipeline controller under its own Lease (controller/hub/leadership.py), on an
in-memory Lease store with the API server's conditional writes: two replicas never both run
their loop, a stop hands the Lease over at once, a lost Lease or an ended loop ends the process
(exit 1) so its Pod restarts as a standby. Pure: no API server, no sockets."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.cli.pipeline import pipeline_elector
from controller.hub.leadership import PIPELINE_LEASE_NAME, PipelineControllerSettings
from controller.machinery.leader import LeaderElector
from controller.machinery.lifecycle import ENDED, STOPPED, Outcome, run_leading
from controller.reconciler.settings import ControllerSettings
from kube.lease import LeaseRecord, LeaseStore

# Short, and far apart enough for a loaded two-core machine: a Lease's duration is written in
# whole seconds, so 1 s is the shortest.
LEASE, RENEW, RETRY = 1.0, 0.6, 0.05


class MemoryLeases(LeaseStore):
    """One Lease as the API server keeps it: create fails when it exists, replace when the
    resourceVersion read is no longer current. ``refuse`` makes every call fail for one
    identity's writes (its API server away, as far as that replica can tell)."""

    def __init__(self) -> None:
        self.namespace, self.name = "dmrollout-system", PIPELINE_LEASE_NAME
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.refuse: set[str] = set()

    async def read(self, timeout: float) -> dict[str, Any] | None:
        return copy.deepcopy(self.lease)

    async def create(self, record: LeaseRecord, timeout: float) -> bool:
        if self.lease is not None or record.holder_identity in self.refuse:
            return False
        self._store(record)
        return True

    async def replace(self, lease: dict[str, Any], record: LeaseRecord, timeout: float) -> bool:
        current = self.lease and self.lease["metadata"]["resourceVersion"]
        if lease["metadata"]["resourceVersion"] != current or record.holder_identity in self.refuse:
            return False
        if not record.holder_identity:  # a release is refused too when the replica is cut off
            holder = LeaseRecord.from_lease(lease).holder_identity
            if holder in self.refuse:
                return False
        self._store(record)
        return True

    def _store(self, record: LeaseRecord) -> None:
        self.version += 1
        meta = {"name": self.name, "namespace": self.namespace}
        self.lease = {
            "metadata": {**meta, "resourceVersion": str(self.version)},
            "spec": record.to_spec(),
        }

    def holder(self) -> str:
        return LeaseRecord.from_lease(self.lease).holder_identity if self.lease else ""


@dataclass
class Replica:
    """One pipeline controller process: its loop records when it runs."""

    identity: str
    leases: MemoryLeases
    running: bool = False
    starts: int = 0
    fail: bool = False
    outcome: Outcome = field(default_factory=Outcome)
    task: asyncio.Task[int] | None = None

    async def work(self) -> None:
        self.running, self.starts = True, self.starts + 1
        try:
            while not self.fail:
                await asyncio.sleep(0.01)
            raise RuntimeError("the watch gave up")
        finally:
            self.running = False

    def start(self, elect: bool = True) -> None:
        settings = PipelineControllerSettings(
            identity=self.identity,
            leader_election=elect,
            lease_duration_seconds=LEASE,
            renew_deadline_seconds=RENEW,
            retry_period_seconds=RETRY,
        )
        elector = pipeline_elector(settings, self.leases)
        self.task = asyncio.create_task(run_leading(self.work, elector, self.outcome, "test loop"))

    async def exit_code(self) -> int:
        assert self.task is not None
        return await asyncio.wait_for(self.task, timeout=10)


async def until(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        await asyncio.sleep(0.01)


async def watching(replicas: list[Replica], body: Callable[[], Awaitable[None]]) -> None:
    """Run ``body`` while sampling: never two loops at once."""
    both: list[float] = []

    async def sample() -> None:
        while True:
            if sum(r.running for r in replicas) > 1:
                both.append(time.monotonic())
            await asyncio.sleep(0.002)

    sampler = asyncio.create_task(sample())
    try:
        await body()
    finally:
        sampler.cancel()
    assert not both, f"two pipeline controllers ran at once ({len(both)} samples)"


def test_its_lease_is_not_the_controllers() -> None:
    # One Lease for both would make the main controller and the pipeline controller exclude
    # each other (on a hub, one of them would never run).
    assert PipelineControllerSettings().lease_name == PIPELINE_LEASE_NAME
    assert ControllerSettings().lease_name != PIPELINE_LEASE_NAME


def test_the_cli_builds_the_elector_from_the_settings() -> None:
    leases = MemoryLeases()
    off = PipelineControllerSettings(leader_election=False)
    assert pipeline_elector(off, leases) is None
    elector = pipeline_elector(PipelineControllerSettings(identity="pc-0"), leases)
    assert isinstance(elector, LeaderElector)
    assert (elector.identity, elector.name) == ("pc-0", PIPELINE_LEASE_NAME)


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "dmrollout-system")
    monkeypatch.setenv("POD_NAME", "pc-0")
    monkeypatch.setenv("DMROLLOUT_PIPELINE_CONTROLLER_LEASE_NAME", "hub-pipeline-controller")
    monkeypatch.setenv("DMROLLOUT_PIPELINE_CONTROLLER_LEADER_ELECTION", "false")
    settings = PipelineControllerSettings()
    assert (settings.lease_namespace, settings.identity) == ("dmrollout-system", "pc-0")
    assert (settings.lease_name, settings.leader_election) == ("hub-pipeline-controller", False)


async def test_one_replica_runs_and_a_stop_hands_over_at_once() -> None:
    leases = MemoryLeases()
    a, b = Replica("a", leases), Replica("b", leases)

    async def body() -> None:
        a.start()
        await until(lambda: a.running, "a leads")
        b.start()
        await asyncio.sleep(5 * RETRY)
        assert not b.running and b.starts == 0  # a standby only
        began = time.monotonic()
        a.outcome.finish(STOPPED)  # SIGTERM
        assert await a.exit_code() == STOPPED
        assert not a.running
        await until(lambda: b.running, "b takes over")
        # Released, not waited out: well under the lease's duration.
        assert time.monotonic() - began < LEASE
        assert leases.holder() == "b"
        b.outcome.finish(STOPPED)
        assert await b.exit_code() == STOPPED

    await watching([a, b], body)
    assert leases.holder() == ""


async def test_a_lost_lease_stops_the_loop_and_ends_the_process() -> None:
    leases = MemoryLeases()
    a, b = Replica("a", leases), Replica("b", leases)

    async def body() -> None:
        a.start()
        await until(lambda: a.running, "a leads")
        b.start()
        leases.refuse.add("a")  # a's renewals fail from now on
        assert await a.exit_code() == ENDED
        assert not a.running
        # b waits out the lease (a cannot release it), then leads.
        await until(lambda: b.running, "b takes over")
        b.outcome.finish(STOPPED)
        assert await b.exit_code() == STOPPED

    await watching([a, b], body)


async def test_a_loop_that_ends_releases_the_lease_and_ends_the_process() -> None:
    leases = MemoryLeases()
    a, b = Replica("a", leases), Replica("b", leases)

    async def body() -> None:
        a.start()
        await until(lambda: a.running, "a leads")
        b.start()
        a.fail = True
        assert await a.exit_code() == ENDED
        await until(lambda: b.running, "b takes over")
        assert leases.holder() == "b"
        b.outcome.finish(STOPPED)
        assert await b.exit_code() == STOPPED

    await watching([a, b], body)


async def test_without_leader_election_the_loop_runs_until_stopped() -> None:
    leases = MemoryLeases()
    solo = Replica("solo", leases)
    solo.start(elect=False)
    await until(lambda: solo.running, "the loop runs")
    solo.outcome.finish(STOPPED)
    assert await solo.exit_code() == STOPPED
    assert leases.lease is None  # no Lease touched
