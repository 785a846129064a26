"""The values `DagStore` answers with: step and execution statuses, the outcomes of the DAG
scripts, claims, transition results and read-only views of an execution, and building an
execution's metadata and waiting input from what Redis holds.

Must not touch Redis nor know any script's KEYS/ARGV order (`DagStore` does).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any, NamedTuple

from runtime_core.dag._explain import StepError, WaitingInput, failing_step
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import PipelineDefinition, parse_stored_pipeline


class StepStatus(StrEnum):
    PENDING = "Pending"
    READY = "Ready"
    RUNNING = "Running"
    WAITING_FOR_RETRY = "WaitingForRetry"
    COMPLETED = "Completed"
    FAILED = "Failed"


class ExecutionStatus(StrEnum):
    RUNNING = "Running"
    COMPLETED = "Completed"
    FAILED = "Failed"
    CANCELLED = "Cancelled"

    @property
    def is_terminal(self) -> bool:
        return self is not ExecutionStatus.RUNNING


class ClaimOutcome(Enum):
    CLAIMED = 1
    EXECUTION_MISSING = -1
    EXECUTION_TERMINAL = -2
    CONTROL_BLOCKED = -3
    STEP_UNKNOWN = -4
    NOT_CLAIMABLE = -5
    DEPENDENCIES_INCOMPLETE = -6
    RETRY_WINDOW_CLOSED = -7
    SUPERSEDED = -8  # another local run owns the execution now (recovery took it over)


class TransitionOutcome(Enum):
    APPLIED = 1
    STALE_TOKEN = 0
    EXECUTION_MISSING = -1
    NOT_RUNNING = -2


class FinalizeOutcome(Enum):
    FINALIZED = 1
    ALREADY_FINAL = 0
    EXECUTION_MISSING = -1
    NOT_CONVERGED = -3


class Finalization(NamedTuple):
    """What `finalize` did, the execution's terminal status (None while not terminal) and the
    Redis time of the call (the finalization time when this call finalized it)."""

    outcome: FinalizeOutcome
    status: str | None
    at_ms: int


class DropOutcome(Enum):
    DROPPED = 1
    STILL_RUNNING = 0
    MISSING = -1


class ReassignOutcome(Enum):
    REASSIGNED = 1
    UNCHANGED = 0
    EXECUTION_MISSING = -1
    EXECUTION_TERMINAL = -2


@dataclass(frozen=True)
class ReassignResult:
    """`previous`: the former value of every replaced attribute (None when it was unset)."""

    outcome: ReassignOutcome
    now_ms: int
    previous: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class StepClaim:
    execution_id: str
    step_name: str
    token: str
    retry_count: int
    dependency_results: dict[str, Any]
    claimed_at_ms: int


@dataclass(frozen=True)
class FirstClaim:
    """What a creation claims for the workers that advance the execution next
    (`DagStore.create_claiming`)."""

    max_claim: int
    lease_ms: int
    token_prefix: str

    @classmethod
    def for_creation(cls, execution_id: str, max_claim: int, lease_ms: int) -> FirstClaim:
        """The claim of the creation of `execution_id`: its tokens' prefix is derived from the
        ExecutionId, so the creation sent again after its reply was lost gets back the claims it
        made instead of leaving them to lapse (only that creation claims with this prefix: the
        DAG is created once, and later claims use their workers' random prefixes)."""
        digest = hashlib.blake2b(execution_id.encode(), digest_size=8).hexdigest()
        return cls(max_claim, lease_ms, f"c{digest}")


@dataclass(frozen=True)
class CanonicalResult:
    """A step's result as the canonical JSON text it is stored as (already encoded once)."""

    text: str


@dataclass(frozen=True)
class ClaimBatch:
    outcome: ClaimOutcome
    now_ms: int
    claims: list[StepClaim] = field(default_factory=list)
    next_eligible_ms: int | None = None
    detail: str = ""
    control_status: str | None = None


@dataclass(frozen=True)
class ReadyView:
    """A read-only look at what could be claimed: eligible-at per step, server time, gates."""

    now_ms: int
    execution_status: str | None
    control_status: str | None
    eligible_at_ms: dict[str, int] = field(default_factory=dict)

    def eligible_now(self) -> list[str]:
        return [name for name, at_ms in self.eligible_at_ms.items() if at_ms <= self.now_ms]

    def next_eligible_ms(self) -> int | None:
        waiting = [at_ms for at_ms in self.eligible_at_ms.values() if at_ms > self.now_ms]
        return min(waiting, default=None)


@dataclass(frozen=True)
class TransitionResult:
    outcome: TransitionOutcome
    now_ms: int
    converged: bool = False
    retry_count: int = 0
    next_retry_at_ms: int = 0
    released: int = 0  # dependents a completion made Ready


@dataclass(frozen=True)
class AdvanceResult:
    """What one `advance` did: a result per completion (in order), the claims, whether the
    execution converged (nothing ready or running) afterwards, and its `backlog`: the steps
    left in its ready set after the claims (what workers elsewhere could take)."""

    now_ms: int
    completed: list[TransitionResult]
    claims: ClaimBatch
    converged: bool
    backlog: int = 0
    # What finalizing did, when the call was asked to finalize and converged the execution.
    finalization: Finalization | None = None
    # The terminal execution read in the same round trip (`advance`'s `final_view_of`).
    final_view: ExecutionView | None = None


@dataclass(frozen=True)
class ExecutionMeta:
    execution_id: str
    pipeline: PipelineDefinition
    state: dict[str, Any]
    snapshot: ExecutionContextSnapshot | None
    status: str
    created_at_ms: int
    finalized_at_ms: int | None
    attributes: dict[str, str]


@dataclass(frozen=True)
class StepView:
    name: str
    step_key: str
    status: str
    retry_count: int
    recovery_count: int
    result: Any
    error: Any
    owned: bool
    next_retry_at_ms: int | None = None  # while WaitingForRetry: when it may be claimed again
    claimed_at_ms: int | None = None  # while Running: when its current attempt was claimed

    @property
    def last_error(self) -> StepError | None:
        return StepError.parse(self.error)


@dataclass(frozen=True)
class ExecutionView:
    meta: ExecutionMeta
    steps: list[StepView]
    control_status: str | None
    waiting: WaitingInput | None = None  # while control_status is WaitingForInput

    @property
    def failed_step(self) -> StepView | None:
        """The step whose failure failed the execution (the earliest one), if any failed."""
        return failing_step(self.steps)


def decoded_json(raw: str | None) -> Any:
    return None if raw is None else json.loads(raw)


def claimed_at(claimed: dict[str, str], name: str) -> int | None:
    value = claimed.get(name)
    return int(value) if value else None


def waiting_input(
    status: str | None, key: str | None, step: str | None, prompt: str | None, since_ms: str | None
) -> WaitingInput | None:
    if status != "WaitingForInput" or not key:
        return None
    since = int(since_ms) if since_ms else None
    return WaitingInput(key=key, step=step or None, prompt=prompt or "", since_ms=since)


def meta_from_hash(raw: dict[str, str], pipeline: PipelineDefinition | None = None) -> ExecutionMeta | None:
    """An execution's metadata from its meta HASH (None when the execution is missing);
    `pipeline`: the execution's, already parsed (the hash may then leave its text out)."""
    if not raw:
        return None
    return ExecutionMeta(
        execution_id=raw["execution_id"],
        pipeline=pipeline or parse_stored_pipeline(raw["pipeline"]),
        state=json.loads(raw["state"]),
        snapshot=ExecutionContextSnapshot.from_json(raw["snapshot"]) if raw.get("snapshot") else None,
        status=raw["status"],
        created_at_ms=int(raw["created_at_ms"]),
        finalized_at_ms=int(raw["finalized_at_ms"]) if raw.get("finalized_at_ms") else None,
        attributes=raw,
    )
