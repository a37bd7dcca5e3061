"""Fault modes of the registry simulator, set over HTTP (`PUT /_sim/faults`).

A fault is scoped to one model (`"model": "<ns>/<model>:<tag>"`, or the path form
`PUT /_sim/faults/<ns>/<model>/<tag>`) or, without a scope, to every model. By default it hits
manifest requests (GET and HEAD); `"target": "blob"` or `"any"` widens it to blob downloads (a
scoped fault then matches the blobs of `<ns>/<model>`, whatever the tag).

- `{"status": 429, "count": 2, "retry_after": 1}`: the next 2 matching requests get 429 with
  `Retry-After: 1`.
- `{"status": 503, "count": 3}`: the next 3 get 503 (any status works).
- `{"delay_seconds": 2.0}`: matching requests are answered 2 s late (add `count` to limit).
- `{"tag_moved": true}`: the tag moves: the 1st manifest read (GET or HEAD) since the fault was
  set gets the catalogued bytes, the 2nd and later reads different bytes (a different digest;
  their blobs are served too).
- `{"status": 200, "body": "not json"}`: garbage: this status and body verbatim
  (`content_type` optional).

Without `count` a fault lasts until cleared (`DELETE /_sim/faults`, optionally `?model=...` or
the path form for one scope). Setting a fault replaces an earlier one with the same scope and
target.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

Target = Literal["manifest", "blob", "any"]


class RegistryFault(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(default=None, description="<ns>/<model>:<tag>; None: all models")
    target: Target = "manifest"
    status: int | None = Field(default=None, ge=100, le=599)
    count: int | None = Field(default=None, ge=1)
    retry_after: int | None = Field(default=None, ge=0)
    delay_seconds: float = Field(default=0.0, ge=0.0)
    tag_moved: bool = False
    body: str | None = None
    content_type: str | None = None

    _reads: dict[str, int] = PrivateAttr(default_factory=dict)

    def matches(self, kind: Literal["manifest", "blob"], repo: str, tag: str | None) -> bool:
        if self.target not in {kind, "any"}:
            return False
        if self.model is None:
            return True
        scope_repo, _, scope_tag = self.model.partition(":")
        return scope_repo == repo and (tag is None or scope_tag == tag)

    def consume(self) -> None:
        if self.count is not None:
            self.count -= 1

    @property
    def exhausted(self) -> bool:
        return self.count is not None and self.count <= 0

    def count_read(self, key: str) -> int:
        """Counts a manifest read of `key` for `tag_moved`; returns the read's ordinal (1-based)."""
        self._reads[key] = self._reads.get(key, 0) + 1
        return self._reads[key]


class FaultBook:
    """The active faults, in the order they were set."""

    def __init__(self) -> None:
        self._faults: list[RegistryFault] = []

    def set(self, fault: RegistryFault) -> None:
        self._faults = [
            f
            for f in self._faults
            if (f.model, f.target, f.tag_moved) != (fault.model, fault.target, fault.tag_moved)
        ]
        self._faults.append(fault)

    def clear(self, model: str | None = None) -> None:
        self._faults = [] if model is None else [f for f in self._faults if f.model != model]

    def list(self) -> list[RegistryFault]:
        return list(self._faults)

    def response_fault(
        self, kind: Literal["manifest", "blob"], repo: str, tag: str | None
    ) -> RegistryFault | None:
        """The first live status/delay/body fault for this request, its count consumed."""
        for fault in self._faults:
            if fault.tag_moved or not fault.matches(kind, repo, tag):
                continue
            fault.consume()
            if fault.exhausted:
                self._faults.remove(fault)
            return fault
        return None

    def moved_read(self, repo: str, tag: str) -> bool:
        """Counts a manifest read; True when it should see the moved tag (2nd read on)."""
        moved = False
        for fault in self._faults:
            if fault.tag_moved and fault.matches("manifest", repo, tag):
                moved = fault.count_read(f"{repo}:{tag}") >= 2 or moved
        return moved
