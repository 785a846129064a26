"""Built-in step executors, invoked directly with StepInvocation objects (no engine, no Redis)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from runtime_core.policy import RetryEngine
from runtime_core.steps import (
    EMBEDDED_RELATIONAL_KEYS,
    ExecutorRegistry,
    StepConfigError,
    StepFailure,
    StepInvocation,
    StepParked,
    check_step_config,
    default_executor_registry,
)
from tests.loopback import closed_port, serving


def invocation(
    step_key: str,
    step_name: str,
    *,
    config: dict[str, Any] | None = None,
    inputs: dict[str, Any] | None = None,
    attempt: int = 0,
    human_input: dict[str, Any] | None = None,
) -> StepInvocation:
    return StepInvocation(
        execution_id="exec_test",
        pipeline_name="builtin-steps",
        pipeline_version="1",
        step_name=step_name,
        step_key=step_key,
        config=config or {},
        inputs=inputs or {},
        state={},
        attempt=attempt,
        human_input=human_input,
    )


async def run(registry: ExecutorRegistry, step: StepInvocation) -> Any:
    executor = registry.get(step.step_key)
    assert executor is not None, f"{step.step_key} is not registered"
    return await executor.execute(step)


async def fail(registry: ExecutorRegistry, step: StepInvocation) -> StepFailure:
    with pytest.raises(StepFailure) as failure:
        await run(registry, step)
    return failure.value


def retrieval(step_name: str, operation: str, inputs: dict[str, Any], provider_key: str) -> StepInvocation:
    config = {"operation": operation, "provider": "relational", "providerKey": provider_key}
    return invocation("rag.retrieval", step_name, config=config, inputs=inputs)


def candidate_step(candidate_id: str) -> StepInvocation:
    return retrieval("candidate", "candidate.byId", {"candidateId": candidate_id}, "default")


def job_step(job_id: str) -> StepInvocation:
    return retrieval("job", "job.byId", {"jobId": job_id}, "sqlite")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("steps-data")


@pytest.fixture(scope="module")
def registry(data_dir: Path) -> ExecutorRegistry:
    return default_executor_registry(data_dir)


# Registry


def test_default_registry_registers_every_builtin_step_key(registry: ExecutorRegistry) -> None:
    assert registry.keys() == [
        "ai.prompt",
        "decision.score",
        "human.approval",
        "mcp.tool",
        "rag.compose",
        "rag.merge",
        "rag.retrieval",
        "test.flaky",
        "test.noop",
        "test.wait_for_file",
        "tool.http",
    ]


# rag.retrieval


async def test_retrieval_candidate_by_id_returns_seeded_row(registry: ExecutorRegistry) -> None:
    result = await run(registry, candidate_step("c-1"))
    assert result == {
        "data": {
            "id": "c-1",
            "location": "Remote",
            "name": "Ada Lovelace",
            "skills": ["python", "redis", "sql", "distributed-systems"],
            "title": "Senior Python Engineer",
            "yearsExperience": 8,
        },
        "operation": "candidate.byId",
        "provider": "relational",
        "providerKey": "default",
    }


async def test_retrieval_job_by_id_returns_seeded_row(registry: ExecutorRegistry) -> None:
    result = await run(registry, job_step("j-1"))
    assert result["data"] == {
        "department": "Platform",
        "id": "j-1",
        "location": "Remote",
        "minYears": 5,
        "requiredSkills": ["python", "redis", "sql"],
        "title": "Backend Engineer (Python)",
    }


async def test_retrieval_seed_holds_five_candidates_and_three_jobs(registry: ExecutorRegistry) -> None:
    candidates = [await run(registry, candidate_step(f"c-{n}")) for n in range(1, 6)]
    jobs = [await run(registry, job_step(f"j-{n}")) for n in range(1, 4)]
    assert [c["data"]["id"] for c in candidates] == ["c-1", "c-2", "c-3", "c-4", "c-5"]
    assert [j["data"]["id"] for j in jobs] == ["j-1", "j-2", "j-3"]


async def test_retrieval_unknown_id_fails_not_found(registry: ExecutorRegistry) -> None:
    failure = await fail(registry, candidate_step("c-404"))
    assert failure.code == "not_found"


async def test_retrieval_unknown_id_is_not_retried_while_a_transient_failure_is(
    registry: ExecutorRegistry,
) -> None:
    retry = {"retry": {"maxRetries": 3}}  # no policies: the engine's default classification
    missing = await fail(registry, candidate_step("c-404"))
    flaky = await fail(registry, invocation("test.flaky", "flaky", config={"failTimes": 1}))
    assert RetryEngine().decide(retry, missing.code, 0, "s").retry is False
    assert RetryEngine().decide(retry, flaky.code, 0, "s").retry is True


async def test_retrieval_unknown_operation_fails_permanent(registry: ExecutorRegistry) -> None:
    failure = await fail(registry, retrieval("x", "candidate.search", {"candidateId": "c-1"}, "default"))
    assert failure.code == "permanent"


async def test_retrieval_missing_id_input_fails_permanent(registry: ExecutorRegistry) -> None:
    failure = await fail(registry, retrieval("candidate", "candidate.byId", {}, "default"))
    assert failure.code == "permanent"


async def test_retrieval_unregistered_provider_key_fails_permanent(registry: ExecutorRegistry) -> None:
    failure = await fail(registry, retrieval("candidate", "candidate.byId", {"candidateId": "c-1"}, "oracle"))
    assert failure.code == "permanent"


async def test_retrieval_embedded_provider_keys_share_one_source(registry: ExecutorRegistry) -> None:
    results = [
        await run(registry, retrieval("job", "job.byId", {"jobId": "j-2"}, key))
        for key in EMBEDDED_RELATIONAL_KEYS
    ]
    assert all(result["data"] == results[0]["data"] for result in results)


def test_retrieval_database_is_created_in_data_dir(registry: ExecutorRegistry, data_dir: Path) -> None:
    assert (data_dir / "retrieval.sqlite3").is_file()


async def test_registry_without_data_dir_seeds_a_temporary_database() -> None:
    result = await run(default_executor_registry(), candidate_step("c-3"))
    assert result["data"]["name"] == "Alan Turing"


# rag.merge and rag.compose


def merge_step(inputs: dict[str, Any]) -> StepInvocation:
    return invocation("rag.merge", "merge", config={"sourceSteps": ["candidate", "job"]}, inputs=inputs)


def compose_step(merged: dict[str, Any]) -> StepInvocation:
    config = {"sourceStep": "merge", "composer": "deterministic"}
    return invocation("rag.compose", "compose", config=config, inputs={"merge": merged})


async def test_merge_keys_each_source_step_by_name(registry: ExecutorRegistry) -> None:
    candidate, job = await run(registry, candidate_step("c-2")), await run(registry, job_step("j-1"))
    result = await run(registry, merge_step({"candidate": candidate, "job": job}))
    assert result == {
        "data": {"candidate": candidate["data"], "job": job["data"]},
        "sources": ["candidate", "job"],
    }


async def test_merge_output_is_identical_for_reordered_inputs(registry: ExecutorRegistry) -> None:
    candidate = {"data": {"id": "c-9", "skills": ["go"], "name": "Zed"}}
    reordered_candidate = {"data": {"name": "Zed", "skills": ["go"], "id": "c-9"}}
    job = {"data": {"title": "SRE", "id": "j-9"}}
    first = await run(registry, merge_step({"candidate": candidate, "job": job}))
    second = await run(registry, merge_step({"job": job, "candidate": reordered_candidate}))
    assert json.dumps(first) == json.dumps(second)


async def test_merge_missing_source_step_fails_permanent(registry: ExecutorRegistry) -> None:
    failure = await fail(registry, merge_step({"candidate": {"data": {}}}))
    assert failure.code == "permanent"


async def test_compose_output_is_identical_for_reordered_inputs(registry: ExecutorRegistry) -> None:
    first = await run(
        registry, compose_step({"data": {"job": {"id": "j-1", "a": 1}, "candidate": {"id": "c"}}})
    )
    second = await run(
        registry, compose_step({"data": {"candidate": {"id": "c"}, "job": {"a": 1, "id": "j-1"}}})
    )
    assert json.dumps(first) == json.dumps(second)


async def test_compose_renders_sorted_sections_as_text_context(registry: ExecutorRegistry) -> None:
    merged = {"data": {"job": {"title": "SRE", "minYears": 6}, "candidate": {"skills": ["go", "redis"]}}}
    result = await run(registry, compose_step(merged))
    assert result["data"]["context"] == "## candidate\nskills: go, redis\n\n## job\nminYears: 6\ntitle: SRE"
    assert result["data"]["sections"] == ["candidate", "job"]
    assert result["data"]["structured"] == merged["data"]


async def test_compose_unknown_composer_fails_permanent(registry: ExecutorRegistry) -> None:
    step = invocation(
        "rag.compose", "compose", config={"sourceStep": "m", "composer": "llm"}, inputs={"m": {}}
    )
    failure = await fail(registry, step)
    assert failure.code == "permanent"


async def test_rag_pipeline_result_is_identical_whichever_retrieval_finishes_first(
    registry: ExecutorRegistry,
) -> None:
    async def pipeline(reverse: bool) -> str:
        candidate, job = await run(registry, candidate_step("c-1")), await run(registry, job_step("j-1"))
        sources = (
            [("job", job), ("candidate", candidate)] if reverse else [("candidate", candidate), ("job", job)]
        )
        merged = await run(registry, merge_step(dict(sources)))
        return json.dumps(await run(registry, compose_step(merged)))

    assert await pipeline(reverse=False) == await pipeline(reverse=True)


# decision.score


def score_step(inputs: dict[str, Any], config: dict[str, Any] | None = None) -> StepInvocation:
    return invocation("decision.score", "score", config=config, inputs=inputs)


async def test_score_advances_candidate_matching_every_requirement(registry: ExecutorRegistry) -> None:
    candidate, job = await run(registry, candidate_step("c-1")), await run(registry, job_step("j-1"))
    result = await run(registry, score_step({"candidate": candidate, "job": job}))
    assert result["data"]["score"] == 1.0
    assert result["data"]["decision"] == "advance"
    assert result["data"]["reasons"][0] == "matched skills: python, redis, sql"


async def test_score_rejects_candidate_without_required_skills(registry: ExecutorRegistry) -> None:
    candidate, job = await run(registry, candidate_step("c-4")), await run(registry, job_step("j-1"))
    result = await run(registry, score_step({"candidate": candidate, "job": job}))
    assert result["data"]["score"] == 0.12
    assert result["data"]["decision"] == "reject"
    assert result["data"]["reasons"][1] == "missing skills: python, redis, sql"


async def test_score_reads_candidate_and_job_from_a_merge_result(registry: ExecutorRegistry) -> None:
    candidate, job = await run(registry, candidate_step("c-2")), await run(registry, job_step("j-1"))
    merged = await run(registry, merge_step({"candidate": candidate, "job": job}))
    direct = await run(registry, score_step({"candidate": candidate, "job": job}))
    assert await run(registry, score_step({"merged": merged})) == direct


async def test_score_threshold_is_configurable(registry: ExecutorRegistry) -> None:
    candidate, job = await run(registry, candidate_step("c-2")), await run(registry, job_step("j-1"))
    inputs = {"candidate": candidate, "job": job}
    lenient = await run(registry, score_step(inputs, {"threshold": 0.5}))
    strict = await run(registry, score_step(inputs, {"threshold": 0.9}))
    assert lenient["data"]["score"] == strict["data"]["score"] == 0.7667
    assert (lenient["data"]["decision"], strict["data"]["decision"]) == ("advance", "reject")


async def test_score_input_names_are_configurable(registry: ExecutorRegistry) -> None:
    candidate, job = await run(registry, candidate_step("c-3")), await run(registry, job_step("j-2"))
    config = {"candidateInput": "applicant", "jobInput": "opening"}
    renamed = await run(registry, score_step({"applicant": candidate, "opening": job}, config))
    assert renamed == await run(registry, score_step({"candidate": candidate, "job": job}))


async def test_score_without_candidate_and_job_fails_permanent(registry: ExecutorRegistry) -> None:
    failure = await fail(registry, score_step({"other": {"data": {}}}))
    assert failure.code == "permanent"


# ai.prompt


def prompt_step(template: str, inputs: dict[str, Any]) -> StepInvocation:
    return invocation("ai.prompt", "summarize", config={"template": template, "model": "m1"}, inputs=inputs)


async def test_prompt_renders_template_from_inputs_deterministically(registry: ExecutorRegistry) -> None:
    inputs = {"candidate": {"data": {"name": "Ada", "years": 8}}, "job": "Backend"}
    template = "Summarize {candidate.name} ({candidate.years}y) for {job} {{json}}"
    first = await run(registry, prompt_step(template, inputs))
    second = await run(registry, prompt_step(template, dict(reversed(inputs.items()))))
    assert first["data"]["prompt"] == "Summarize Ada (8y) for Backend {json}"
    assert first["data"]["text"].startswith("[m1 ")
    assert json.dumps(first) == json.dumps(second)


async def test_prompt_with_unresolved_placeholder_fails_permanent(registry: ExecutorRegistry) -> None:
    failure = await fail(registry, prompt_step("Hello {missing}", {}))
    assert failure.code == "permanent"


async def test_prompt_with_unregistered_provider_fails_permanent(registry: ExecutorRegistry) -> None:
    step = invocation("ai.prompt", "p", config={"template": "x", "provider": "openai"})
    failure = await fail(registry, step)
    assert failure.code == "permanent"


# test.noop, test.flaky and test.wait_for_file


async def test_noop_returns_its_step_name(registry: ExecutorRegistry) -> None:
    assert await run(registry, invocation("test.noop", "fan-7")) == {"data": {"step": "fan-7"}}


async def test_noop_with_wait_ms_answers_the_same_after_waiting_at_least_that_long(
    registry: ExecutorRegistry,
) -> None:
    started = time.monotonic()
    result = await run(registry, invocation("test.noop", "peer-call", config={"waitMs": 30}))
    assert result == {"data": {"step": "peer-call"}}
    assert time.monotonic() - started >= 0.03


async def test_noop_with_a_negative_wait_fails_permanent_naming_the_field(registry: ExecutorRegistry) -> None:
    failure = await fail(registry, invocation("test.noop", "n", config={"waitMs": -1}))
    assert failure.code == "permanent" and "waitMs" in str(failure)


def test_noop_configs_check_wait_ms_and_take_any_other_key(registry: ExecutorRegistry) -> None:
    check_step_config(registry, "test.noop", {"provider": "openai", "waitMs": 5}, "Step 'n' (test.noop)")
    with pytest.raises(StepConfigError, match="waitMs"):
        check_step_config(registry, "test.noop", {"waitMs": -1}, "Step 'n' (test.noop)")


async def test_flaky_fails_transient_until_fail_times_then_succeeds(registry: ExecutorRegistry) -> None:
    codes = []
    for attempt in range(2):
        codes.append(
            (
                await fail(registry, invocation("test.flaky", "f", config={"failTimes": 2}, attempt=attempt))
            ).code
        )
    result = await run(registry, invocation("test.flaky", "f", config={"failTimes": 2}, attempt=2))
    assert codes == ["transient", "transient"]
    assert result == {"data": {"failTimes": 2, "step": "f"}}


async def test_wait_for_file_returns_its_step_name_once_the_configured_file_appears(
    registry: ExecutorRegistry, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    waiting = asyncio.create_task(
        run(registry, invocation("test.wait_for_file", "hold", config={"path": str(gate)}))
    )
    gate.touch()
    assert await asyncio.wait_for(waiting, timeout=5) == {"data": {"step": "hold"}}


async def test_wait_for_file_reads_the_path_from_the_state_field_named_by_path_from_state(
    registry: ExecutorRegistry, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    gate.touch()
    step = invocation("test.wait_for_file", "hold", config={"pathFromState": "gate"})
    result = await run(registry, step.model_copy(update={"state": {"gate": str(gate)}}))
    assert result == {"data": {"step": "hold"}}


async def test_wait_for_file_without_a_path_fails_permanent(registry: ExecutorRegistry) -> None:
    failure = await fail(registry, invocation("test.wait_for_file", "hold", config={"pathFromState": "gate"}))
    assert failure.code == "permanent" and "pathFromState" in failure.message


# human.approval


async def test_human_approval_parks_without_input_then_completes_with_it(registry: ExecutorRegistry) -> None:
    config = {"waitingKey": "approval:pricing", "prompt": "Approve the price?"}
    with pytest.raises(StepParked) as parked:
        await run(registry, invocation("human.approval", "human-approval", config=config))
    answer = {"approved": True, "comment": "Approved by operator"}
    step = invocation("human.approval", "human-approval", config=config, human_input=answer)
    result = await run(registry, step)
    assert (parked.value.waiting_key, parked.value.prompt) == ("approval:pricing", "Approve the price?")
    assert result == {"data": {"approved": True, "input": answer}}


async def test_human_approval_waiting_key_defaults_to_step_name(registry: ExecutorRegistry) -> None:
    with pytest.raises(StepParked) as parked:
        await run(registry, invocation("human.approval", "sign-off"))
    assert parked.value.waiting_key == "sign-off"


# tool.http against a real uvicorn server


async def _echo_query(request: Request) -> JSONResponse:
    return JSONResponse({"query": dict(request.query_params)})


async def _echo_body(request: Request) -> JSONResponse:
    return JSONResponse({"received": await request.json()})


async def _unavailable(request: Request) -> PlainTextResponse:
    return PlainTextResponse("try later", status_code=503)


async def _locked(request: Request) -> Response:
    return Response(status_code=request.path_params["status"])  # no body at all


def _http_app(release_slow: asyncio.Event) -> Starlette:
    async def slow(request: Request) -> PlainTextResponse:
        await release_slow.wait()
        return PlainTextResponse("late")

    return Starlette(
        routes=[
            Route("/echo", _echo_query, methods=["GET"]),
            Route("/echo", _echo_body, methods=["POST"]),
            Route("/unavailable", _unavailable),
            Route("/slow", slow),
            Route("/locked/{status:int}", _locked),
        ]
    )


@pytest.fixture(scope="module")
async def http_base_url() -> AsyncIterator[str]:
    release_slow = asyncio.Event()
    async with serving(_http_app(release_slow)) as base_url:
        yield base_url
        release_slow.set()


def http_step(method: str, url: str, inputs: dict[str, Any] | None = None, **config: Any) -> StepInvocation:
    return invocation("tool.http", "call", config={"method": method, "url": url, **config}, inputs=inputs)


async def test_http_200_json_response_becomes_data(registry: ExecutorRegistry, http_base_url: str) -> None:
    result = await run(registry, http_step("POST", f"{http_base_url}/echo", {"b": [1, 2], "a": "x"}))
    assert result["data"] == {"received": {"a": "x", "b": [1, 2]}}
    assert result["status"] == 200


async def test_http_get_sends_inputs_as_query(registry: ExecutorRegistry, http_base_url: str) -> None:
    result = await run(registry, http_step("GET", f"{http_base_url}/echo", {"candidateId": "c-1"}))
    assert result["data"] == {"query": {"candidateId": "c-1"}}


async def test_http_503_fails_transient(registry: ExecutorRegistry, http_base_url: str) -> None:
    failure = await fail(registry, http_step("GET", f"{http_base_url}/unavailable"))
    assert failure.code == "transient"


async def test_http_404_fails_permanent(registry: ExecutorRegistry, http_base_url: str) -> None:
    failure = await fail(registry, http_step("GET", f"{http_base_url}/missing"))
    assert failure.code == "permanent"


@pytest.mark.parametrize(
    ("status", "code", "words"),
    [(401, "unauthenticated", "authentication failed"), (403, "permission_denied", "authorization failed")],
)
async def test_http_401_and_403_are_refused_credentials_naming_the_header_not_its_value(
    registry: ExecutorRegistry, http_base_url: str, status: int, code: str, words: str
) -> None:
    step = http_step("GET", f"{http_base_url}/locked/{status}", headers={"Authorization": "Bearer s3cr3t"})
    failure = await fail(registry, step)
    assert failure.code == code and words in failure.message
    assert "the step's config.headers (Authorization)" in failure.message
    assert "s3cr3t" not in failure.message
    assert registry.default_retry("tool.http") is not None  # and never retried by it
    assert RetryEngine().decide({"retry": registry.default_retry("tool.http")}, code, 0, "s").retry is False


async def test_http_slow_response_fails_timeout(registry: ExecutorRegistry, http_base_url: str) -> None:
    failure = await fail(registry, http_step("GET", f"{http_base_url}/slow", timeoutSeconds=0.2))
    assert failure.code == "timeout"


async def test_http_refused_connection_fails_transient(registry: ExecutorRegistry) -> None:
    failure = await fail(registry, http_step("GET", f"http://127.0.0.1:{closed_port()}/"))
    assert failure.code == "transient"


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.org/x", "/relative/path"])
async def test_http_non_http_url_fails_permanent(registry: ExecutorRegistry, url: str) -> None:
    failure = await fail(registry, http_step("GET", url))
    assert failure.code == "permanent"
