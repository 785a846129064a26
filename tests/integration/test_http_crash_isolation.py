"""Seed 000 multi-tenant runtime crash isolation proof over HTTP: runtime-instance processes of
tenants A and B are SIGKILLed mid-DAG; tenant C's keeps running (see crash_isolation_scenario)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime_core.hot_state import EmbeddedRedis
from runtime_core.instances import HostTransport
from tests.integration import crash_isolation_scenario as scenario
from tests.integration.crash_isolation_scenario import Proof

TRANSPORT = HostTransport.HTTP


@pytest.fixture(scope="module")
async def proof(
    redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Proof]:
    async with scenario.proof_run(TRANSPORT, redis_server, tmp_path_factory.mktemp("http-proof")) as ran:
        yield ran


async def test_http_recovered_work_is_3_runs_for_each_killed_tenant_and_0_for_the_safe_tenant(
    proof: Proof,
) -> None:
    await scenario.recovered_work_is_three_runs_per_killed_tenant_and_none_for_the_safe_tenant(proof)


async def test_http_recovery_forensics_exist_for_killed_tenants_a_and_b_and_not_for_c(proof: Proof) -> None:
    await scenario.recovery_forensics_and_ledger_evidence_exist_only_for_killed_tenants(proof)


async def test_http_safe_tenant_runs_complete_on_their_instance_with_zero_recovery_records(
    proof: Proof,
) -> None:
    await scenario.safe_tenant_runs_complete_on_its_own_instance_with_zero_recovery_records(proof)


async def test_http_no_ledger_entry_or_run_id_crosses_tenants(proof: Proof) -> None:
    await scenario.no_ledger_entry_or_id_crosses_tenants(proof)


async def test_http_in_flight_executions_keep_their_execution_id_and_match_an_uncrashed_fingerprint(
    proof: Proof,
) -> None:
    await scenario.in_flight_executions_finish_with_their_execution_id_and_an_uncrashed_fingerprint(proof)


async def test_http_steps_completed_before_the_crash_are_not_re_executed(proof: Proof) -> None:
    await scenario.steps_completed_before_the_crash_are_not_re_executed(proof)


async def test_http_strict_replay_validation_passes_for_every_recovered_execution(proof: Proof) -> None:
    await scenario.strict_replay_validation_passes_for_every_recovered_execution(proof)


async def test_http_recovered_runs_land_on_tenant_owned_replacements_created_by_scale_out(
    proof: Proof,
) -> None:
    await scenario.recovered_runs_land_on_tenant_owned_replacements_created_by_scale_out(proof)


async def test_http_no_runtime_instance_process_outlives_the_scenario(proof: Proof) -> None:
    await scenario.no_runtime_instance_process_outlives_the_scenario(proof)


async def test_http_scale_out_replaces_an_unsafe_instance_at_the_tenant_instance_limit(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    await scenario.scale_out_replaces_an_unsafe_instance_at_the_tenant_instance_limit(
        TRANSPORT, redis_server, tmp_path
    )
