"""Seed 001 visibility matrix (one test per row) and the shipped tenant settings example."""

from __future__ import annotations

from pathlib import Path

from runtime_core.control_plane import TenantsFile
from runtime_core.identity import ExecutionContextSnapshot
from runtime_core.instances import IsolationMode, is_instance_visible

TENANTS = TenantsFile.read(Path(__file__).resolve().parents[2] / "examples/config/tenants.json").catalog

SHARED_TENANT = ExecutionContextSnapshot(user_id="u", tenant_id="test-tenant")
DEDICATED_A = ExecutionContextSnapshot(user_id="u", tenant_id="tenant-a", tenant_group_id="group-a")
HYBRID_B = ExecutionContextSnapshot(user_id="u", tenant_id="tenant-b", tenant_group_id="group-b")


def visible(
    mode: IsolationMode, owner: str | None, group: str | None, snapshot: ExecutionContextSnapshot
) -> bool:
    return is_instance_visible(mode, owner, group, snapshot, TENANTS.resolve(snapshot.tenant_id))


def test_shared_runtime_is_visible_to_shared_and_default_tenants() -> None:
    assert visible(IsolationMode.SHARED, None, None, SHARED_TENANT)
    assert visible(
        IsolationMode.SHARED, None, None, ExecutionContextSnapshot(user_id="u", tenant_id="default")
    )


def test_shared_runtime_is_visible_to_a_hybrid_tenant_with_fallback_enabled() -> None:
    assert TENANTS.resolve("tenant-b").allow_shared_fallback
    assert visible(IsolationMode.SHARED, None, None, HYBRID_B)


def test_shared_runtime_is_not_visible_to_a_dedicated_tenant_with_fallback_disabled() -> None:
    assert not TENANTS.resolve("tenant-a").allow_shared_fallback
    assert not visible(IsolationMode.SHARED, None, None, DEDICATED_A)


def test_dedicated_runtime_is_visible_only_to_its_tenant_or_group() -> None:
    assert visible(IsolationMode.DEDICATED, "tenant-a", None, DEDICATED_A)
    assert visible(IsolationMode.DEDICATED, None, "group-a", DEDICATED_A)
    assert not visible(IsolationMode.DEDICATED, "tenant-a", "group-a", HYBRID_B)
    assert not visible(IsolationMode.DEDICATED, "tenant-a", "group-a", SHARED_TENANT)


def test_hybrid_runtime_is_visible_only_to_its_tenant_or_group() -> None:
    assert visible(IsolationMode.HYBRID, "tenant-b", None, HYBRID_B)
    assert visible(IsolationMode.HYBRID, None, "group-b", HYBRID_B)
    assert not visible(IsolationMode.HYBRID, "tenant-b", "group-b", DEDICATED_A)
    assert not visible(IsolationMode.HYBRID, "tenant-b", "group-b", SHARED_TENANT)


def test_unowned_hybrid_runtime_is_never_visible_even_with_shared_fallback() -> None:
    assert TENANTS.resolve(HYBRID_B.tenant_id).allow_shared_fallback
    for snapshot in (HYBRID_B, DEDICATED_A, SHARED_TENANT):
        assert not visible(IsolationMode.HYBRID, None, None, snapshot)


def test_example_tenant_settings_match_the_seed() -> None:
    a, b, default = TENANTS.resolve("tenant-a"), TENANTS.resolve("tenant-b"), TENANTS.resolve("unknown")
    assert (a.isolation_mode, a.prefer_dedicated_capacity, a.allow_shared_fallback) == (
        IsolationMode.DEDICATED,
        True,
        False,
    )
    assert (a.max_runtime_instances, a.runtime_instance_id_prefix) == (3, "tenant-a-runtime")
    assert (a.worker_count_per_instance, a.max_concurrent_runs_per_instance, a.local_queue_capacity) == (
        10,
        5,
        500,
    )
    assert (b.isolation_mode, b.prefer_dedicated_capacity, b.allow_shared_fallback) == (
        IsolationMode.HYBRID,
        True,
        True,
    )
    assert (b.max_runtime_instances, b.runtime_instance_id_prefix) == (2, "tenant-b-runtime")
    assert (b.worker_count_per_instance, b.max_concurrent_runs_per_instance, b.local_queue_capacity) == (
        5,
        3,
        250,
    )
    assert (default.isolation_mode, default.prefer_dedicated_capacity, default.allow_shared_fallback) == (
        IsolationMode.SHARED,
        False,
        True,
    )
    assert (default.max_runtime_instances, default.runtime_instance_id_prefix) == (1, "runtime-instance")
    assert (default.worker_count_per_instance, default.max_concurrent_runs_per_instance) == (10, 3)
    assert default.tenant_id == "unknown"
