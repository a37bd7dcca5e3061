"""The post-promotion watch fails a promotion only for a reason waiting would not fix (issue 22):
a scale-down, a Pod being replaced, or a runtime missing probes for less than the steady
state's window keep it; a gate failure with too few passing Pods, or no passing Pod past the
window, end it."""

from __future__ import annotations

from collections.abc import Callable

from decisionmodel.engine.runtime_client import GateVerdict
from decisionmodel.rollout.promoted_watch import PodLook, WatchJudge
from decisionmodel.vocabulary import Reason

PASS = GateVerdict(ready=True, reason=Reason.MODEL_READY, message="ok")
DIGEST = GateVerdict(ready=False, reason=Reason.DIGEST_MISMATCH, message="loaded digest eee")
LOST = GateVerdict(ready=False, reason=Reason.PROBE_ERROR, message="the model is not loaded")
SILENT = GateVerdict(ready=False, reason=Reason.PROBE_ERROR, message="401", unanswered=True)


def look(uid: str, verdict: GateVerdict, serving: bool = True) -> PodLook:
    return PodLook(uid=uid, name=f"pod-{uid}", serving=serving, verdict=verdict)


def test_fewer_pods_than_the_rollout_started_with_is_no_failure_when_they_pass() -> None:
    judge = WatchJudge(error_window=180)
    for now in range(0, 100, 10):  # scaled from 3 to 1: one Pod left, passing
        assert not judge.judge([look("a", PASS)], desired=1, now=now).failed


def test_a_replacement_still_warming_is_neither_passing_nor_failing() -> None:
    judge = WatchJudge(error_window=180)
    looks = [look("a", PASS), look("b", PASS), look("c", LOST, serving=False)]
    for now in range(0, 100, 10):
        judged = judge.judge(looks, desired=3, now=now)
        assert not judged.failed and "c" in judged.tolerated


def test_a_runtime_that_misses_probes_is_tolerated_for_the_window_then_fails() -> None:
    judge = WatchJudge(error_window=60)
    looks = [look("a", PASS), look("b", SILENT)]
    early = judge.judge(looks, desired=2, now=0)
    assert not early.failed and early.tolerated == {"b"}
    assert not judge.judge(looks, desired=2, now=50).failed
    assert not judge.judge(looks, desired=2, now=60).failed  # first strike past the window
    late = judge.judge(looks, desired=2, now=70)
    assert late.failed and "pod-b" in late.message and "for 60s" in late.message


def test_an_answer_in_between_forgives_the_errors_before_it() -> None:
    judge = WatchJudge(error_window=60)
    judge.judge([look("b", SILENT)], desired=1, now=0)
    judge.judge([look("b", PASS)], desired=1, now=50)
    assert not judge.judge([look("b", SILENT)], desired=1, now=100).failed
    assert not judge.judge([look("b", SILENT)], desired=1, now=150).failed


def test_a_wrong_digest_on_every_pod_fails_on_the_second_check() -> None:
    judge = WatchJudge(error_window=180)
    looks = [look("a", DIGEST), look("b", DIGEST)]
    assert not judge.judge(looks, desired=2, now=0).failed
    failed = judge.judge(looks, desired=2, now=10)
    assert failed.failed and failed.tolerated == frozenset()
    assert "0/2 Pods passing" in failed.message and "DigestMismatch" in failed.message


def test_a_gate_failure_with_enough_pods_passing_is_no_strike() -> None:
    judge = WatchJudge(error_window=180)
    looks = [look("a", PASS), look("b", PASS), look("c", DIGEST)]
    for now in range(0, 100, 10):  # scaled down to 2 while one Pod is wrong: 2 serve right
        assert not judge.judge(looks, desired=2, now=now).failed


def test_a_serving_pod_that_lost_its_model_is_a_gate_failure() -> None:
    judge = WatchJudge(error_window=180)
    assert not judge.judge([look("a", LOST)], desired=1, now=0).failed
    assert judge.judge([look("a", LOST)], desired=1, now=10).failed


def test_no_passing_pod_past_the_window_fails_and_scale_to_zero_does_not() -> None:
    judge = WatchJudge(error_window=60)
    warming = [look("a", LOST, serving=False)]
    assert not judge.judge(warming, desired=1, now=0).failed
    assert not judge.judge(warming, desired=1, now=59).failed
    gone = judge.judge([], desired=1, now=60)
    assert gone.failed and "no Pod passed its readiness gate for 60s" in gone.message
    zero = WatchJudge(error_window=60)
    assert not zero.judge([], desired=0, now=0).failed
    assert not zero.judge([], desired=0, now=600).failed


