"""Issue 14.4: choosing the step that failed a run, and reading a step's recorded error."""

from __future__ import annotations

from dataclasses import dataclass

from runtime_core.dag import StepError, failing_step, failure_summary


@dataclass(frozen=True)
class Step:
    name: str
    status: str
    error: StepError | None = None
    step_key: str = "test.flaky"

    @property
    def last_error(self) -> StepError | None:
        return self.error


def test_the_failing_step_is_the_one_that_failed_first() -> None:
    steps = [
        Step("a", "Completed", StepError("transient", "recovered", at_ms=1)),
        Step("b", "Failed", StepError("permanent", "late", at_ms=30)),
        Step("c", "Failed", StepError("timeout", "early", at_ms=20)),
    ]

    assert failing_step(steps) == steps[2]
    assert failure_summary(steps[2]) == "step 'c' (test.flaky) failed: [timeout] early"


def test_failures_at_the_same_or_an_unknown_time_go_by_pipeline_order() -> None:
    same_time = [
        Step("x", "Failed", StepError("a", "", at_ms=5)),
        Step("y", "Failed", StepError("b", "", at_ms=5)),
    ]
    unknown = [Step("p", "Failed"), Step("q", "Failed", StepError("c", "", at_ms=None))]

    assert failing_step(same_time) == same_time[0]
    assert failing_step(unknown) == unknown[0]
    assert failure_summary(unknown[0]) == "step 'p' (test.flaky) failed: no error was recorded"
    assert failing_step([Step("ok", "Completed")]) is None


def test_a_recorded_error_reads_code_message_reason_and_server_time() -> None:
    recorded = {"code": "transient", "message": "boom", "reason": "retry 1 of 3", "at_ms": 1_733_212_345_678}

    assert StepError.parse(recorded) == StepError("transient", "boom", "retry 1 of 3", 1_733_212_345_678)
    assert StepError.parse({"message": "older record"}) == StepError("step_failed", "older record")
    assert StepError.parse(None) is None
