"""When a batch's running step counts as long enough to hand the rest of the batch back
(`_BatchProgress.recheck_in`), on made-up loop times: no clock is read."""

from __future__ import annotations

from runtime_core.dag._batch_path import HAND_BACK_AFTER_S, _BatchProgress

DELAY = HAND_BACK_AFTER_S


def _batch(step_started: float, due: float) -> _BatchProgress:
    batch = _BatchProgress([])
    batch.step_started, batch.due = step_started, due
    return batch


def test_a_step_running_the_whole_delay_when_the_timer_fires_on_time_is_long() -> None:
    assert _batch(step_started=10.0, due=10.0 + DELAY).recheck_in(10.0 + DELAY) is None


def test_a_step_that_started_after_the_timer_was_set_is_looked_at_again_when_its_delay_is_up() -> None:
    delay = _batch(step_started=10.0 + 0.4 * DELAY, due=10.0 + DELAY).recheck_in(10.0 + DELAY)
    assert delay is not None and abs(delay - 0.4 * DELAY) < 1e-9  # it ran 0.6 of its delay


def test_a_timer_that_fired_late_looks_again_a_whole_delay_later() -> None:
    # The process was busy for 3 delays: the step may only have waited for its turn.
    late = _batch(step_started=10.0, due=10.0 + DELAY)
    assert late.recheck_in(10.0 + 4 * DELAY) == DELAY
    slightly_late = _batch(step_started=10.0, due=10.0 + DELAY)
    assert slightly_late.recheck_in(10.0 + DELAY + DELAY / 4) is None
