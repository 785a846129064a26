"""The provider wire contract: runtime errors survive the trip as their own class; routes encode ids."""

from __future__ import annotations

import pytest

from runtime_core.errors import (
    ConflictError,
    InputTooLargeError,
    InvalidPipelineError,
    MissingSnapshotError,
    NotFoundError,
    RuntimeCoreError,
    StoreUnavailableError,
)
from runtime_core.providers import Command, ProviderError, RunRef, WireError, http_path

TYPED_ERRORS = [
    NotFoundError,
    ConflictError,
    StoreUnavailableError,
    MissingSnapshotError,
    InputTooLargeError,
    ProviderError,
]


@pytest.mark.parametrize("error_class", TYPED_ERRORS)
def test_runtime_error_round_trips_as_the_same_class_with_message_and_hint(
    error_class: type[RuntimeCoreError],
) -> None:
    wire = WireError.model_validate_json(WireError.of(error_class("boom", hint="do this")).model_dump_json())
    restored = wire.to_exception()
    assert type(restored) is error_class
    assert (restored.message, restored.hint, restored.code) == ("boom", "do this", error_class.code)


def test_invalid_pipeline_error_round_trips_with_its_rule() -> None:
    restored = WireError.of(InvalidPipelineError("cycle", "a -> b -> a", hint="break it")).to_exception()
    assert isinstance(restored, InvalidPipelineError)
    assert (restored.rule, restored.message, restored.hint) == ("cycle", "a -> b -> a", "break it")


def test_unknown_error_code_becomes_a_runtime_error_keeping_the_code() -> None:
    restored = WireError(code="invalid_request", message="bad body").to_exception()
    assert type(restored) is RuntimeCoreError and restored.code == "invalid_request"


def test_http_path_fills_in_percent_encoded_instance_and_run_ids() -> None:
    ref = RunRef(runtime_instance_id="rt_host-http-1:runtime-http-1", local_run_id="lrun_ab12")
    assert (
        http_path(Command.CANCEL_RUN, ref) == "/runtime/rt_host-http-1%3Aruntime-http-1/runs/lrun_ab12/cancel"
    )
