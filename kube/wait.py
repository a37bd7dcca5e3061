"""Waits that wake on watch events (``kube.watch``): the waiting activities (the prefetch Job,
the candidate's Pods, their readiness gates) call their ``check`` as soon as a change arrives.

:func:`wait_until` lists the objects once, then watches them and calls ``check`` on the objects
it holds after the list, after every burst of changes (one call per burst), and again after
``idle`` seconds without one (where the caller heartbeats or probes again). The objects are
listed again every ``relist_every`` seconds whatever the watch says, so a lost event costs at
most that long. A list that cannot be made raises (``kube.errors``): the activity's retry
takes over. Cancelling the caller closes the watch at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Final, TypeVar

from kube.client import Kube
from kube.watch import WATCH_SECONDS, Changes, Listed, ListWatch, Obj, Source

T = TypeVar("T")

# The safety net: a full re-list this often, whatever the watch says.
RELIST_SECONDS: Final = 30.0


async def wait_until(
    kube: Kube,
    src: Source,
    check: Callable[[list[Obj]], Awaitable[T | None]],
    *,
    idle: float,
    relist_every: float = RELIST_SECONDS,
    watch_seconds: int = WATCH_SECONDS,
) -> T:
    """Return ``check``'s first answer that is not None. What ``check`` raises ends the wait
    (the guards and typed errors of the caller)."""
    objects: dict[str, Obj] = {}
    watch = ListWatch(kube, src, watch_seconds=watch_seconds, relist_every=relist_every)
    async with aclosing(watch.events(idle=idle)) as events:
        async for event in events:
            if isinstance(event, Listed):
                objects = {i["metadata"]["name"]: i for i in event.items}
            elif isinstance(event, Changes):
                for change in event.changes:
                    name = (change.object.get("metadata") or {}).get("name", "")
                    if change.type == "DELETED":
                        objects.pop(name, None)
                    else:
                        objects[name] = change.object
            found = await check(list(objects.values()))
            if found is not None:
                return found
    raise AssertionError("a list-then-watch never ends by itself")
