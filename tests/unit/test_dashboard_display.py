"""What the dashboard shows, unit by unit (issue 29.1): durations and times people read, secrets
taken out of every value, one status per run and step (Not run after the end), the runs list's
rows, counts and pages, and the run page's ledger and step pages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from mcp_runtime.dashboard._run_page import ledger_page, readable, run_links, steps_on_page
from mcp_runtime.dashboard._runs_view import failure_text, page_links, row_view, status_counts
from mcp_runtime.run_view import (
    REDACTED,
    Redactor,
    build_run_graph,
    duration_text,
    exact_text,
    relative_text,
    shown,
)
from runtime_core.control_plane import RunStatusView, StepRow
from runtime_core.lifecycle import RunListPage, RunListRow, RunStatusCounts
from runtime_core.pipeline import parse_pipeline
from runtime_core.storage import LedgerEntry

T0 = datetime(2026, 12, 4, 21, 15, 3, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0123, "12 ms"),
        (0.85, "850 ms"),
        (4.25, "4.2 s"),
        (42, "42 s"),
        (184, "3 min 4 s"),
        (180, "3 min"),
        (2 * 3600 + 5 * 60 + 9, "2 h 5 min"),
        (3 * 86400 + 4 * 3600, "3 d 4 h"),
        (None, "-"),
    ],
)
def test_durations_read_in_the_two_largest_units_that_matter(seconds: float | None, text: str) -> None:
    assert duration_text(seconds) == text


def test_times_read_relative_with_the_exact_utc_time_beside() -> None:
    assert relative_text(T0, T0 + timedelta(seconds=2)) == "just now"
    assert relative_text(T0, T0 + timedelta(minutes=3, seconds=40)) == "3 min ago"
    assert relative_text(T0, T0 + timedelta(hours=5)) == "5 h ago"
    assert relative_text(T0 + timedelta(seconds=30), T0) == "in 30 s"
    assert exact_text(T0) == "2026-12-04 21:15:03 UTC"
    assert exact_text(T0 + timedelta(milliseconds=123), milliseconds=True) == "2026-12-04 21:15:03.123 UTC"


# Secrets never shown


def test_a_field_named_like_a_credential_is_redacted_whatever_its_value_but_counts_stay() -> None:
    value = {
        "apiKey": "anything at all",
        "headers": {"Authorization": "Basic Zm9vOmJhcg==", "X-Api-Key": "k", "Accept": "text/plain"},
        "client_secret": {"nested": "structure"},
        "accessToken": "t",
        "db_password": "p",
        "usage": {"inputTokens": 11, "outputTokens": 7},
        "waitingKey": "hire-approval",
        "providerKey": "default",
        "approved": True,
    }
    clean = Redactor().value(value)
    assert (
        clean["apiKey"] == clean["client_secret"] == clean["accessToken"] == clean["db_password"] == REDACTED
    )
    assert clean["headers"] == {"Authorization": REDACTED, "X-Api-Key": REDACTED, "Accept": "text/plain"}
    assert clean["usage"] == {"inputTokens": 11, "outputTokens": 7}
    assert (clean["waitingKey"], clean["providerKey"], clean["approved"]) == (
        "hire-approval",
        "default",
        True,
    )


@pytest.mark.parametrize(
    ("text", "kept", "gone"),
    [
        ("Authorization: Bearer abc.def-ghi_123", "Authorization: Bearer [redacted]", "abc.def-ghi_123"),
        ("key sk-ant-api03-0123456789abcdef here", "key [redacted] here", "0123456789abcdef"),
        ("jwt eyJhbGciOiJI.eyJzdWIiOiIx.c2lnbmF0dXJl", "jwt [redacted]", "eyJzdWIiOiIx"),
        ("ghp_0123456789abcdefghijABCDEFGHIJ", "[redacted]", "ghp_0123"),
        ("AKIAABCDEFGHIJKLMNOP used", "[redacted] used", "AKIAABCD"),
        ("postgresql://reader:hunter22@db/hr", "postgresql://[redacted]@db/hr", "hunter22"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----", "[redacted]", "MIIB"),
    ],
)
def test_credentials_inside_any_text_are_redacted(text: str, kept: str, gone: str) -> None:
    assert Redactor().text(text) == kept
    assert gone not in Redactor().value({"echo": [text]})["echo"][0]


def test_the_values_of_the_servers_secret_variables_are_redacted_wherever_they_appear() -> None:
    env = {
        "OPENAI_API_KEY": "sk-live-value-0001",
        "MY_PROVIDER_VAR": "provider-secret-0002",
        "HR_DB_PASSWORD": "hunter2-long-pass",
        "SHORT_TOKEN": "abc",  # too short to be told apart from ordinary words
        "HOME": "/root/home-directory",
    }
    redactor = Redactor.from_environment(env, secret_variables=["MY_PROVIDER_VAR"])
    echoed = (
        "key sk-live-value-0001 and provider-secret-0002 and hunter2-long-pass; abc in /root/home-directory"
    )
    assert (
        redactor.text(echoed) == "key [redacted] and [redacted] and [redacted]; abc in /root/home-directory"
    )


def test_a_shown_value_is_capped_and_counts_what_it_leaves_out() -> None:
    value = {"items": list(range(2_000))}
    capped = shown(value, Redactor(), 1_000)
    assert len(capped.text) == 1_000 and capped.omitted_chars == capped.total_chars - 1_000 > 0
    assert "first 1,000 shown" in capped.summary and capped.preview.endswith("…")
    assert shown("plain text", Redactor(), 100).text == "plain text"


# One status per run and per step


def _run(**fields: object) -> RunStatusView:
    return RunStatusView.model_validate(
        {"requested_id": "srun_1", "tenant_id": "t", "shared_run_id": "srun_1", **fields}
    )


PIPELINE = parse_pipeline(
    {
        "name": "p",
        "steps": [
            {"name": "a", "stepKey": "test.noop"},
            {"name": "b", "stepKey": "test.noop", "dependsOn": ["a"]},
            {"name": "c", "stepKey": "test.noop", "dependsOn": ["b"]},
        ],
    }
)


def _rows(*statuses: str) -> list[StepRow]:
    return [
        StepRow(name=name, step_key="test.noop", status=status, retry_count=0, recovery_count=0)
        for name, status in zip("abc", statuses, strict=False)
    ]


def test_after_the_run_ended_the_steps_that_never_ran_read_not_run_not_pending() -> None:
    ended = _run(
        shared_status="Dispatched",
        local_status="Failed",
        execution_status="Failed",
        steps=_rows("Failed", "Pending"),
    )
    running = _run(
        shared_status="Dispatched",
        local_status="Running",
        execution_status="Running",
        steps=_rows("Completed", "Running"),
    )
    assert [node.status for node in build_run_graph(ended, PIPELINE).nodes] == ["Failed", "NotRun", "NotRun"]
    assert [node.status for node in build_run_graph(running, PIPELINE).nodes] == [
        "Completed",
        "Running",
        "Pending",
    ]
    assert [node.layer for node in build_run_graph(running, PIPELINE).nodes] == [0, 1, 2]


def test_a_running_run_parked_on_its_gate_or_paused_shows_that_as_its_status() -> None:
    fields = {"shared_status": "Dispatched", "local_status": "Running", "execution_status": "Running"}
    assert (
        build_run_graph(_run(**fields, control_status="WaitingForInput"), PIPELINE).status
        == "WaitingForInput"
    )
    assert build_run_graph(_run(**fields, control_status="Paused"), PIPELINE).status == "Paused"
    assert build_run_graph(_run(**fields, control_status="Pausing"), PIPELINE).status == "Running"


# The runs list


def _row(**fields: object) -> RunListRow:
    base = {
        "shared_run_id": "srun_1",
        "pipeline": "p",
        "submitted_by": "u",
        "submit_mode": "QueueFirst",
        "submitted_at": T0,
        "shared_status": "Dispatched",
        "status": "Running",
        "archived": False,
    }
    return RunListRow.model_validate({**base, **fields})


def test_a_row_shows_the_shared_status_only_where_it_explains_something() -> None:
    redactor = Redactor()
    assert row_view(_row(), redactor).shared_note is None
    assert row_view(_row(status="Completed"), redactor).shared_note is None
    assert (
        row_view(_row(shared_status="QueuedGlobally", status="Running"), redactor).shared_note
        == "queued again"
    )
    assert row_view(_row(shared_status="Cancelled", status="Cancelled"), redactor).shared_note is None


def test_a_row_says_how_long_a_run_took_or_since_when_it_runs_or_waits() -> None:
    redactor = Redactor()
    ended = row_view(_row(started_at=T0, ended_at=T0 + timedelta(seconds=184)), redactor)
    running = row_view(_row(started_at=T0 + timedelta(seconds=1)), redactor)
    queued = row_view(_row(shared_status="QueuedGlobally", status="QueuedGlobally"), redactor)
    assert (ended.timing, ended.timing_since) == ("3 min 4 s", None)
    assert (running.timing, running.timing_since) == ("so far", T0 + timedelta(seconds=1))
    assert (queued.timing, queued.timing_since) == ("queued for", T0)


def test_the_failing_step_is_named_once_and_its_error_redacted() -> None:
    reason = "step 'call' (tool.http) failed: [unauthenticated] GET https://u:pw@api/x answered 401"
    assert (
        failure_text(reason, "call", Redactor())
        == "[unauthenticated] GET https://[redacted]@api/x answered 401"
    )
    assert failure_text("execution finished Failed", None, Redactor()) == "execution finished Failed"


def test_counts_link_to_the_list_filtered_by_status_and_keep_the_other_filters() -> None:
    counts = RunStatusCounts(counts={"Failed": 2, "Completed": 5, "Weird": 1})
    links = status_counts(counts, {"pipeline": "rag", "cursor": "abc"}, "Failed")
    assert [(c.status, c.count, c.current) for c in links] == [
        (None, 8, False),
        ("Failed", 2, True),
        ("Completed", 5, False),
        ("Weird", 1, False),
    ]
    assert links[1].url == "/ui/runs?pipeline=rag&status=Failed"  # a new filter starts at the newest page
    assert links[0].url == "/ui/runs?pipeline=rag"


def test_page_links_go_both_ways_and_back_to_the_newest() -> None:
    first = page_links(RunListPage(tenant_id="t", runs=[], next_cursor="old"), {"status": "Failed"})
    middle = page_links(
        RunListPage(tenant_id="t", runs=[], next_cursor="old", prev_cursor="new"),
        {"cursor": "x", "limit": "5"},
    )
    assert first == {"newest": None, "newer": None, "older": "/ui/runs?status=Failed&cursor=old"}
    assert middle == {
        "newest": "/ui/runs?limit=5",
        "newer": "/ui/runs?limit=5&prev_cursor=new",
        "older": "/ui/runs?cursor=old&limit=5",
    }


# The run page's ledger and steps


def _entry(event: str, **attributes: object) -> LedgerEntry:
    return LedgerEntry(
        tenant_id="t", event=event, attributes=attributes, runtime_instance_id="rt_1", recorded_at=T0
    )


def test_the_ledger_says_constant_attributes_once_times_as_dates_and_values_as_json() -> None:
    entries = [
        _entry("step.claimed", workers=4, worker_id="w0"),
        _entry(
            "step.failed", workers=4, worker_id="w1", next_retry_at_ms=1_800_000_000_000, error={"a": [1]}
        ),
        _entry("execution.finalized", workers=4, status="Failed"),
    ]
    page = ledger_page(entries, Redactor(), {})
    assert page.constants == [("workers", "4")] and page.instance == "rt_1"
    failed = dict(page.lines[1].details)
    assert failed["next_retry_at_ms"] == "2027-01-15 08:00:00.000 UTC"
    assert failed["error"] == '{"a": [1]}' and "workers" not in failed
    assert readable("next_retry_at_ms", 0, Redactor()) == "none"
    assert readable("authorization", "Bearer abcdefghijk", Redactor()) == REDACTED


def test_links_name_the_run_this_one_is_run_again_of_and_the_runs_made_of_it() -> None:
    entries = [
        _entry("shared_run.submitted", **{"retry.of": "srun_old"}),
        _entry("shared_run.retried", **{"retry.run_id": "srun_new"}),
        _entry("shared_run.retried", **{"retry.run_id": "srun_new"}),
    ]
    links = run_links(entries)
    assert (links.run_again_of, links.run_again_as) == ("srun_old", ["srun_new"])


def test_a_large_run_lists_its_steps_a_page_at_a_time_filtered_by_status() -> None:
    steps = [{"name": f"s{n:04d}", "stepKey": "test.noop"} for n in range(250)]
    pipeline = parse_pipeline({"name": "wide", "steps": steps})
    rows = [
        StepRow(
            name=f"s{n:04d}",
            step_key="test.noop",
            status="Failed" if n == 7 else "Completed",
            retry_count=0,
            recovery_count=0,
        )
        for n in range(250)
    ]
    graph = build_run_graph(
        _run(shared_status="Dispatched", local_status="Failed", execution_status="Failed", steps=rows),
        pipeline,
    )
    first, paging, _ = steps_on_page(graph, {})
    last, last_paging, _ = steps_on_page(graph, {"steps_page": "3"})
    failed, _, status = steps_on_page(graph, {"steps_status": "Failed"})
    assert (len(first), paging.pages, paging.total, paging.prev_url) == (100, 3, 250, None)
    assert paging.next_url == "?steps_page=2#steps"
    assert (len(last), last_paging.next_url) == (50, None)
    assert [node.name for node in failed] == ["s0007"] and status == "Failed"
