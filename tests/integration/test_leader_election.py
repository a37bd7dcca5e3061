"""LeaderElector against the local kube-apiserver: two candidates on one Lease.

Short durations (lease 3 s, renew deadline 2 s, retry 0.5 s) keep hand-overs quick. A sampler
task records every instant at which both electors believed they led; it must stay empty.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from harness.helpers import async_assert_eventually, eventually
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from controller.machinery.leader import LeaderElector
from kube.client import Kube
from kube.errors import Unavailable
from kube.lease import LeaseStore, format_micro_time
from localenv.cluster import LocalCluster

NAMESPACE = "default"
LEASE = 3.0
RENEW = 2.0
RETRY = 0.5


@pytest.fixture(scope="module")
def api_client(local_cluster: LocalCluster) -> Iterator[Any]:
    api = config.new_client_from_config(config_file=str(local_cluster.kubeconfig))
    yield api
    api.close()


@pytest.fixture
def lease_name() -> str:
    return f"dmrollout-leader-{uuid.uuid4().hex[:8]}"


@dataclass
class Candidate:
    elector: LeaderElector
    started: int = 0
    stopped: int = 0
    task: asyncio.Task[None] | None = None

    def start(self) -> None:
        async def on_started() -> None:
            self.started += 1

        def on_stopped() -> None:
            self.stopped += 1

        self.task = asyncio.create_task(self.elector.run(on_started, on_stopped))

    async def cancel(self) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


@dataclass
class Sampler:
    candidates: list[Candidate]
    both: list[float] = field(default_factory=list)
    samples: int = 0

    async def run(self) -> None:
        while True:
            if sum(c.elector.is_leader() for c in self.candidates) > 1:
                self.both.append(time.monotonic())
            self.samples += 1
            await asyncio.sleep(0.01)


@pytest.fixture
async def pair(api_client: Any, lease_name: str) -> AsyncIterator[tuple[Candidate, Candidate]]:
    a, b = (
        Candidate(
            LeaderElector(
                LeaseStore(Kube(api_client), NAMESPACE, lease_name),
                identity,
                lease_duration=LEASE,
                renew_deadline=RENEW,
                retry_period=RETRY,
            )
        )
        for identity in ("replica-a", "replica-b")
    )
    sampler = Sampler([a, b])
    sampling = asyncio.create_task(sampler.run())
    yield a, b
    sampling.cancel()
    for c in (a, b):
        if c.task is not None and not c.task.done():
            await c.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await sampling
    assert sampler.samples > 10
    assert sampler.both == [], "two electors led at the same time"
    with contextlib.suppress(ApiException):
        client.CoordinationV1Api(api_client).delete_namespaced_lease(lease_name, NAMESPACE)


def read_lease(api_client: Any, name: str) -> dict[str, Any]:
    lease = client.CoordinationV1Api(api_client).read_namespaced_lease(
        name, NAMESPACE, _preload_content=False
    )
    spec: dict[str, Any] = json.loads(lease.data)["spec"]
    return spec


async def leader_of(pair: tuple[Candidate, Candidate]) -> tuple[Candidate, Candidate]:
    """(leader, follower) once exactly one of the pair leads."""

    async def one_leads() -> bool:
        return sum(c.elector.is_leader() for c in pair) == 1

    await async_assert_eventually(one_leads, timeout=15, interval=0.05, what="a leader")
    a, b = pair
    return (a, b) if a.elector.is_leader() else (b, a)


async def test_exactly_one_leads(pair: tuple[Candidate, Candidate], api_client: Any) -> None:
    for c in pair:
        c.start()
    leader, follower = await leader_of(pair)
    # Several renewals later the same single leader holds the Lease; the follower never started.
    start = time.monotonic()
    while time.monotonic() - start < 4 * RETRY:
        assert leader.elector.is_leader() and not follower.elector.is_leader()
        await asyncio.sleep(0.05)
    spec = read_lease(api_client, leader.elector.name)
    assert spec["holderIdentity"] == leader.elector.identity
    assert spec["leaseDurationSeconds"] == 3
    assert spec["leaseTransitions"] == 0
    assert (leader.started, follower.started) == (1, 0)


async def test_takeover_after_expiry_without_release(
    pair: tuple[Candidate, Candidate], api_client: Any
) -> None:
    for c in pair:
        c.start()
    leader, follower = await leader_of(pair)
    last_renew = read_lease(api_client, leader.elector.name)["renewTime"]
    await leader.cancel()  # a crash: no release, the Lease still names the old leader
    gone = time.monotonic()
    assert not leader.elector.is_leader()
    assert leader.stopped == 1
    assert read_lease(api_client, leader.elector.name)["holderIdentity"] == leader.elector.identity

    async def follower_leads() -> bool:
        return follower.elector.is_leader()

    await async_assert_eventually(follower_leads, timeout=15, interval=0.05, what="takeover")
    waited = time.monotonic() - gone
    # Not before the Lease expired: its last renewal was at most one retry period before the
    # cancel, so at least LEASE - RETRY (2.5 s) must have passed; and well within 2 leases.
    assert LEASE - RETRY - 0.2 <= waited <= 2 * LEASE + 1, (waited, last_renew)
    spec = read_lease(api_client, leader.elector.name)
    assert spec["holderIdentity"] == follower.elector.identity
    assert spec["leaseTransitions"] == 1
    # on_started runs as a task of its own: it may not have had its turn yet.
    await eventually(lambda: follower.started == 1, 5, interval=0.05, what="on_started ran")


async def test_release_hands_over_at_once(
    pair: tuple[Candidate, Candidate], api_client: Any
) -> None:
    for c in pair:
        c.start()
    leader, follower = await leader_of(pair)
    await leader.elector.release()
    released = time.monotonic()
    assert not leader.elector.is_leader()
    assert leader.stopped == 1
    # run() returns by itself after a release.
    assert leader.task is not None
    await asyncio.wait_for(leader.task, timeout=2 * RETRY + 1)

    async def follower_leads() -> bool:
        return follower.elector.is_leader()

    await async_assert_eventually(follower_leads, timeout=5, interval=0.02, what="takeover")
    # The follower retries every RETRY (0.5 s): it takes over at its next attempt.
    assert time.monotonic() - released < 1.2
    spec = read_lease(api_client, leader.elector.name)
    assert spec["holderIdentity"] == follower.elector.identity
    assert spec["leaseTransitions"] == 1


async def test_release_after_cancel_still_hands_over(
    pair: tuple[Candidate, Candidate], api_client: Any
) -> None:
    # The manager's shutdown order: stop the run task, then release.
    for c in pair:
        c.start()
    leader, follower = await leader_of(pair)
    await leader.cancel()
    await leader.elector.release()
    spec = read_lease(api_client, leader.elector.name)
    assert spec["holderIdentity"] in ("", follower.elector.identity)

    async def follower_leads() -> bool:
        return follower.elector.is_leader()

    await async_assert_eventually(follower_leads, timeout=1.5, interval=0.02, what="takeover")


async def test_leader_steps_down_when_renewals_fail(
    pair: tuple[Candidate, Candidate], api_client: Any
) -> None:
    for c in pair:
        c.start()
    leader, follower = await leader_of(pair)

    # The leader's API calls now fail (a partition between it and the API server).
    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise Unavailable("injected: API server unreachable", status=503)

    api = leader.elector.leases._api
    api.read_namespaced_lease = unavailable
    api.replace_namespaced_lease = unavailable
    broken = time.monotonic()

    async def leader_stopped() -> bool:
        return not leader.elector.is_leader()

    await async_assert_eventually(leader_stopped, timeout=10, interval=0.02, what="step down")
    # Within the renew deadline (2 s) from its last renewal, i.e. < RENEW after the fault.
    assert time.monotonic() - broken <= RENEW + 0.3
    assert leader.stopped == 1
    assert leader.task is not None
    await asyncio.wait_for(leader.task, timeout=2)  # run() returned: leadership lost

    async def follower_leads() -> bool:
        return follower.elector.is_leader()

    # The follower takes over only once the Lease expired (the sampler checks no overlap).
    await async_assert_eventually(follower_leads, timeout=15, interval=0.05, what="takeover")
    assert read_lease(api_client, leader.elector.name)["holderIdentity"] == (
        follower.elector.identity
    )


async def test_race_for_an_expired_lease_has_one_winner(
    api_client: Any, lease_name: str, local_cluster: LocalCluster
) -> None:
    # A Lease left behind by a dead holder long ago.
    stale = format_micro_time(datetime(2020, 1, 1, tzinfo=UTC))
    local_cluster.apply(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": lease_name, "namespace": NAMESPACE},
            "spec": {
                "holderIdentity": "dead-replica",
                "leaseDurationSeconds": 3,
                "acquireTime": stale,
                "renewTime": stale,
                "leaseTransitions": 4,
            },
        }
    )
    electors = [
        LeaderElector(
            LeaseStore(Kube(api_client), NAMESPACE, lease_name),
            f"racer-{i}",
            lease_duration=LEASE,
            renew_deadline=RENEW,
            retry_period=RETRY,
        )
        for i in range(3)
    ]
    candidates = [Candidate(e) for e in electors]
    sampler = Sampler(candidates)
    sampling = asyncio.create_task(sampler.run())
    try:
        for c in candidates:
            c.start()

        async def one_leader() -> bool:
            return sum(e.is_leader() for e in electors) == 1

        await async_assert_eventually(one_leader, timeout=15, interval=0.05, what="one winner")
        spec = read_lease(api_client, lease_name)
        winner = next(e for e in electors if e.is_leader())
        assert spec["holderIdentity"] == winner.identity
        assert spec["leaseTransitions"] == 5  # one takeover, however many racers
        for c in candidates:
            await c.cancel()
    finally:
        sampling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampling
        for c in candidates:
            if c.task is not None and not c.task.done():
                await c.cancel()
        with contextlib.suppress(ApiException):
            client.CoordinationV1Api(api_client).delete_namespaced_lease(lease_name, NAMESPACE)
    assert sampler.both == []


async def test_an_acquisition_that_lands_after_its_deadline_is_renewed_not_dropped(
    api_client: Any, lease_name: str
) -> None:
    """A slow API server: the Lease write that wins takes longer than the renew deadline. The
    candidate must not lead and drop it in the same instant (a controller then exits); it renews
    its own Lease and leads."""
    base = datetime.now(UTC)
    calls = 0

    def slow_first_write() -> datetime:
        # The first reading stamps the acquisition; every later reading is RENEW + 1 s after it,
        # as if that write had taken that long. Renewals then take no time.
        nonlocal calls
        calls += 1
        return base if calls == 1 else base + timedelta(seconds=RENEW + 1 + 0.01 * calls)

    candidate = Candidate(
        LeaderElector(
            LeaseStore(Kube(api_client), NAMESPACE, lease_name),
            "replica-slow",
            lease_duration=LEASE,
            renew_deadline=RENEW,
            retry_period=RETRY,
            clock=slow_first_write,
        )
    )
    candidate.start()
    try:

        async def leads() -> bool:
            return candidate.elector.is_leader()

        await async_assert_eventually(leads, timeout=15, interval=0.05, what="leading")
        assert candidate.stopped == 0 and candidate.task is not None and not candidate.task.done()
    finally:
        await candidate.cancel()
        with contextlib.suppress(ApiException):
            client.CoordinationV1Api(api_client).delete_namespaced_lease(lease_name, NAMESPACE)
