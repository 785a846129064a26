"""How a pump plans one round of claims across queue partitions (`PartitionTurns.plan`): the
oldest known runs of all partitions together, each partition's claim bounded by the oldest
run the plan leaves to the others."""

from __future__ import annotations

from runtime_core.queueing import ClaimTurn, PartitionTurns


def view(
    pending: dict[int, list[int]], *, depth: int = 16, in_flight: frozenset[int] = frozenset()
) -> PartitionTurns:
    turns = PartitionTurns()
    turns.read(pending, set(in_flight), depth)
    return turns


def test_runs_interleaved_across_partitions_are_claimed_together_each_bounded_by_what_others_keep() -> None:
    turns = view({0: [1, 4, 7], 1: [2, 5, 8], 2: [3, 6, 9]})
    assert turns.plan(5) == [ClaimTurn(0, 2, 6), ClaimTurn(1, 2, 6), ClaimTurn(2, 1, 7)]


def test_a_partition_known_only_in_part_limits_the_plan_to_its_last_known_run() -> None:
    # Partition 0's runs after 3 are unknown (the view read 2 of them): they may be older than 5.
    turns = view({0: [2, 3], 1: [1, 5]}, depth=2)
    assert turns.plan(4) == [ClaimTurn(0, 3, 5), ClaimTurn(1, 1, 4)]


def test_a_partition_fully_planned_bounds_nobody_unless_its_next_runs_are_unknown() -> None:
    assert view({0: [1], 1: [2, 3]}).plan(3) == [ClaimTurn(0, 1, None), ClaimTurn(1, 2, None)]
    assert view({0: [1], 1: [2, 3]}, depth=1).plan(1) == [ClaimTurn(0, 1, 2)]


def test_claims_in_flight_alone_are_visited_once_nothing_else_is_pending() -> None:
    turns = view({0: [], 1: [5]}, in_flight=frozenset({0}))
    assert turns.plan(4) == [ClaimTurn(1, 1, None)]
    turns.exhausted(1)
    assert turns.plan(4) == [ClaimTurn(0, 4, None)] and turns.none_pending
    turns.exhausted(0)
    assert turns.plan(4) == []


def test_an_unbounded_plan_takes_the_same_runs_without_bounds() -> None:
    turns = view({0: [1, 4], 1: [2, 5]})
    assert turns.plan(2, bounded=False) == [ClaimTurn(0, 1, None), ClaimTurn(1, 1, None)]
