"""Units of the run view and the dashboard that need no runtime: the layered DAG layout, status
styles, the timeline and step histories, the human-input form, sessions and safe redirects."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest

from mcp_runtime.dashboard import SessionStore
from mcp_runtime.dashboard._input_form import InvalidFormError, form_fields, payload_from_form
from mcp_runtime.dashboard._security import safe_next
from mcp_runtime.run_view import (
    STATUS_STYLES,
    GraphStep,
    build_run_graph,
    build_timeline,
    layered_layout,
    status_style,
    step_histories,
)
from runtime_core.control_plane import RunStatusView, StepRow
from runtime_core.pipeline import parse_pipeline
from runtime_core.steps import HumanApprovalExecutor
from runtime_core.storage import LedgerEntry, TraceSpan
from runtime_core.tasks import InputRequest

APPROVAL = HumanApprovalExecutor.input_schema
DIAMOND = [
    GraphStep("fetch"),
    GraphStep("left", ("fetch",)),
    GraphStep("right", ("fetch",)),
    GraphStep("join", ("left", "right")),
    GraphStep("report", ("join", "fetch")),
]


def test_each_step_sits_one_layer_right_of_its_deepest_dependency() -> None:
    layout = layered_layout(DIAMOND)
    layers = {name: box.layer for name, box in layout.nodes.items()}
    assert layers == {"fetch": 0, "left": 1, "right": 1, "join": 2, "report": 3}
    assert {(e.source, e.target) for e in layout.edges} == {
        ("fetch", "left"),
        ("fetch", "right"),
        ("left", "join"),
        ("right", "join"),
        ("join", "report"),
        ("fetch", "report"),
    }


def test_boxes_never_overlap_and_stay_inside_the_drawing() -> None:
    steps = [GraphStep("start")] + [GraphStep(f"b{i}", ("start",)) for i in range(12)]
    steps.append(GraphStep("end", tuple(f"b{i}" for i in range(12))))
    layout = layered_layout(steps)
    for a, b in itertools.combinations(layout.nodes.values(), 2):
        apart_x = a.x + a.width <= b.x or b.x + b.width <= a.x
        apart_y = a.y + a.height <= b.y or b.y + b.height <= a.y
        assert apart_x or apart_y, (a, b)
    assert all(0 <= n.x and n.x + n.width <= layout.width for n in layout.nodes.values())
    assert all(0 <= n.y and n.y + n.height <= layout.height for n in layout.nodes.values())


def test_layering_a_long_chain_needs_no_recursion() -> None:
    chain = [GraphStep("s0")] + [GraphStep(f"s{i}", (f"s{i - 1}",)) for i in range(1, 3000)]
    assert layered_layout(chain).nodes["s2999"].layer == 2999


def test_barycentre_ordering_keeps_a_chain_next_to_its_parent() -> None:
    steps = [GraphStep("a"), GraphStep("b"), GraphStep("b-child", ("b",)), GraphStep("a-child", ("a",))]
    nodes = layered_layout(steps).nodes
    assert nodes["a-child"].y < nodes["b-child"].y  # no crossing: children follow their parents' order


def test_every_known_status_has_a_text_label_besides_its_colour() -> None:
    for status, style in STATUS_STYLES.items():
        assert style.label and style.glyph and style.text.endswith(style.label), status
        assert style.css_class.startswith("tone-")
    unknown = status_style("SomethingNew")
    assert (unknown.label, unknown.tone) == ("Something new", "neutral")


def _run(*rows: StepRow, control_status: str | None = None) -> RunStatusView:
    return RunStatusView(
        requested_id="srun_x",
        tenant_id="acme",
        shared_run_id="srun_x",
        steps=list(rows),
        control_status=control_status,
    )


def test_run_graph_shows_steps_without_a_row_as_pending_and_the_parked_step_as_waiting() -> None:
    pipeline = parse_pipeline(
        {
            "name": "p",
            "steps": [
                {"name": "a", "stepKey": "test.noop"},
                {"name": "gate", "stepKey": "human.approval", "dependsOn": ["a"]},
                {"name": "after", "stepKey": "test.noop", "dependsOn": ["gate"]},
            ],
        }
    )
    run = _run(
        StepRow(name="a", step_key="test.noop", status="Completed", retry_count=1, recovery_count=0),
        StepRow(name="gate", step_key="human.approval", status="Ready", retry_count=0, recovery_count=0),
        control_status="WaitingForInput",
    )
    waiting = InputRequest(key="k", execution_id="exec_x", waiting_step="gate", prompt="ok?", input_schema={})
    graph = build_run_graph(run, pipeline, waiting)
    assert [(n.name, n.status) for n in graph.nodes] == [
        ("a", "Completed"),
        ("gate", "WaitingForInput"),
        ("after", "Pending"),
    ]
    live = graph.live_state()
    assert live["steps"][1] == {
        "name": "gate",
        "status": "WaitingForInput",
        "label": "Waiting for input",
        "text": "✎ Waiting for input",
        "css_class": "tone-attention",
        "retry_count": 0,
    }
    assert graph.layout is not None and set(graph.layout.nodes) == {"a", "gate", "after"}


def _span(
    name: str | None, start_ms: int, end_ms: int, status: str = "OK", **attributes: object
) -> TraceSpan:
    return TraceSpan(
        trace_id="1" * 32,
        span_id=f"{start_ms + 1:016x}",
        tenant_id="acme",
        execution_id="exec_x",
        step_name=name,
        name="step" if name else "execution",
        start_ns=start_ms * 1_000_000,
        end_ns=end_ms * 1_000_000,
        status=status,
        attributes=dict(attributes),
    )


def test_timeline_puts_the_run_first_then_attempts_by_start_time_scaled_to_the_chart() -> None:
    spans = [
        _span("b", 40, 100, **{"mcprt.outcome": "step.completed"}),
        _span(None, 0, 100),
        _span("a", 0, 20, "ERROR", **{"mcprt.outcome": "step.retry_scheduled"}),
        _span("a", 25, 40, **{"mcprt.outcome": "step.completed"}),
    ]
    timeline = build_timeline(spans)
    assert [r.label for r in timeline.rows] == ["execution (whole run)", "a #1", "a #2", "b #1"]
    assert [r.kind for r in timeline.rows] == ["run", "error", "ok", "ok"]
    assert timeline.total_ms == 100
    first, last = timeline.rows[0], timeline.rows[-1]
    assert last.x + last.width == pytest.approx(first.x + first.width)  # both end at the run's end
    assert timeline.ticks[-1].label == "100 ms"


def test_step_history_lists_attempts_and_the_ledger_errors_of_each_step() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    ledger = [
        LedgerEntry(tenant_id="acme", event="step.claimed", step_name="a", recorded_at=at),
        LedgerEntry(
            tenant_id="acme",
            event="step.retry_scheduled",
            step_name="a",
            attributes={"code": "transient", "error": "boom"},
            recorded_at=at,
        ),
    ]
    spans = [
        _span(
            "a", 0, 20, "ERROR", **{"mcprt.outcome": "step.retry_scheduled", "mcprt.error.code": "transient"}
        ),
        _span("a", 25, 40, **{"mcprt.outcome": "step.completed", "mcprt.worker_id": "w1"}),
    ]
    history = step_histories(ledger, spans)["a"]
    assert [(a.number, a.outcome, a.error_code) for a in history.attempts] == [
        (1, "step.retry_scheduled", "transient"),
        (2, "step.completed", None),
    ]
    assert [(e.event, e.code, e.message) for e in history.events] == [
        ("step.retry_scheduled", "transient", "boom")
    ]


def test_approval_schema_becomes_labelled_fields_and_a_typed_payload() -> None:
    fields = form_fields(APPROVAL)
    assert fields is not None and [(f.name, f.kind, f.required) for f in fields] == [
        ("approved", "boolean", True),
        ("comment", "string", False),
    ]
    payload = payload_from_form(APPROVAL, {"field_approved": "true", "field_comment": "fine"})
    assert payload == {"approved": True, "comment": "fine"}
    with pytest.raises(InvalidFormError, match="'Approve' is required"):
        payload_from_form(APPROVAL, {"field_comment": "no choice"})


def test_a_schema_without_simple_properties_is_answered_as_a_json_object() -> None:
    schema = {"type": "object", "properties": {}}
    assert form_fields(schema) is None
    assert payload_from_form(schema, {"payload_json": '{"x": [1, 2]}'}) == {"x": [1, 2]}
    with pytest.raises(InvalidFormError, match="must be a JSON object"):
        payload_from_form(schema, {"payload_json": "[1]"})


def test_sessions_expire_keep_no_raw_id_and_drop_the_oldest_beyond_the_cap() -> None:
    now = [1000.0]
    store = SessionStore(ttl_s=60, max_sessions=2, clock=lambda: now[0])
    first, _ = store.open("alice")
    second, session = store.open("bob")
    assert store.find(second) is session and session.csrf_token and session.csrf_token != second
    assert first not in repr(store._sessions) and second not in repr(store._sessions)
    store.open("carol")
    assert store.find(first) is None  # the oldest ended at the cap
    now[0] += 61
    assert store.find(second) is None  # expired
    assert store.find("not-a-session") is None and store.find(None) is None


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("/ui/runs/srun_1?x=1", "/ui/runs/srun_1?x=1"),
        ("https://evil.example/ui/", "/ui/runs"),
        ("//evil.example/ui/", "/ui/runs"),
        ("/ui/\\evil", "/ui/runs"),
        ("/mcp", "/ui/runs"),
        (None, "/ui/runs"),
    ],
)
def test_login_redirects_only_inside_the_dashboard(target: str | None, expected: str) -> None:
    assert safe_next(target) == expected
