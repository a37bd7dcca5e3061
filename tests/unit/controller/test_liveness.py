"""Liveness from progress: wedged only when there is work and nothing moved for the stall."""

from __future__ import annotations

from controller.serve.liveness import LoopProgress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_an_idle_loop_is_alive_however_long_it_idles() -> None:
    clock = Clock()
    progress = LoopProgress(stall_seconds=10, clock=clock)
    clock.now = 1000
    assert progress.healthy()


def test_work_that_does_not_move_is_wedged_after_the_stall() -> None:
    clock = Clock()
    progress = LoopProgress(stall_seconds=10, clock=clock)
    clock.now = 500  # idle until now: the stall counts from the start of the work
    progress.started()
    clock.now = 510
    assert progress.healthy()
    clock.now = 511
    assert not progress.healthy()
    assert progress.stalled_for() == 11


def test_progress_and_completion_keep_it_alive() -> None:
    clock = Clock()
    progress = LoopProgress(stall_seconds=10, clock=clock)
    progress.started()
    progress.started()
    clock.now = 9
    progress.progressed()
    clock.now = 18
    assert progress.healthy()
    progress.finished()
    clock.now = 27
    assert progress.healthy() and progress.in_flight == 1
    clock.now = 29
    assert not progress.healthy()
    progress.finished()
    assert progress.healthy()


def test_waiting_work_counts_as_work() -> None:
    clock = Clock()
    progress = LoopProgress(stall_seconds=10, clock=clock)
    clock.now = 11
    assert progress.healthy(waiting=0)
    assert not progress.healthy(waiting=3)
