"""UnansweredDispatches: the back-off a process keeps from instances its dispatches could not reach."""

from __future__ import annotations

from runtime_core.providers import UnansweredDispatches


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_unanswered_instance_is_left_alone_for_the_backoff_then_offered_again() -> None:
    clock = Clock()
    backoff = UnansweredDispatches(first_s=0.5, max_s=10, clock=clock)
    assert backoff.reaches("rt_a")
    assert backoff.unanswered("rt_a") == 0.5
    assert not backoff.reaches("rt_a") and backoff.reaches("rt_b")
    clock.now += 0.5
    assert backoff.reaches("rt_a")


def test_failures_in_a_row_double_the_backoff_up_to_its_cap_and_an_answer_forgets_them() -> None:
    clock = Clock()
    backoff = UnansweredDispatches(first_s=0.5, max_s=3, clock=clock)
    assert [backoff.unanswered("rt_a") for _ in range(5)] == [0.5, 1, 2, 3, 3]
    backoff.answered("rt_a")
    assert backoff.reaches("rt_a")
    assert backoff.unanswered("rt_a") == 0.5
