"""Promote's re-check (decisionmodel.rollout.promote_recheck): an answer that shows the model
lost refuses the promotion at once; Pods that do not answer are waited for, up to the
probe-error window, then refused with how long they were silent (found by the chaos cell
runtime_unreachable at promote: one 10 s timeout used to roll a good candidate back)."""

from __future__ import annotations

from decisionmodel.rollout.promote_recheck import Round, judge

QUIET = "p-0: ProbeError (probe failed: inspect: did not answer within 10 s)"
LOST = "p-1: ProbeError (the model is not loaded (absent from /api/ps))"


def test_enough_ready_pods_pass_whatever_else_was_seen() -> None:
    assert judge(Round(2, [QUIET], [LOST]), 2, "c1", 500.0, 180.0).outcome == "pass"


def test_a_lost_model_is_refused_at_once() -> None:
    found = judge(Round(0, [], [LOST]), 1, "c1", 0.0, 180.0)
    assert found.outcome == "refuse"
    assert "no longer model-ready (0/1) while awaiting promotion: p-1" in found.message
    assert "decisionmodel.io/retry" in found.message


def test_silent_pods_that_could_not_make_up_the_shortfall_are_not_waited_for() -> None:
    # Two desired, one lost, one silent: even if it answers there is one passing Pod.
    found = judge(Round(0, [QUIET], [LOST]), 2, "c1", 0.0, 180.0)
    assert found.outcome == "refuse"


def test_a_silent_pod_is_waited_for_within_the_window() -> None:
    found = judge(Round(0, [QUIET], []), 1, "c1", 42.0, 180.0)
    assert found.outcome == "wait"
    assert "cannot reach p-0" in found.message and "42s of 180s" in found.message
    assert "network from the worker to the Pods" in found.message


def test_past_the_window_a_silent_pod_is_refused_with_how_long() -> None:
    found = judge(Round(0, [QUIET], []), 1, "c1", 180.0, 180.0)
    assert found.outcome == "refuse"
    assert "did not answer the re-check before promotion for 180s" in found.message