def test_a_pod_that_served_and_lost_its_model_is_no_longer_warming_once_its_gate_fell() -> None:
    judge = WatchJudge(error_window=180)
    assert not judge.judge([look("a", LOST, serving=True)], desired=1, now=0).failed
    # Its gate was set False (by the watch or the steady state): it still failed.
    assert judge.judge([look("a", LOST, serving=False)], desired=1, now=10).failed


def run_watch(
    judge: WatchJudge, looks_at: Callable[[int], list[PodLook]], window: int, desired: int
) -> tuple[int, bool]:
    """The activity's loop, one check a second: (when it ended, whether it failed). It ends
    at the window's end only when no judgement is open (activities/watch_promoted.py)."""
    for now in range(0, window + 600):
        looks = looks_at(now)
        if judge.judge(looks, desired=desired, now=now).failed:
            return now, True
        if now >= window and not judge.pending(now):
            return now, False
    raise AssertionError("the watch never ended")


def test_a_watch_shorter_than_the_error_window_still_judges_pods_gone_silent() -> None:
    # Issue 34: a 60 s watch, a 180 s error window; every new Pod stops answering at 5 s
    # (crashed, or its runtime refuses every request). The watch goes on past its window
    # until that is judged: failed 180 s after the last answer, not held at 60 s.
    def silent_from_5(now: int) -> list[PodLook]:
        verdict = PASS if now < 5 else SILENT
        return [look("a", verdict), look("b", verdict)]

    assert run_watch(WatchJudge(error_window=180), silent_from_5, 60, 2) == (185, True)


def test_a_watch_shorter_than_the_error_window_judges_pods_that_crashed() -> None:
    # Crashed Pods are not probed at all (containers not ready): no Pod passes.
    def crashed_from_5(now: int) -> list[PodLook]:
        return [look("a", PASS), look("b", PASS)] if now < 5 else []

    assert run_watch(WatchJudge(error_window=180), crashed_from_5, 60, 2) == (185, True)


def test_a_pod_silent_for_a_moment_at_the_windows_end_holds_once_it_answers() -> None:
    def blip(now: int) -> list[PodLook]:
        return [look("a", PASS), look("b", SILENT if 55 <= now < 90 else PASS)]

    assert run_watch(WatchJudge(error_window=180), blip, 60, 2) == (90, False)


def test_nothing_open_at_the_windows_end_ends_it_there() -> None:
    def warming(now: int) -> list[PodLook]:  # a replacement warming beside a passing Pod
        return [look("a", PASS), look("c", LOST, serving=False)]

    assert run_watch(WatchJudge(error_window=180), warming, 60, 2) == (60, False)


def test_no_pod_serving_while_the_previous_revision_passes_fails_at_once() -> None:
    # Issue 34: the Service selected only failing Pods for two periods (the strikes) or the
    # whole error window (Pods that do not answer) while the previous revision answered.
    for verdict in (LOST, DIGEST, SILENT):
        judge = WatchJudge(error_window=180)
        assert not judge.judge([look("a", PASS), look("b", PASS)], desired=2, now=0).failed
        failing = [look("a", verdict), look("b", verdict)]
        judged = judge.judge(failing, desired=2, now=1, fallback=2)
        assert judged.failed, verdict
        assert "pod-a: " in judged.message and "pod-b: " in judged.message
        assert "2 Pod(s) of the previous revision" in judged.message


def test_without_a_previous_revision_passing_the_strikes_and_the_window_judge() -> None:
    judge = WatchJudge(error_window=180)
    assert not judge.judge([look("a", SILENT)], desired=1, now=0, fallback=0).failed
    assert not judge.judge([look("a", SILENT)], desired=1, now=10, fallback=0).failed
    judge = WatchJudge(error_window=180)
    assert not judge.judge([look("a", LOST)], desired=1, now=0, fallback=0).failed


def test_replacements_still_warming_are_no_outage() -> None:
    # Every Pod replaced at once (deleted, rolled): nothing failed, they may serve in a moment.
    judge = WatchJudge(error_window=180)
    warming = [look("c", LOST, serving=False), look("d", SILENT, serving=False)]
    assert not judge.judge(warming, desired=2, now=0, fallback=2).failed
    # Without any Pod to look at, there is no evidence either.
    assert not judge.judge([], desired=2, now=1, fallback=2).failed


def test_one_pod_still_passing_is_no_outage() -> None:
    judge = WatchJudge(error_window=180)
    looks = [look("a", PASS), look("b", SILENT)]
    assert not judge.judge(looks, desired=2, now=0, fallback=2).failed
