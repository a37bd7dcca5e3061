"""One coordination.k8s.io/v1 Lease: its wire format, and the three bounded calls leader election
makes on it (``controller.machinery.leader`` holds the election itself).

Every write is conditional: a create fails when the Lease exists, a replace carries the
resourceVersion that was read. Either losing its race answers False (the API's 409), never an
error, because that is the normal outcome of two candidates racing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from kube.client import Kube
from kube.errors import Conflict, NotFound

_MICRO_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"
_API_VERSION = "coordination.k8s.io/v1"


def format_micro_time(at: datetime) -> str:
    """metav1.MicroTime as the API server writes it (RFC 3339, microseconds, UTC)."""
    return at.astimezone(UTC).strftime(_MICRO_TIME)


def parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


@dataclass(frozen=True)
class LeaseRecord:
    """The Lease spec fields leader election reads and writes."""

    holder_identity: str
    lease_duration_seconds: int
    acquire_time: str | None
    renew_time: str | None
    lease_transitions: int

    @classmethod
    def from_lease(cls, lease: dict[str, Any]) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder_identity=spec.get("holderIdentity") or "",
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            lease_transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.lease_transitions,
        }


class LeaseStore:
    """Read, create and replace one Lease, each call bounded by its ``timeout`` (seconds)."""

    def __init__(self, kube: Kube, namespace: str, name: str) -> None:
        self._api = kube.coordination
        self.namespace = namespace
        self.name = name

    async def read(self, timeout: float) -> dict[str, Any] | None:
        """The Lease (None: there is none yet)."""
        try:
            return await self._call(
                self._api.read_namespaced_lease, timeout, self.name, self.namespace
            )
        except NotFound:
            return None

    async def create(self, record: LeaseRecord, timeout: float) -> bool:
        """False: another candidate created it first."""
        body = {
            "apiVersion": _API_VERSION,
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": record.to_spec(),
        }
        try:
            await self._call(self._api.create_namespaced_lease, timeout, self.namespace, body)
        except Conflict:
            return False
        return True

    async def replace(self, lease: dict[str, Any], record: LeaseRecord, timeout: float) -> bool:
        """Replace ``lease`` as read (its resourceVersion makes it conditional); False: someone
        wrote the Lease since."""
        metadata = lease["metadata"]
        body = {
            "apiVersion": _API_VERSION,
            "kind": "Lease",
            "metadata": {
                "name": metadata["name"],
                "namespace": metadata["namespace"],
                "resourceVersion": metadata["resourceVersion"],
                **({"labels": metadata["labels"]} if metadata.get("labels") else {}),
                **({"annotations": metadata["annotations"]} if metadata.get("annotations") else {}),
            },
            "spec": record.to_spec(),
        }
        try:
            await self._call(
                self._api.replace_namespaced_lease, timeout, self.name, self.namespace, body
            )
        except Conflict:
            return False
        return True

    async def _call(self, fn: Callable[..., Any], timeout: float, *args: Any) -> dict[str, Any]:
        response = await asyncio.to_thread(
            partial(fn, *args, _preload_content=False, _request_timeout=timeout)
        )
        result: dict[str, Any] = json.loads(response.data)
        return result
