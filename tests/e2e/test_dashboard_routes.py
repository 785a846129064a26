"""Issue 16.3, the dashboard's routes over real HTTP: a served control plane (real subprocess,
real redis-server), runs submitted through real MCP sessions. Sign-in and cookies, CSRF,
RBAC exactly as the tools (a viewer sees, an operator acts), tenant scoping, the SSE stream,
security headers and the vendored static files."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from runtime_core.hot_state import EmbeddedRedis, find_free_port
from tests.e2e.dashboard_support import (
    TOKENS,
    UNKNOWN_RUN,
    call,
    csrf_token,
    dashboard_environment,
    login_nonce,
    mcp_session,
    served_dashboard,
    sign_in,
    waiting_approval_run,
    write_config,
)
from tests.e2e.mcp_support import child_process, serve_command, wait_for_health
from tests.helpers import wait_until

ACTIONS = ("cancel", "pause", "resume", "input")


@pytest.fixture(scope="module")
def base_url(redis_server: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served_dashboard(redis_server.url, tmp_path_factory.mktemp("dashboard-routes")) as url:
        yield url


@pytest.fixture
async def parked_run(base_url: str) -> AsyncIterator[dict[str, Any]]:
    """An acme run waiting for human approval; cancelled afterwards so no test leaves one parked."""
    run = await waiting_approval_run(base_url)
    yield run
    async with mcp_session(base_url, "acme-operator") as acme:
        await acme.call_tool("cancel", {"run_id": run["shared_run_id"]})


async def _status(base_url: str, run_id: str) -> dict[str, Any]:
    async with mcp_session(base_url, "acme-operator") as acme:
        return await call(acme, "run.status", {"run_id": run_id})


def _session_cookie_header(response: httpx.Response) -> str:
    headers = [
        value for value in response.headers.get_list("set-cookie") if value.startswith("mcprt_session=")
    ]
    assert len(headers) == 1, response.headers
    return headers[0]


def test_unauthenticated_requests_go_to_the_login_page_and_do_nothing(base_url: str) -> None:
    for path in ("/ui/runs", "/ui/runs/srun_x?tab=1", "/ui/capacity"):
        answer = httpx.get(base_url + path, follow_redirects=False)
        assert answer.status_code == 303
        assert answer.headers["location"] == "/ui/login?next=" + quote(path, safe="")
    assert httpx.get(f"{base_url}/ui/events/runs/srun_x").status_code == 401
    action = httpx.post(f"{base_url}/ui/runs/srun_x/cancel", data={"csrf": "x"}, follow_redirects=False)
    assert (action.status_code, action.headers["location"]) == (303, "/ui/login")


def test_login_sets_an_httponly_samesite_session_cookie_that_is_not_the_token(base_url: str) -> None:
    with httpx.Client(base_url=base_url, follow_redirects=False) as client:
        nonce = login_nonce(client.get("/ui/login?next=/ui/capacity").text)
        token = TOKENS["acme-operator"]
        answer = client.post("/ui/login", data={"token": token, "nonce": nonce, "next": "/ui/capacity"})
        header = _session_cookie_header(answer)
        page = client.get("/ui/capacity")
    attributes = {part.strip().split("=")[0].lower(): part.strip() for part in header.split(";")}
    value = header.split(";")[0].split("=", 1)[1]
    assert (answer.status_code, answer.headers["location"]) == (303, "/ui/capacity")
    assert "httponly" in attributes and attributes["samesite"].lower() == "samesite=strict"
    assert attributes["path"] == "Path=/ui" and "max-age" in attributes
    assert token not in header and len(value) >= 40  # a random id, never the token
    assert page.status_code == 200 and "Signed in as <strong>otto</strong>" in page.text


def test_a_wrong_token_or_a_forged_login_form_opens_no_session(base_url: str) -> None:
    with httpx.Client(base_url=base_url, follow_redirects=False) as client:
        nonce = login_nonce(client.get("/ui/login").text)
        wrong = client.post("/ui/login", data={"token": "not-a-token", "nonce": nonce})
    with httpx.Client(base_url=base_url, follow_redirects=False) as forger:  # never saw the form
        forged = forger.post("/ui/login", data={"token": TOKENS["acme-operator"], "nonce": "guessed"})
    assert wrong.status_code == 401 and "not configured for any principal" in wrong.text
    assert forged.status_code == 403 and "[csrf_refused]" in forged.text
    for answer in (wrong, forged):
        assert not any(c.startswith("mcprt_session=") for c in answer.headers.get_list("set-cookie"))
        assert "not-a-token" not in answer.text and TOKENS["acme-operator"] not in answer.text


def test_logout_ends_the_session_server_side_and_clears_the_cookie(base_url: str) -> None:
    with sign_in(base_url, "acme-operator") as client, sign_in(base_url, "acme-operator") as other:
        old_cookie = client.cookies.get("mcprt_session")
        refused = other.post("/ui/logout", data={"csrf": "forged"})
        answer = client.post("/ui/logout", data={"csrf": csrf_token(client.get("/ui/runs").text)})
        still_in = other.get("/ui/runs")
    replayed = httpx.get(f"{base_url}/ui/runs", cookies={"mcprt_session": old_cookie}, follow_redirects=False)
    assert (answer.status_code, answer.headers["location"]) == (303, "/ui/login")
    assert "Max-Age=0" in _session_cookie_header(answer)
    assert replayed.status_code == 303 and replayed.headers["location"].startswith("/ui/login")
    assert refused.status_code == 403 and still_in.status_code == 200  # a forged logout ends nothing


async def test_actions_without_the_session_csrf_token_are_refused_and_change_nothing(
    base_url: str, parked_run: dict[str, Any]
) -> None:
    run_id = parked_run["shared_run_id"]
    with sign_in(base_url, "acme-operator") as client:
        refusals = [client.post(f"/ui/runs/{run_id}/cancel", data=data) for data in ({}, {"csrf": "forged"})]
    assert all(r.status_code == 403 and "[csrf_refused]" in r.text for r in refusals)
    after = await _status(base_url, run_id)
    assert (after["shared_status"], after["control_status"]) == ("Dispatched", "WaitingForInput")


async def test_a_viewer_sees_the_run_but_no_action_and_its_posts_are_refused(
    base_url: str, parked_run: dict[str, Any]
) -> None:
    run_id = parked_run["shared_run_id"]
    with sign_in(base_url, "acme-viewer") as viewer, sign_in(base_url, "acme-operator") as operator:
        seen = viewer.get(f"/ui/runs/{run_id}")
        csrf = csrf_token(seen.text)
        posts = {
            action: viewer.post(f"/ui/runs/{run_id}/{action}", data={"csrf": csrf}) for action in ACTIONS
        }
        offered = operator.get(f"/ui/runs/{run_id}").text
    assert seen.status_code == 200 and 'data-step="approval" data-status="WaitingForInput"' in seen.text
    assert "can view this run but not act on it" in seen.text
    assert not re.search(r'action="/ui/runs/[^"]+/(cancel|pause|resume|input)"', seen.text)
    for action, permission in zip(
        ACTIONS, ("run:cancel", "run:control", "run:control", "run:input"), strict=True
    ):
        assert posts[action].status_code == 403
        assert (
            f"[permission_denied] permission denied: role(s) [viewer] in tenant 'acme' lack '{permission}'"
            in (posts[action].text.replace("&#39;", "'"))
        )
    for action in ("cancel", "input"):  # waiting for input: no pause (the control service refuses it)
        assert f'action="/ui/runs/{run_id}/{action}"' in offered
    assert f'action="/ui/runs/{run_id}/pause"' not in offered
    after = await _status(base_url, run_id)
    assert (after["shared_status"], after["control_status"]) == ("Dispatched", "WaitingForInput")


async def test_another_tenants_run_answers_exactly_like_an_unknown_run(
    base_url: str, parked_run: dict[str, Any]
) -> None:
    with sign_in(base_url, "globex-operator") as globex:
        unknown = globex.get(f"/ui/runs/{UNKNOWN_RUN}")
        for run_id in (parked_run["shared_run_id"], parked_run["local_run_id"], parked_run["execution_id"]):
            foreign = globex.get(f"/ui/runs/{run_id}")
            assert foreign.status_code == unknown.status_code == 404
            assert foreign.text.replace(run_id, "<id>") == unknown.text.replace(UNKNOWN_RUN, "<id>")
        cancel = globex.post(
            f"/ui/runs/{parked_run['shared_run_id']}/cancel", data={"csrf": csrf_token(unknown.text)}
        )
        notice = globex.get(cancel.headers["location"])
        stream = globex.get(f"/ui/events/runs/{parked_run['shared_run_id']}")
    assert "[not_found] Run" in unknown.text
    assert notice.status_code == 404  # the action's redirect lands on the same not-found page
    assert "event: failed" in stream.text and "[not_found]" in stream.text
    after = await _status(base_url, parked_run["shared_run_id"])
    assert after["control_status"] == "WaitingForInput"


async def _events(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """(event, data) pairs of a server-sent event stream."""
    event, data = "message", []
    async for line in response.aiter_lines():
        if line.startswith("event:"):
            event = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data.append(line.removeprefix("data:").strip())
        elif line == "" and data:
            yield event, "\n".join(data)
            event, data = "message", []


async def test_the_run_stream_sends_each_status_change_until_the_run_is_done(base_url: str) -> None:
    run = await waiting_approval_run(base_url)
    run_id = run["shared_run_id"]
    with sign_in(base_url, "acme-operator") as signed_in:
        cookies = dict(signed_in.cookies)
    states: list[dict[str, Any]] = []
    async with (
        httpx.AsyncClient(base_url=base_url, cookies=cookies, timeout=30) as client,
        client.stream("GET", f"/ui/events/runs/{run_id}") as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        events = _events(response)
        event, data = await anext(events)
        states.append(json.loads(data))
        async with mcp_session(base_url, "acme-operator") as acme:
            answer = {"approved": True, "comment": "from the stream test"}
            await call(
                acme,
                "input.submit",
                {"execution_id": run["execution_id"], "waiting_key": run["waiting_key"], "payload": answer},
            )
        states += [json.loads(data) async for event, data in events if event == "status"]
    steps = [{step["name"]: step["status"] for step in state["steps"]} for state in states]
    assert event == "status" and steps[0]["approval"] == "WaitingForInput" and not states[0]["done"]
    assert (
        states[-1]["done"]
        and states[-1]["status"] == "Completed"
        and states[-1]["status_text"] == "✓ Completed"
    )
    assert set(steps[-1].values()) == {"Completed"}
    assert all(a != b for a, b in itertools.pairwise(states))  # only changes are sent


async def test_runs_list_filters_by_status_pipeline_and_user_within_the_tenant(base_url: str) -> None:
    parked = (await waiting_approval_run(base_url))["shared_run_id"]
    async with mcp_session(base_url, "acme-operator") as acme:
        done = (await call(acme, "submit", {"pipeline": "flaky-retry", "mode": "DirectDispatch"}))[
            "shared_run_id"
        ]

        async def finished() -> bool:
            return bool((await call(acme, "run.status", {"run_id": done}))["done"])

        await wait_until(finished, timeout=30, interval=0.05)
    with sign_in(base_url, "acme-viewer") as viewer, sign_in(base_url, "globex-operator") as globex:
        completed = viewer.get("/ui/runs", params={"status": "Completed"}).text
        wanted = {"status": "WaitingForInput", "pipeline": "human-approval"}
        waiting = viewer.get("/ui/runs", params=wanted).text
        by_otto = viewer.get("/ui/runs", params={"submitted_by": "otto"}).text
        by_nobody = viewer.get("/ui/runs", params={"submitted_by": "nobody"}).text
        foreign = globex.get("/ui/runs").text
        invalid = viewer.get("/ui/runs", params={"limit": "100000"})
        newest = viewer.get("/ui/runs", params={"limit": "1"}).text
        older_link = re.search(r'<a href="(/ui/runs\?[^"]+)" rel="next">Older runs \u203a</a>', newest)
        assert older_link is not None
        older = viewer.get(older_link.group(1).replace("&amp;", "&")).text
        newer_link = re.search(r'<a href="(/ui/runs\?[^"]+)" rel="prev">\u2039 Newer runs</a>', older)
        assert newer_link is not None
        back = viewer.get(newer_link.group(1).replace("&amp;", "&")).text
    assert done in completed and parked not in completed
    assert parked in waiting and done not in waiting
    assert done in by_otto and parked in by_otto and "No runs match these filters." in by_nobody
    assert done not in foreign and parked not in foreign
    assert invalid.status_code == 400 and "[invalid_arguments] limit" in invalid.text
    shown = [re.findall(r'<tr data-run="([^"]+)"', html) for html in (newest, older, back)]
    assert shown[0] == [done] and len(shown[1]) == 1 and shown[1] != shown[0]  # cursor pages, newest first
    assert shown[2] == shown[0]  # and back to the newer page
    async with mcp_session(base_url, "acme-operator") as acme:
        await acme.call_tool("cancel", {"run_id": parked})


def test_pages_carry_security_headers_and_load_only_vendored_files(base_url: str) -> None:
    with sign_in(base_url, "acme-operator") as client:
        page = client.get("/ui/runs")
        assets = re.findall(r'(?:src|href)="([^"#]+)"', page.text)
        files = {path: client.get(path) for path in assets if path.startswith("/ui/static/")}
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert page.headers["x-frame-options"] == "DENY" and page.headers["cache-control"] == "no-store"
    assert {"/ui/static/dashboard.js", "/ui/static/dashboard.css", "/ui/static/run_view.css"} <= set(files)
    assert all(path.startswith(("/ui/", "data:")) for path in assets)  # nothing from another origin
    for path, answer in files.items():
        assert answer.status_code == 200, path
        assert not re.search(r"https?://", answer.text), path  # no CDN, no remote fetch


def test_capacity_shows_a_tenants_operator_its_capacity_without_other_tenants_activity(base_url: str) -> None:
    with sign_in(base_url, "acme-operator") as operator, sign_in(base_url, "acme-viewer") as viewer:
        as_operator = operator.get("/ui/capacity").text.replace("&#39;", "'")
        as_viewer = viewer.get("/ui/capacity").text.replace("&#39;", "'")
    assert "<code>rt_" in as_operator and "Queue depth:" in as_operator
    assert "permission" not in as_operator  # capacity:read: every role has it
    assert "not shown (shared)" in as_operator  # the embedded instance is shared capacity
    assert "<code>rt_" in as_viewer and "Queue depth:" in as_viewer  # what a viewer may see, no error box
    assert 'class="error"' not in as_viewer


def _hold_pipeline(release: Path) -> dict[str, Any]:
    """A run whose first step runs until the file `release` exists."""
    return {
        "name": "hold-then-finish",
        "steps": [
            {"name": "hold", "stepKey": "test.wait_for_file", "config": {"path": str(release)}},
            {"name": "after", "stepKey": "test.noop", "dependsOn": ["hold"]},
        ],
    }


def _notice(client: httpx.Client, path: str) -> str:
    found = re.search(r'<p class="notice" role="status">([^<]*)</p>', client.get(path).text)
    assert found is not None
    return found.group(1).replace("&#39;", "'")


async def test_operator_pauses_resumes_and_cancels_a_running_run_like_the_tools(
    base_url: str, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    async with mcp_session(base_url, "acme-operator") as acme:
        submit = {"definition": _hold_pipeline(release), "mode": "DirectDispatch"}
        run_id = (await call(acme, "submit", submit))["shared_run_id"]

        async def holding() -> bool:
            steps = (await call(acme, "run.status", {"run_id": run_id}))["steps"]
            return any(step["name"] == "hold" and step["status"] == "Running" for step in steps)

        await wait_until(holding, timeout=30, interval=0.05)
        notices = {}
        with sign_in(base_url, "acme-operator") as operator:
            for action in ("pause", "resume", "cancel"):
                page_html = operator.get(f"/ui/runs/{run_id}").text
                assert f'action="/ui/runs/{run_id}/{action}"' in page_html, action  # offered in this state
                answer = operator.post(f"/ui/runs/{run_id}/{action}", data={"csrf": csrf_token(page_html)})
                assert (answer.status_code, answer.headers["location"]) == (303, f"/ui/runs/{run_id}")
                notices[action] = _notice(operator, answer.headers["location"])
            again = operator.get(f"/ui/runs/{run_id}").text
        release.write_text("go", encoding="utf-8")

        async def done() -> bool:
            return bool((await call(acme, "run.status", {"run_id": run_id}))["done"])

        await wait_until(done, timeout=30, interval=0.05)
        final = await call(acme, "run.status", {"run_id": run_id})
    assert notices["pause"] == "Pause requested: control status Pausing."
    assert notices["resume"].startswith("Resume requested: control status ")
    assert "cancel" in notices["cancel"].lower()
    assert '<p class="notice"' not in again  # a notice is shown once
    assert final["execution_status"] == "Cancelled"


async def test_a_stopping_server_ends_its_open_live_streams(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    port = find_free_port()
    base_url = f"http://127.0.0.1:{port}"
    command = serve_command(
        "http", tmp_path, "--port", str(port), "--config", str(write_config(tmp_path / "s.json"))
    )
    log = tmp_path / "server.log"
    with child_process(command, env=dashboard_environment(redis_server.url), log=log) as server:
        wait_for_health(server, base_url, log)
        run = await waiting_approval_run(base_url)
        with sign_in(base_url, "acme-operator") as signed_in:
            cookies = dict(signed_in.cookies)
        async with (
            httpx.AsyncClient(base_url=base_url, cookies=cookies, timeout=30) as client,
            client.stream("GET", f"/ui/events/runs/{run['shared_run_id']}") as response,
        ):
            events = _events(response)
            first, _ = await anext(events)
            server.terminate()
            rest = await asyncio.wait_for(_drain(events), timeout=15)  # the stream ends, it is not cut
        assert server.wait(timeout=15) == -signal.SIGTERM
    assert first == "status" and all(event != "failed" for event in rest)
    assert "runtime services closed; exiting on SIGTERM" in log.read_text(encoding="utf-8")


async def _drain(events: AsyncIterator[tuple[str, str]]) -> list[str]:
    return [event async for event, _ in events]
