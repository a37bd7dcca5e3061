"""One judge of a Pod that does not answer (issue 37, item 5), for the three places that wait for
one: the steady state's re-inspection of the stable and the post-promotion watch count with
``AnswerWindow``; promote's re-check, whose wait spans attempts (its start is in the heartbeat),
judges with the same ``outside``.

A Pod that does not answer (a transport error, a 401 while an API key rotates) says nothing
about its model, only about the path to it: it is tolerated for the probe-error window (180 s by
default, ``probe_error_window_seconds``), counted from its first unanswered look; past it, it
counts as failing. A Pod that answers again is forgiven (its count starts over next time).
REFERENCE "Readiness gate": transport errors are tolerated, a lost model flips at once.

The clock is the caller's: the controller's monotonic clock (a restart forgives, harmlessly),
or epoch seconds when the count must go on across an activity's attempts (promote's re-check
carries its start in its heartbeat). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


def outside(waited: float, window: float) -> bool:
    """Whether a Pod that has not answered for ``waited`` seconds is past the window."""
    return waited >= window


@dataclass
class AnswerWindow:
    window: float
    # When each key (a Pod's UID, or one key for a whole round) first did not answer.
    since: dict[str, float] = field(default_factory=dict)

    def tolerates(self, key: str, now: float) -> bool:
        """``key`` did not answer at ``now``: whether it is still inside its window (the first
        miss opens it)."""
        return not outside(self.waited(key, now), self.window)

    def waited(self, key: str, now: float) -> float:
        """Seconds since ``key`` first did not answer (0 at its first miss, which it records)."""
        return now - self.since.setdefault(key, now)

    def answered(self, key: str) -> None:
        self.since.pop(key, None)

    def only(self, keys: Iterable[str]) -> None:
        """Forgive every key but these (they answered again, or went away)."""
        keep = set(keys)
        for key in [k for k in self.since if k not in keep]:
            del self.since[key]

    def open(self, now: float) -> bool:
        """Whether a window is still running: a judgement that the next looks may change."""
        return any(not outside(now - since, self.window) for since in self.since.values())
