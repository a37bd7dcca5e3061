"""In-memory state of the simulated runtimes, one slot per Pod UID (a new Pod starts empty)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime

from simulators.catalogue import ModelProfile


@dataclass
class LoadedModel:
    key: str  # ModelRef.key: one identity however the name was spelled
    name: str  # as requested at load, reported by /api/ps
    digest: str
    profile: ModelProfile
    device: str
    loaded_at: datetime
    expires_at: datetime | None  # None: pinned


@dataclass
class PodRuntime:
    models: dict[str, LoadedModel] = field(default_factory=dict)
    in_flight: int = 0
    burst_rejected: int = 0
    # One forward pass at a time per model (RUNTIME_API.md, "Concurrency"); loads of one model
    # are serialised by the same lock so two concurrent warmups load it once.
    model_locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    load_locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    def evict_expired(self, now: datetime) -> None:
        for key in [k for k, m in self.models.items() if m.expires_at and m.expires_at <= now]:
            del self.models[key]

    def model_lock(self, key: str) -> asyncio.Lock:
        return self.model_locks.setdefault(key, asyncio.Lock())

    def load_lock(self, key: str) -> asyncio.Lock:
        return self.load_locks.setdefault(key, asyncio.Lock())


class RuntimeState:
    def __init__(self) -> None:
        self._pods: dict[str, PodRuntime] = {}

    def pod(self, uid: str) -> PodRuntime:
        return self._pods.setdefault(uid, PodRuntime())
