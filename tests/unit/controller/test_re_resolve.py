"""ModelNotFound is re-resolved by itself with a bounded backoff (seed 001, issue 22); other
failures wait for a spec change or a retry token."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from test_decide import dm

from controller.reconciler.decide import decide
from controller.reconciler.dispatch import DispatchSettings, desired_revision
from controller.reconciler.re_resolve import ReResolves
from decisionmodel.api.status import FailedRevisionStatus

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def failed(
    reason: str = "ModelNotFound", hash_: str = "u1", at: datetime = T0
) -> FailedRevisionStatus:
    return FailedRevisionStatus(hash=hash_, model="laya:nowhere", reason=reason, failed_at=at)


def test_the_backoff_doubles_from_30_s_to_10_min_and_restarts_for_another_revision() -> None:
    r = ReResolves()
    waits = []
    for _ in range(7):
        due = r.due_at("ns/m", failed())
        assert due is not None
        waits.append((due - T0).total_seconds())
        r.started("ns/m", failed())
    assert waits == [30, 60, 120, 240, 480, 600, 600]
    assert r.due_at("ns/m", failed(hash_="u2")) == T0 + timedelta(seconds=30)


def test_other_failures_are_not_re_resolved() -> None:
    r = ReResolves()
    assert r.due_at("ns/m", failed("EvaluationFailed")) is None
    assert r.due_at("ns/m", None) is None


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
