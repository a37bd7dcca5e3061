"""ModelNotFound is re-resolved by itself with a bounded backoff (seed 001, issue 22) that holds
across controller restarts (issue 34); other failures wait for a spec change or a retry token."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from test_decide import dm

from controller.reconciler import re_resolve as rr
from controller.reconciler.decide import decide
from decisionmodel.api.status import FailedRevisionStatus, ReResolveStatus
from decisionmodel.rollout.dispatch import DispatchSettings, desired_revision

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
BACKOFF = rr.Backoff()


def failed(
    reason: str = "ModelNotFound", hash_: str = "u1", at: datetime = T0
) -> FailedRevisionStatus:
    return FailedRevisionStatus(hash=hash_, model="laya:nowhere", reason=reason, failed_at=at)


def simulate(seconds: int, restarts: set[int], run_seconds: int = 2) -> list[int]:
    """A controller reconciling every second (worst case: events on every tick) against the
    DecisionModel's status, restarted (memory lost) at the given seconds; each attempt's run
    fails again ``run_seconds`` later, keeping failedAt (kube.rollout_status). The seconds at
    which attempts started."""
    fail = failed()
    recorded: ReResolveStatus | None = None  # status.reResolve, as the API server holds it
    memory = rr.ReResolves()
    running_until = -1
    started: list[int] = []
    for t in range(seconds):
        if t in restarts:
            memory = rr.ReResolves()
        now = T0 + timedelta(seconds=t, milliseconds=300)
        tried = memory.latest("ns/m", recorded)
        due = rr.due_at(fail, tried, BACKOFF)
        assert due is not None
        if t >= running_until and now >= due:
            recorded = rr.after_attempt(fail, tried, now)  # written before the start
            memory.wrote("ns/m", recorded)
            started.append(t)
            running_until = t + run_seconds
    return started


def test_the_waits_double_from_the_last_attempt_up_to_the_cap_and_never_shrink() -> None:
    # Each wait counts from when the attempt before it started (whole seconds, rounded up).
    started = simulate(3000, restarts=set())
    assert started == [30, 91, 212, 453, 934, 1535, 2136, 2737]
    gaps = [b - a for a, b in itertools.pairwise(started)]
    assert gaps == sorted(gaps) and max(gaps) == 601


def test_a_restart_or_a_new_leader_goes_on_with_the_recorded_schedule() -> None:
    # Issue 34: restarted at 126 s, the in-memory count started a burst (126, 129, 132 s).
    plain = simulate(3000, restarts=set())
    assert simulate(3000, restarts={126, 127, 700, 1600}) == plain


def test_a_record_from_another_revision_or_an_earlier_failure_does_not_count() -> None:
    old = ReResolveStatus(hash="u0", attempts=5, last_attempt_time=T0 - timedelta(hours=1))
    assert rr.due_at(failed(), old, BACKOFF) == T0 + timedelta(seconds=30)
    earlier = old.model_copy(update={"hash": "u1"})  # the same revision failed again, later
    assert rr.due_at(failed(), earlier, BACKOFF) == T0 + timedelta(seconds=30)
    assert rr.after_attempt(failed(), earlier, T0).attempts == 1
    ongoing = ReResolveStatus(hash="u1", attempts=3, last_attempt_time=T0 + timedelta(minutes=5))
    assert rr.due_at(failed(), ongoing, BACKOFF) == T0 + timedelta(minutes=9)
    assert rr.after_attempt(failed(), ongoing, T0 + timedelta(minutes=9)).attempts == 4


def test_a_record_whose_failure_is_gone_is_stale() -> None:
    record = ReResolveStatus(hash="u1", attempts=2, last_attempt_time=T0)
    assert not rr.stale(record, failed())
    assert rr.stale(record, None)  # resolved at last: the rollout cleared failedRevision
    assert rr.stale(record, failed(hash_="u2"))
    assert rr.stale(record, failed("EvaluationFailed"))
    assert not rr.stale(None, None)


def test_the_cache_lagging_behind_this_process_write_does_not_hide_it() -> None:
    memory = rr.ReResolves()
    older = ReResolveStatus(hash="u1", attempts=1, last_attempt_time=T0)
    newer = ReResolveStatus(hash="u1", attempts=2, last_attempt_time=T0 + timedelta(minutes=1))
    memory.wrote("ns/m", newer)
    assert memory.latest("ns/m", older) == newer
    assert memory.latest("ns/m", None) == newer
    assert memory.latest("ns/other", older) == older


def test_other_failures_are_not_re_resolved() -> None:
    assert rr.due_at(failed("EvaluationFailed"), None, BACKOFF) is None
    assert rr.due_at(None, None, BACKOFF) is None


def test_the_cap_and_base_are_settings() -> None:
    quick = rr.Backoff(first=timedelta(seconds=5), longest=timedelta(seconds=12))
    assert [quick.wait(n).total_seconds() for n in range(4)] == [5, 10, 12, 12]
    assert BACKOFF.wait(10_000) == timedelta(minutes=10)  # no overflow however long it fails
    assert BACKOFF.describe() == "waits double from 30 s to 10 min"


def test_a_due_re_resolve_starts_the_failed_revision_without_a_token() -> None:
    spec = {"model": "laya:nowhere"}
    desired = desired_revision(dm(spec), DispatchSettings())
    status = {
        "phase": "Failed",
        "failedRevision": {"hash": desired.requested_hash, "model": "laya:nowhere",
                           "reason": "ModelNotFound"},
    }  # fmt: skip
    obj = dm(spec, status)
    assert not decide(obj, desired, []).start  # not due: nothing
    again = decide(obj, desired, [], re_resolve=True)
    assert again.start and again.consume_retry is None


def test_a_spec_change_starts_at_once_whatever_the_backoff() -> None:
    old = {"model": "laya:nowhere"}
    failed_hash = desired_revision(dm(old), DispatchSettings()).requested_hash
    status = {
        "phase": "Failed",
        "failedRevision": {"hash": failed_hash, "model": "laya:nowhere",
                           "reason": "ModelNotFound", "failedAt": "2026-12-02T12:00:00Z"},
        "reResolve": {"hash": failed_hash, "attempts": 6,
                      "lastAttemptTime": "2026-12-02T12:30:00Z"},
    }  # fmt: skip
    obj = dm({"model": "laya:published"}, status)
    assert obj.status is not None and obj.status.re_resolve is not None
    assert decide(obj, desired_revision(obj, DispatchSettings()), [], re_resolve=False).start
