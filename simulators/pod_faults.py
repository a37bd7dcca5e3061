"""Fault injection for the runtime simulator, by annotations on the simulated Pod.

All keys carry the prefix `sim.dmrollout.dev/`. They are re-read on every request (through the
Pod directory's ~1 s cache), so a test can toggle a fault on a live Pod. Values that do not parse
are ignored.

- `device`: `/api/ps` reports this device (e.g. `cpu` on a cuda Pod = silent CPU fallback);
  loads succeed even when OLLAYA_DEVICE asks for cuda on a node without GPU (such a model
  then is on the fault's device, and stays there once the fault is removed).
- `digest`: `/api/ps` reports this digest instead of sha256 of the stored manifest.
- `never-pin: "true"`: `/api/ps` always shows `expires_at` set (now + OLLAYA_KEEP_ALIVE, 5m
  when that pins), even after `keep_alive: -1`.
- `load-delay-seconds`: each load (explicit or implicit) takes this long; beyond
  OLLAYA_LOAD_TIMEOUT it fails with 500 MODEL_LOAD_FAILED.
- `latency-ms`: every decision (`/v1/systemone`, `/v1/decisions`, `/api/decide` with state)
  takes this long, one forward pass at a time per model.
- `queue-full-burst: "N"`: the first N decision requests to this Pod UID get 503 QUEUE_FULL
  with Retry-After: 1.
- `max-queue`: overrides OLLAYA_MAX_QUEUE.
- `unauthorized: "true"`: 401 UNAUTHORIZED on every request except `GET`/`HEAD /`, whatever
  the key.
- `lose-model: "true"`: the model is lost: `/api/ps` lists nothing, decisions and loads get
  404 MODEL_NOT_FOUND; removing the annotation brings the loaded models back (a mask, not an
  eviction).
- `load-fails: "true"`: loads of a model not yet in memory fail with 500 MODEL_LOAD_FAILED.

Report-time faults (`device`, `digest`, `never-pin`, `lose-model`) are applied when answering, so
removing them restores the true state at once; load-time faults act when a model loads.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

PREFIX = "sim.dmrollout.dev/"


class PodFaults(BaseModel):
    model_config = ConfigDict(frozen=True)

    device: str | None = None
    digest: str | None = None
    never_pin: bool = False
    load_delay_seconds: float = 0.0
    latency_ms: float = 0.0
    queue_full_burst: int = 0
    max_queue: int | None = None
    unauthorized: bool = False
    lose_model: bool = False
    load_fails: bool = False

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, str]) -> PodFaults:
        def text(key: str) -> str | None:
            value = annotations.get(PREFIX + key)
            return value.strip() if value is not None and value.strip() else None

        def flag(key: str) -> bool:
            return (text(key) or "").lower() == "true"

        def number(key: str) -> float | None:
            value = text(key)
            try:
                parsed = float(value) if value is not None else None
            except ValueError:
                return None
            return parsed if parsed is not None and parsed >= 0 else None

        max_queue = number("max-queue")
        return cls(
            device=text("device"),
            digest=text("digest"),
            never_pin=flag("never-pin"),
            load_delay_seconds=number("load-delay-seconds") or 0.0,
            latency_ms=number("latency-ms") or 0.0,
            queue_full_burst=int(number("queue-full-burst") or 0),
            max_queue=int(max_queue) if max_queue is not None else None,
            unauthorized=flag("unauthorized"),
            lose_model=flag("lose-model"),
            load_fails=flag("load-fails"),
        )
