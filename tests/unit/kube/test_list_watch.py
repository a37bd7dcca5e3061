"""kube.watch.ListWatch, the one list-then-watch of the controller and the activities, and
kube.wait.wait_until on top of it, against a fake API server on loopback (fake_api_server.py):
410 Gone lists again (as an ERROR event and as the status); a dropped or silent watch resumes
from the last resourceVersion (bookmarks included) without a list; a server that answers
nothing fails the list (Unavailable) instead of hanging; closing or cancelling ends the watch
connection at once. The real API server: tests/integration/test_kube_wait.py."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from typing import Any

import pytest
from harness.fake_api_server import FakeAPIServer
from harness.helpers import eventually

from kube.errors import Unavailable
from kube.wait import wait_until
from kube.watch import Change, Changes, Listed, ListWatch, source

SLOW = 60.0
BOUND = 30.0


def svc(name: str, rv: str, go: bool = False) -> dict[str, Any]:
    annotations = {"go": "yes"} if go else {}
    return {"metadata": {"name": name, "namespace": "x", "resourceVersion": rv,
                         "annotations": annotations}}  # fmt: skip


async def gone_ahead(objects: list[dict[str, Any]]) -> str | None:
    for obj in objects:
        if (obj["metadata"].get("annotations") or {}).get("go") == "yes":
            return str(obj["metadata"]["name"])
    return None


async def collect(watch: ListWatch, count: int) -> list[Any]:
    seen: list[Any] = []
    async with aclosing(watch.events()) as events:
        async for event in events:
            seen.append(event)
            if len(seen) == count:
                return seen
    raise AssertionError("unreachable")


@pytest.mark.parametrize("as_event", [True, False])
async def test_an_expired_resource_version_lists_again(as_event: bool) -> None:
    expired = [{"type": "ERROR", "object": {"kind": "Status", "code": 410}}] if as_event else "410"
    added = [{"type": "ADDED", "object": svc("b", "101")}]
    async with FakeAPIServer(items=[svc("a", "5")], script=[expired, added]) as fake:
        watch = ListWatch(fake.kube(), source("Service", "x"), rv="7")
        events = await asyncio.wait_for(collect(watch, 2), BOUND)
        assert events == [Listed([svc("a", "5")]), Changes([Change("ADDED", svc("b", "101"))])]
        assert fake.lists == 1 and fake.watched_from == ["7", "100"]


async def test_a_dropped_connection_resumes_from_the_last_version_without_a_list() -> None:
    bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "150"}}}
    modified = [{"type": "MODIFIED", "object": svc("a", "120")}]
    async with FakeAPIServer(items=[svc("a", "1")], script=[modified, "reset", [bookmark]]) as fake:
        watch = ListWatch(fake.kube(), source("Service", "x"), reconnect_pause=0.05)
        seen: list[Any] = []

        async def follow() -> None:
            async with aclosing(watch.events()) as events:
                async for event in events:
                    seen.append(event)

        following = asyncio.create_task(follow())
        try:
            await eventually(lambda: fake.watches >= 4, BOUND, what="resumed after the bookmark")
        finally:
            following.cancel()
        assert fake.lists == 1
        assert fake.watched_from[:4] == ["100", "120", "120", "150"]
        # A bookmark moves the resume point and is no change of its own.
        assert seen == [Listed([svc("a", "1")]), Changes([Change("MODIFIED", svc("a", "120"))])]


async def test_a_silent_watch_is_bounded_and_resumed() -> None:
    async with FakeAPIServer(items=[svc("svc", "7")], script=["hold"]) as fake:
        kube = fake.kube()
        src = source("Service", "x", name="svc")
        task = asyncio.create_task(
            wait_until(kube, src, gone_ahead, idle=SLOW, relist_every=4.0, watch_seconds=1)
        )
        # Nothing arrives on the first watch: its read bound (1 s + 1 s margin) ends it and the
        # watch resumes from where it was, without a list.
        await eventually(lambda: fake.watches >= 2, BOUND, what="a second watch")
        assert fake.watched_from[:2] == ["100", "100"] and fake.lists == 1
        fake.items = [svc("svc", "8", go=True)]
        assert await asyncio.wait_for(task, BOUND) == "svc"  # the safety-net list sees it
        assert fake.lists >= 2


async def test_a_silent_api_server_fails_the_list() -> None:
    async with FakeAPIServer(silent=True) as fake:
        src = source("Service", "x", name="svc")
        with pytest.raises(Unavailable, match="did not answer"):
            await asyncio.wait_for(wait_until(fake.kube(), src, gone_ahead, idle=SLOW), BOUND)


async def test_a_cancelled_wait_closes_its_watch() -> None:
    async with FakeAPIServer(items=[svc("svc", "7")]) as fake:
        src = source("Service", "x", name="svc")
        task = asyncio.create_task(
            wait_until(fake.kube(), src, gone_ahead, idle=SLOW, relist_every=SLOW, watch_seconds=50)
        )
        await eventually(lambda: fake.watches >= 1, what="a watch")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await eventually(lambda: fake.watches_closed >= 1, what="closed")


async def test_leaving_the_loop_early_closes_the_watch() -> None:
    async with FakeAPIServer(items=[svc("svc", "7")]) as fake:
        watch = ListWatch(fake.kube(), source("Service", "x"), watch_seconds=50)
        async with aclosing(watch.events(idle=0.2)) as events:
            async for _event in events:
                if fake.watches:  # the first Idle comes while the watch is open
                    break
        await eventually(lambda: fake.watches_closed >= 1, what="closed")
