"""Streamed output through a real `mcp-runtime serve` process: an `ai.prompt` with `stream: true` against
the loopback LLM server (OpenAI and Anthropic wire formats, Server-Sent Events, a slow model).
The MCP client that submitted with a progress callback receives the partial text in progress
notifications before the step completes (the client's receive times against the step's
completion in the ledger), `run.status` shows the partial text while the step runs, and the
final result equals the one the same prompt gives unstreamed; a working task's status message
and the dashboard's live run stream carry the growing text too.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse
from mcp import Client
from playwright.async_api import Browser, expect

from mcp_runtime import hash_token
from mcp_runtime.tasks import TaskHandle, TasksClientExtension, get_task
from runtime_core.hot_state import EmbeddedRedis
from tests.agent_support import API_KEY, KEY_ENV, LoopbackLlm, llm_settings
from tests.e2e.conftest import LAPTOP
from tests.e2e.dashboard_support import login_nonce
from tests.e2e.mcp_support import BearerClient, clean_environment, served_http
from tests.helpers import wait_until
from tests.loopback import serving

TOKEN = "acme-streamer-" + secrets.token_hex(8)
STORY = (
    "Once upon a time a workflow runtime kept every model turn as a checkpoint, so that no crash "
    "could make it pay twice for the same words. Its operators watched the words arrive one by one."
)


@pytest.fixture(scope="module")
async def llm() -> AsyncIterator[tuple[Any, str]]:
    """The loopback model and its base URL."""
    model = LoopbackLlm([{"text": STORY}], piece_delay_s=0.02)  # ~50 pieces: about a second
    async with serving(model.app) as base_url:
        yield model, base_url


@pytest.fixture(scope="module")
def server(
    llm: tuple[Any, str], redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    model = llm[1]
    data_dir, files = tmp_path_factory.mktemp("stream-data"), tmp_path_factory.mktemp("stream-files")
    config = files / "server.json"
    principal = {
        "user_id": "sam",
        "tenant_id": "acme",
        "roles": ["operator"],
        "token_sha256": [hash_token(TOKEN)],
    }
    config.write_text(json.dumps({"principals": {"acme-streamer": principal}}), encoding="utf-8")
    providers = files / "providers.json"
    providers.write_text(json.dumps({"llm": llm_settings(model)}), encoding="utf-8")
    env = clean_environment(
        REDIS_URL=redis_server.url,
        MCP_RUNTIME_UI_RUN_POLL_MS="100",
        MCP_RUNTIME_REDIS_PREFIX=f"stream{secrets.token_hex(4)}:",
        **{KEY_ENV: API_KEY},
    )
    with served_http(config, data_dir, env, "--providers-file", str(providers)) as base_url:
        yield f"{base_url}/mcp"


def prompt(provider: str, stream: bool, tag: str | None = None) -> dict[str, Any]:
    step = {
        "name": "tell",
        "stepKey": "ai.prompt",
        "config": {"template": "Tell the story ({tag})", "provider": provider, "stream": stream},
        "input": {"tag": "state.tag"},
    }
    definition = {"name": f"story-{provider}", "steps": [step]}
    return {"definition": definition, "input": {"tag": tag or secrets.token_hex(4)}, "mode": "DirectDispatch"}


async def ignore(done: float, total: float | None, message: str | None) -> None:
    return None


async def call(client: Client, tool: str, arguments: dict[str, Any], **options: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments, **options)
    assert not result.is_error and result.structured_content is not None, result.content
    return result.structured_content


@pytest.mark.parametrize("provider", ["gpt", "claude"])
async def test_the_submitting_client_reads_the_partial_text_before_the_step_completes(
    server: str, provider: str
) -> None:
    reports: list[tuple[float, str]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        reports.append((time.time(), message or ""))

    async with BearerClient(server, TOKEN) as client:
        tag = secrets.token_hex(4)
        answer = await call(client, "submit", prompt(provider, True, tag), progress_callback=progress)
        run = answer["run"]
        assert run["execution_status"] == "Completed"
        ledger = await call(client, "ledger", {"run_id": answer["shared_run_id"]})
        unstreamed = await call(client, "submit", prompt(provider, False, tag), progress_callback=ignore)
    [completed] = [
        e for e in ledger["entries"] if e["event"] == "step.completed" and e["step_name"] == "tell"
    ]
    completed_at = datetime.fromisoformat(completed["recorded_at"]).timestamp()
    partial = [(at, message.split(" | tell: ", 1)[1]) for at, message in reports if " | tell: " in message]
    assert partial, reports
    assert partial[0][0] < completed_at  # partial text reached the client before the step completed
    streamed_text = "".join(text for at, text in partial if at < completed_at)
    assert streamed_text and STORY.startswith(streamed_text)
    assert run["result"]["data"]["text"] == STORY
    assert run["result"]["data"] == unstreamed["run"]["result"]["data"]
    assert {k: v for k, v in run["result"].items() if k != "data"} == {
        k: v for k, v in unstreamed["run"]["result"].items() if k != "data"
    }


async def test_run_status_shows_the_partial_text_while_the_step_runs(server: str) -> None:
    async with BearerClient(server, TOKEN) as client:
        submitted = await call(client, "submit", prompt("gpt", True))
        seen: list[str] = []
        deadline = time.monotonic() + 60
        while True:  # each read is a round trip to the server: the run advances meanwhile
            status = await call(client, "run.status", {"run_id": submitted["shared_run_id"]})
            row = status["steps"][0] if status["steps"] else {}
            if row.get("output"):
                seen.append(row["output"])
            if status["done"] or time.monotonic() > deadline:
                break
        assert status["done"] and status["result"]["data"]["text"] == STORY
    assert seen and all(STORY.startswith(text) for text in seen)
    assert status["steps"][0].get("output") is None  # kept only while the step runs


async def test_a_task_status_message_carries_the_text_written_so_far(server: str) -> None:
    async with BearerClient(server, TOKEN, extensions=[TasksClientExtension()]) as client:
        handle = await client.session.call_tool("submit", prompt("claude", True), allow_claimed=True)
        assert isinstance(handle, TaskHandle), handle
        messages: list[str] = []
        deadline = time.monotonic() + 60
        while True:  # each tasks/get is a round trip to the server: the run advances meanwhile
            task = await get_task(client.session, handle.task_id)
            if task["status"] != "working" or time.monotonic() > deadline:
                break
            messages.append(task["statusMessage"])
    assert task["status"] == "completed"
    partial = [message.split("so far: ...", 1)[1] for message in messages if "so far: ..." in message]
    assert partial and all(STORY.startswith(text) for text in partial)


async def test_the_dashboard_run_stream_sends_the_streamed_text_as_it_grows(server: str) -> None:
    async with BearerClient(server, TOKEN) as client:
        run_id = (await call(client, "submit", prompt("gpt", True)))["shared_run_id"]
    async with httpx.AsyncClient(base_url=server.removesuffix("/mcp"), timeout=60) as ui:
        nonce = login_nonce((await ui.get("/ui/login")).text)
        signed_in = await ui.post("/ui/login", data={"token": TOKEN, "nonce": nonce, "next": "/ui/runs"})
        assert signed_in.status_code == 303, signed_in.text
        lengths: list[int] = []
        async with aconnect_sse(ui, "GET", f"/ui/events/runs/{run_id}") as source:
            async for event in source.aiter_sse():
                if event.event != "status":
                    continue
                state = json.loads(event.data)
                lengths += [length for _, _, length in state["conversation"] if length and not state["done"]]
                if state["done"]:
                    break
    assert lengths and lengths == sorted(lengths)  # the live view saw the text grow while it ran


PAUSED_AFTER = 12  # streamed events: the role, then 4 characters each
PAGE_WAIT_MS = 30_000  # the run goes on meanwhile: a loaded machine may take seconds


async def test_the_run_page_in_chromium_shows_the_text_written_so_far_then_the_result(
    server: str, llm: tuple[Any, str], browser: Browser
) -> None:
    """The run page open before the model answers: no conversation yet; with the model caught
    mid-answer, the conversation shows exactly what it wrote so far; once it finishes, the run
    reads Completed, the conversation is gone and the whole text is the result. All on the one
    page, refreshed from the live stream (never reloaded), without a script error."""
    model, base = llm[0], server.removesuffix("/mcp")
    page = await (await browser.new_context(viewport=LAPTOP, base_url=base)).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await page.goto("/ui/login?next=%2Fui%2Fruns")
    await page.get_by_label("Access token").fill(TOKEN)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page).to_have_url(f"{base}/ui/runs")
    model.hold(0)
    model.pause_streams(after=PAUSED_AFTER)
    try:
        async with BearerClient(server, TOKEN) as client:
            run_id = (await call(client, "submit", prompt("gpt", True)))["shared_run_id"]
        await wait_until(lambda: _asked(model), timeout=30)
        await page.goto(f"/ui/runs/{run_id}")
        await page.evaluate("window.loadedOnce = true")
        await expect(page.locator("#conversation")).to_be_hidden()
        model.release(0)
        live = page.locator("#conversation .turn-live .turn-text")
        # the role event, then pieces of 4 characters
        await expect(live).to_have_text(STORY[: (PAUSED_AFTER - 1) * 4], timeout=PAGE_WAIT_MS)
    finally:
        model.release(0)
        model.resume_streams()
    status = page.locator("#run-status")
    await expect(status).to_have_attribute("data-status", "Completed", timeout=PAGE_WAIT_MS)
    await expect(page.locator("#conversation")).to_be_hidden()
    await expect(page.locator("#data")).to_contain_text(STORY[:60])
    assert await page.evaluate("window.loadedOnce === true")
    assert errors == []


async def _asked(model: Any) -> bool:
    """The model holds a request (the step is running, nothing written yet)."""
    return 0 in model.waiting
