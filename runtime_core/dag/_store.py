"""DagStore: typed wrappers over the DAG Lua scripts (its read-only views are `_reads`).

Each wrapper is the only place that knows its script's KEYS/ARGV order and maps the
script's return codes to an enum (the values it answers with are in `_records`). Must not
decide anything about steps: the engine does.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from runtime_core.dag._keys import BLOCKING_CONTROL_ARG, ExecutionKeys
from runtime_core.dag._reads import ExecutionReads, queue_view, view_from
from runtime_core.dag._records import (
    AdvanceResult,
    CanonicalResult,
    ClaimBatch,
    ClaimOutcome,
    DropOutcome,
    ExecutionMeta,
    Finalization,
    FinalizeOutcome,
    FirstClaim,
    ReadyView,
    ReassignOutcome,
    ReassignResult,
    StepClaim,
    TransitionOutcome,
    TransitionResult,
    decoded_json,
)
from runtime_core.errors import FencedError
from runtime_core.hot_state import HotState, time_reply_ms
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.pipeline import PipelineDefinition, remember_stored_pipeline, steps_read_by
from runtime_core.steps import canonical_json

KEY_CACHE_SIZE = 4096
# A claimed step's dependency results when it reads none (cjson encodes an empty table as {}).
_NO_DEPENDENCIES = ("{}", "[]")


def _stored_text(result: Any) -> str:
    return result.text if isinstance(result, CanonicalResult) else canonical_json(result)


class DagStore(ExecutionReads):
    """Hot DAG state of executions in Redis; every write goes through a Lua script."""

    def __init__(self, hot_state: HotState) -> None:
        self.hot_state = hot_state
        self._scripts = hot_state.scripts
        # Key names are built once per execution, not per step transition (the hot path).
        self._keys = functools.lru_cache(maxsize=KEY_CACHE_SIZE)(self._build_keys)

    def _build_keys(self, execution_id: str) -> ExecutionKeys:
        return ExecutionKeys.of(self.hot_state, execution_id)

    def keys(self, execution_id: str) -> ExecutionKeys:
        return self._keys(execution_id)

    async def create_execution(
        self,
        execution_id: str,
        pipeline: PipelineDefinition,
        state: dict[str, Any],
        snapshot: ExecutionContextSnapshot | None,
        attributes: dict[str, str] | None = None,
    ) -> ExecutionMeta | None:
        """Create the DAG state once; its metadata as `load_meta` would read it now, or None
        when it already existed (unchanged).

        FencedError when recovery gave this ExecutionId up (`fence_execution`)."""
        created, _ = await self.create_claiming(execution_id, pipeline, state, snapshot, attributes)
        return created

    async def create_claiming(
        self,
        execution_id: str,
        pipeline: PipelineDefinition,
        state: dict[str, Any],
        snapshot: ExecutionContextSnapshot | None,
        attributes: dict[str, str] | None = None,
        first_claim: FirstClaim | None = None,
    ) -> tuple[ExecutionMeta | None, AdvanceResult | None]:
        """`create_execution`, claiming up to `first_claim.max_claim` of the new execution's
        claimable steps in the same call (as `advance` would claim them next, for the caller's
        workers: `owner` must be the execution's owner). The claims come back as the
        `AdvanceResult` of that claim; None when nothing was asked or the DAG already existed.
        A creation sent again after its reply was lost (the same `first_claim`, see
        `FirstClaim.for_creation`) gets back the metadata and the claims it made."""
        k = self.keys(execution_id)
        children: dict[str, list[str]] = {step.name: [] for step in pipeline.steps}
        for step in pipeline.steps:
            for dep in step.depends_on:
                children[dep].append(step.name)
        steps = [
            {
                "name": s.name,
                "deps": list(s.depends_on),
                "children": children[s.name],
                "needs": steps_read_by(s),
            }
            for s in pipeline.steps
        ]
        meta = {
            **(attributes or {}),
            "execution_id": execution_id,
            "pipeline": pipeline.to_json(),
            "state": canonical_json(state),
            "snapshot": snapshot.to_json() if snapshot else "",
            "tenant_id": snapshot.tenant_id if snapshot else "",
        }
        keys = [k.meta, k.status, k.pending, k.children, k.ready, k.needs, k.fenced]
        args = [json.dumps(meta), json.dumps(steps)]
        if first_claim is not None:
            keys += [k.running, k.token, k.claimed, k.control]
            args += [first_claim.max_claim, first_claim.lease_ms, first_claim.token_prefix]
        reply = await self.hot_state.coalesced("create_execution")(keys=keys, args=args)
        if int(reply[0]) == -1:
            raise FencedError(
                f"Execution '{execution_id}' was given up by recovery ({reply[2]}) and cannot be created.",
                hint="Its run was dispatched again under a new ExecutionId; nothing to do.",
            )
        if int(reply[0]) == 0:
            return None, None
        remember_stored_pipeline(meta["pipeline"], pipeline)  # read back at its end, in this process
        first = self._first_claims(execution_id, reply) if first_claim is not None else None
        if int(reply[0]) == 2:  # created by this very call, whose reply was lost
            created = await self.load_meta(execution_id)
            return (created, first) if created is not None else (None, None)
        created_at_ms = int(reply[1])
        stored = {
            **meta,
            "status": "Running",
            "created_at_ms": str(created_at_ms),
            "step_count": str(len(steps)),
            "completed_count": "0",
            "claim_seq": str(len(first.claims.claims) if first is not None else 0),
        }
        created = ExecutionMeta(
            execution_id, pipeline, state, snapshot, "Running", created_at_ms, None, stored
        )
        return created, first

    def _first_claims(self, execution_id: str, reply: list[Any]) -> AdvanceResult:
        """The claims a creation made, as the `advance` that claims them would return them."""
        now, backlog, count = int(reply[1]), int(reply[2]), int(reply[3])
        claims = [self._claim(execution_id, *reply[4 + 4 * i : 8 + 4 * i], now=now) for i in range(count)]
        return AdvanceResult(now, [], ClaimBatch(ClaimOutcome.CLAIMED, now, claims), False, backlog)

    async def fence_execution(self, execution_id: str, reason: str, *, retention_ms: int) -> str | None:
        """Give up an ExecutionId whose DAG does not exist (refused by `create_execution` for
        `retention_ms`); the DAG's status when it does."""
        k = self.keys(execution_id)
        reply = await self._scripts["fence_execution"](keys=[k.meta, k.fenced], args=[reason, retention_ms])
        return None if int(reply[0]) == 1 else str(reply[2])

    async def advance(
        self,
        execution_id: str,
        completions: Sequence[tuple[StepClaim, Any]] = (),
        *,
        max_claim: int,
        lease_ms: int,
        token_prefix: str,
        owner: str = "",
        finalize: bool = False,
        final_view_of: PipelineDefinition | None = None,
    ) -> AdvanceResult:
        """Complete `completions` ((claim, stored result or its CanonicalResult) pairs), then
        claim up to `max_claim` steps: the common path of an execution in one scripted round
        trip. `owner`: the local run claiming; claims are SUPERSEDED once the execution belongs
        to another one. An
        assisting instance claims as '@<assistant>': its completions are rejected and its
        claims SUPERSEDED once its assistance lease lapsed. `finalize`: when the call converges
        the execution it also finalizes it (as `finalize` would, in the same round trip).
        `final_view_of` (the execution's pipeline, when the caller expects this call to finalize
        it): the execution is read right after the script in the same round trip, and the
        result's `final_view` is that view when the call did finalize it."""
        k = self._keys(execution_id)
        args: list[Any] = [len(completions)]
        for claim, result in completions:
            args += [claim.step_name, claim.token, _stored_text(result)]
        args += [max_claim, lease_ms, token_prefix, BLOCKING_CONTROL_ARG, owner, "1" if finalize else ""]
        view_replies: list[Any] | None = None
        if final_view_of is None:
            reply = await self.hot_state.coalesced("advance_steps")(k.advance_keys(), args)
        else:
            reply, view_replies = await self._advance_reading(k, args)
        now = int(reply[1])
        if int(reply[0]) != 1:
            missing = TransitionResult(TransitionOutcome.EXECUTION_MISSING, now)
            return AdvanceResult(
                now, [missing] * len(completions), ClaimBatch(ClaimOutcome.EXECUTION_MISSING, now), False
            )
        converged, count = int(reply[2]) == 1, int(reply[3])
        completed = self._completions(reply[4 : 4 + 2 * count], now)
        claims = self._claims(execution_id, reply[4 + 2 * count : -3], now)
        code, final = reply[-2], str(reply[-1]) or None
        finalization = Finalization(FinalizeOutcome(int(code)), final, now) if code != "" else None
        view = None
        if view_replies is not None and finalization is not None and finalization.status:
            view = view_from(view_replies, final_view_of)
        return AdvanceResult(now, completed, claims, converged, int(reply[-3]), finalization, view)

    async def _advance_reading(self, k: ExecutionKeys, args: list[Any]) -> tuple[Any, list[Any] | None]:
        """`advance_steps`, then the execution's view commands, in one coalesced call: the
        script's reply and the view's replies (None when a reply failed, or the script had to
        be sent again after NOSCRIPT: the view was read before it ran)."""
        script, keys = self._scripts["advance_steps"], k.advance_keys()

        def queue(pipe: Any) -> None:
            script.queue(pipe, keys, args)
            queue_view(pipe, k)

        async def read(replies: list[Any]) -> tuple[Any, list[Any] | None]:
            ran = not isinstance(replies[0], BaseException)
            reply = await script.settle(keys, args, replies[0])
            view = replies[1:]
            fine = ran and not any(isinstance(r, BaseException) for r in view)
            return reply, view if fine else None

        return await self.hot_state.coalescer.call(queue, read)

    @classmethod
    def _completions(cls, pairs: list[Any], now: int) -> list[TransitionResult]:
        """A result per completion from its (code, detail) pair; equal pairs share one (frozen)
        result: most completions of a batch read APPLIED with the same dependents released."""
        made: dict[tuple[Any, Any], TransitionResult] = {}
        completed = []
        for i in range(0, len(pairs), 2):
            pair = (pairs[i], pairs[i + 1])
            result = made.get(pair)
            if result is None:
                result = made[pair] = cls._completion(*pair, now)
            completed.append(result)
        return completed

    @staticmethod
    def _completion(code: Any, detail: Any, now: int) -> TransitionResult:
        outcome = TransitionOutcome(int(code))
        released = int(detail) if outcome is TransitionOutcome.APPLIED else 0
        return TransitionResult(outcome, now, released=released)

    def _claims(self, execution_id: str, reply: list[Any], now: int) -> ClaimBatch:
        code, detail, next_eligible, count = int(reply[0]), str(reply[1]), reply[2], int(reply[3])
        if code != 1:
            return ClaimBatch(ClaimOutcome(code), now, detail=detail)
        control = detail or None
        if count == 0:
            next_ms = int(float(next_eligible)) if next_eligible != "" else None
            return ClaimBatch(ClaimOutcome.CLAIMED, now, next_eligible_ms=next_ms, control_status=control)
        claims = [self._claim(execution_id, *reply[4 + 4 * i : 8 + 4 * i], now=now) for i in range(count)]
        return ClaimBatch(ClaimOutcome.CLAIMED, now, claims, control_status=control)

    async def claim_ready_steps(
        self,
        execution_id: str,
        *,
        max_steps: int,
        lease_ms: int,
        worker_id: str,
        token_prefix: str,
        owner: str = "",
    ) -> ClaimBatch:
        """Claim up to `max_steps` claimable steps (`advance` with nothing to complete).

        `owner`: the claiming local run; SUPERSEDED once the execution belongs to another one."""
        advanced = await self.advance(
            execution_id, max_claim=max_steps, lease_ms=lease_ms, token_prefix=token_prefix, owner=owner
        )
        return advanced.claims

    async def claim_step(
        self,
        execution_id: str,
        step_name: str,
        *,
        lease_ms: int,
        worker_id: str,
        token_prefix: str,
        owner: str = "",
    ) -> ClaimBatch:
        k = self.keys(execution_id)
        reply = await self._scripts["claim_step"](
            keys=[*k.claim_keys(), k.pending, k.claimed, k.assistants],
            args=[step_name, lease_ms, worker_id, token_prefix, BLOCKING_CONTROL_ARG, owner],
        )
        code, now = int(reply[0]), int(reply[1])
        if code != 1:
            return ClaimBatch(ClaimOutcome(code), now, detail=str(reply[2]) if len(reply) > 2 else "")
        claim = self._claim(execution_id, step_name, reply[2], reply[3], reply[4], now=now)
        return ClaimBatch(ClaimOutcome.CLAIMED, now, [claim], control_status=str(reply[5]) or None)

    async def ready_steps(self, execution_id: str, *, limit: int = 1000) -> ReadyView:
        """Steps in the ready set (Ready or WaitingForRetry) with their eligible-at; one read."""
        k = self.keys(execution_id)
        pipe = self.hot_state.redis.pipeline(transaction=False)
        self.hot_state.queue_server_time(pipe, k.meta)
        pipe.hget(k.meta, "status")
        pipe.hget(k.control, "status")
        pipe.zrangebyscore(k.ready, "-inf", "+inf", start=0, num=limit, withscores=True)
        now, status, control, ready = await pipe.execute()
        return ReadyView(
            now_ms=time_reply_ms(now),
            execution_status=status,
            control_status=control,
            eligible_at_ms={str(name): int(score) for name, score in ready},
        )

    @staticmethod
    def _claim(execution_id: str, name: str, token: str, retries: str, deps: str, *, now: int) -> StepClaim:
        if deps in _NO_DEPENDENCIES:  # most steps read no upstream result: nothing to decode
            return StepClaim(execution_id, name, token, int(retries), {}, now)
        decoded = {dep: decoded_json(raw) for dep, raw in json.loads(deps).items()}
        return StepClaim(execution_id, name, token, int(retries), decoded, now)

    async def complete_step(self, claim: StepClaim, result: Any) -> TransitionResult:
        """Complete one step (`advance` claiming nothing)."""
        advanced = await self.advance(
            claim.execution_id, [(claim, result)], max_claim=0, lease_ms=0, token_prefix=""
        )
        [completed] = advanced.completed
        return replace(completed, converged=advanced.converged)

    async def fail_step(
        self, claim: StepClaim, *, retry: bool, delay_ms: int, error: dict[str, Any], claimer: str = ""
    ) -> TransitionResult:
        """Fail (or schedule the retry of) a claimed step; `claimer` as in `advance`."""
        k = self.keys(claim.execution_id)
        reply = await self._scripts["fail_step"](
            keys=[k.meta, k.status, k.ready, k.running, k.token, k.retries, k.error, k.assistants],
            args=[
                claim.step_name,
                claim.token,
                "retry" if retry else "fail",
                delay_ms,
                canonical_json(error),
                claimer,
            ],
        )
        code, now = int(reply[0]), int(reply[1])
        if code != 1:
            return TransitionResult(TransitionOutcome(code), now)
        return TransitionResult(
            TransitionOutcome.APPLIED, now, int(reply[2]) == 1, int(reply[3]), int(reply[4])
        )

    async def release_step(self, claim: StepClaim, *, delay_ms: int = 0) -> TransitionOutcome:
        k = self.keys(claim.execution_id)
        reply = await self.hot_state.coalesced("release_step")(
            keys=[k.meta, k.status, k.ready, k.running, k.token],
            args=[claim.step_name, claim.token, delay_ms],
        )
        return TransitionOutcome(int(reply[0]))

    async def renew_step_lease(self, claim: StepClaim, *, lease_ms: int) -> bool:
        """Extend a Running step's lease for its token holder; False once the claim is lost."""
        k = self.keys(claim.execution_id)
        reply = await self._scripts["renew_step_lease"](
            keys=[k.status, k.running, k.token], args=[claim.step_name, claim.token, lease_ms]
        )
        return int(reply[0]) == 1

    async def recover_stale(self, execution_id: str, *, max_steps: int = 1000) -> list[str]:
        k = self.keys(execution_id)
        reply = await self._scripts["recover_stale"](
            keys=[k.meta, k.status, k.ready, k.running, k.token, k.recoveries], args=[max_steps]
        )
        return [str(name) for name in reply[1:]]

    async def finalize(self, execution_id: str) -> Finalization:
        k = self.keys(execution_id)
        reply = await self.hot_state.coalesced("finalize_execution")(
            keys=[k.meta, k.status, k.ready, k.running, k.control], args=[]
        )
        status = str(reply[2]) if len(reply) > 2 else None
        return Finalization(FinalizeOutcome(int(reply[0])), status, int(reply[1]))

    async def reassign_execution(self, execution_id: str, attributes: dict[str, str]) -> ReassignResult:
        """Replace the run attributes of a Running execution (never the DAG's own meta fields)."""
        reply = await self._scripts["reassign_execution"](
            keys=[self.keys(execution_id).meta], args=[json.dumps(attributes)]
        )
        code, now = int(reply[0]), int(reply[1])
        if code != 1:
            return ReassignResult(ReassignOutcome(code), now)
        return ReassignResult(ReassignOutcome.REASSIGNED, now, json.loads(reply[2]))

    async def drop_finished(self, execution_id: str) -> DropOutcome:
        """Remove the hot state of a terminal execution (its durable copies answer for it now)."""
        keys = self.keys(execution_id)
        reply = await self._scripts["drop_execution"](keys=keys.all(), args=[])
        return DropOutcome(int(reply[0]))

    async def delete_execution(self, execution_id: str) -> int:
        """Remove all hot state of an execution (retention eviction, replay tests)."""
        return int(await self.hot_state.redis.delete(*self.keys(execution_id).all()))
