"""The one judge of a Pod that does not answer (decisionmodel/rollout/unanswered.py): what the
steady state, promote's re-check and the post-promotion watch all count with."""

from __future__ import annotations

from decisionmodel.engine.runtime_client import GateVerdict
from decisionmodel.rollout.promote_recheck import Round, judge
from decisionmodel.rollout.promoted_watch import PodLook, WatchJudge
from decisionmodel.rollout.unanswered import AnswerWindow, outside
from decisionmodel.vocabulary import Reason


def test_a_pod_is_tolerated_from_its_first_miss_until_the_window_ends() -> None:
    w = AnswerWindow(180.0)
    assert w.tolerates("p", 1000.0)  # the first miss opens the window
    assert w.tolerates("p", 1179.9)
    assert not w.tolerates("p", 1180.0)  # the window is half-open: 180 s is past it
    assert w.waited("p", 1200.0) == 200.0


def test_an_answer_forgives_and_the_count_starts_over() -> None:
    w = AnswerWindow(180.0)
    w.tolerates("p", 0.0)
    w.answered("p")
    assert w.tolerates("p", 500.0) and w.waited("p", 600.0) == 100.0
    w.tolerates("q", 500.0)
    w.only(["q"])
    assert set(w.since) == {"q"}


def test_open_while_any_window_runs() -> None:
    w = AnswerWindow(10.0)
    assert not w.open(0.0)
    w.tolerates("p", 0.0)
    assert w.open(9.0) and not w.open(10.0)


def test_the_three_places_draw_the_line_at_the_same_second() -> None:
    """Steady state (AnswerWindow.tolerates), promote's re-check (judge) and the watch
    (WatchJudge) agree on when a Pod that keeps not answering stops being tolerated."""
    window = 180.0
    quiet = GateVerdict(
        ready=False, reason=Reason.PROBE_ERROR, message="probe failed", unanswered=True
    )
    for waited in (0.0, 179.0, 180.0, 181.0):
        steady = AnswerWindow(window)
        steady.tolerates("p", 0.0)
        tolerated = steady.tolerates("p", waited)
        recheck = judge(Round(0, ["p: quiet"], []), 1, "c1", waited, window).outcome == "wait"
        watch = WatchJudge(window)
        look = PodLook(uid="p", name="p", serving=True, verdict=quiet)
        watch.judge([look], desired=1, now=0.0)
        seen = watch.judge([look], desired=1, now=waited)
        watched = "p" in seen.tolerated
        assert tolerated == recheck == watched == (not outside(waited, window)), waited
