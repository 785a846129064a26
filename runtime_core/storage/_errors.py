"""Errors specific to the durable store. Owns nothing else."""

from __future__ import annotations

from runtime_core.errors import ConflictError, RuntimeCoreError


class PayloadCorruptedError(RuntimeCoreError):
    """A stored payload no longer matches the sha256 recorded when it was written."""

    code = "payload_corrupted"

    def __init__(self, payload_id: str, expected_sha256: str, actual_sha256: str) -> None:
        super().__init__(
            f"payload {payload_id} is corrupted: sha256 {actual_sha256} != recorded {expected_sha256}",
            hint="Restore the store from a backup or replay the producing step; these bytes are unusable.",
        )
        self.payload_id = payload_id
        self.expected_sha256 = expected_sha256
        self.actual_sha256 = actual_sha256


def payload_of_another_tenant(payload_id: str) -> ConflictError:
    """A payload id that another tenant's payload already holds."""
    return ConflictError(
        f"payload id {payload_id} already belongs to another tenant",
        hint="Generate a fresh payload id.",
    )


def shared_run_of_another_tenant(noun: str, shared_run_id: str) -> ConflictError:
    """A record keyed by SharedRunId that another tenant's record already holds."""
    return ConflictError(
        f"{noun} {shared_run_id} already belongs to another tenant",
        hint="A SharedRunId names one tenant's run; check where this record came from.",
    )


class SchemaVersionError(RuntimeCoreError):
    """The database's schema does not match this code: a newer release migrated it, or an applied
    migration differs from the one this code carries. The process refuses to start."""

    code = "durable_schema_mismatch"
