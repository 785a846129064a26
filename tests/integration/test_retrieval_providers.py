"""`rag.retrieval` against real sources: one contract for the embedded SQLite source, PostgreSQL (a database
this module creates on 127.0.0.1:5432 and drops), an HTTP JSON API (a loopback server) and MongoDB (when
MONGODB_URI is set; reported skipped otherwise), then what is particular to each, and `rag-final-test`
end to end from PostgreSQL through the `mcp-runtime run` command."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from runtime_core.steps import RetrievalProvider, SqliteRelationalProvider, StepFailure
from runtime_core.steps.retrieval import (
    HttpJsonRetrievalProvider,
    HttpJsonSettings,
    MongoDbSettings,
    MongoRetrievalProvider,
    PostgresRetrievalProvider,
    PostgresSettings,
)
from tests.loopback import closed_port, serving

REPOSITORY = Path(__file__).resolve().parents[2]
RAG_FINAL_TEST = REPOSITORY / "examples" / "pipelines" / "rag-final-test.json"
PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=5"
API_TOKEN = f"tok-{secrets.token_hex(12)}"
TOKEN_ENV = "MCPRT_TEST_RETRIEVAL_TOKEN"
PG_PASSWORD = f"pw-{secrets.token_hex(12)}"
PASSWORD_ENV = "MCPRT_TEST_PG_PASSWORD"
INJECTIONS = ("c-1' OR '1'='1", "c-1'; DROP TABLE candidates; --", 'c-1" OR 1=1 --', "c-1/../c-2")
# A row only PostgreSQL holds: a run that returns it read PostgreSQL, not the embedded seed.
PG_ONLY = {
    "id": "c-pg",
    "name": "Barbara Liskov",
    "title": "Principal Engineer",
    "yearsExperience": 20,
    "skills": ["python", "redis", "sql"],
    "location": "Remote",
}


def seed_rows() -> dict[str, list[dict[str, Any]]]:
    """The embedded seed, read back from a seeded SQLite file: every source in the contract holds these."""
    embedded = SqliteRelationalProvider.seeded_in_temporary_directory()
    with closing(sqlite3.connect(embedded.database_path)) as connection:
        connection.row_factory = sqlite3.Row
        candidates = [dict(r) for r in connection.execute("SELECT * FROM candidates ORDER BY id")]
        jobs = [dict(r) for r in connection.execute("SELECT * FROM jobs ORDER BY id")]
    for row in candidates:
        row["skills"] = json.loads(row["skills"])
    for row in jobs:
        row["required_skills"] = json.loads(row["required_skills"])
    return {"candidates": candidates, "jobs": jobs}


SEED = seed_rows()
CANDIDATE_COLUMNS = 'id, name, title, years_experience AS "yearsExperience", skills, location'
JOB_COLUMNS = 'id, title, department, min_years AS "minYears", required_skills AS "requiredSkills", location'
PG_OPERATIONS = {
    "candidate.byId": {
        "sql": f"SELECT {CANDIDATE_COLUMNS} FROM candidates WHERE id = %(candidateId)s",
        "result": "one",
    },
    "job.byId": {"sql": f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = %(jobId)s", "result": "one"},
    "candidates.bySkill": {"sql": "SELECT id FROM candidates WHERE skills ? %(skill)s ORDER BY id"},
    "candidates.senior": {"sql": "SELECT id FROM candidates WHERE years_experience >= %(years)s ORDER BY id"},
    "candidate.delete": {"sql": "DELETE FROM candidates WHERE id = %(candidateId)s RETURNING id"},
    "slow": {"sql": "SELECT pg_sleep(%(seconds)s) AS slept"},
}


# The sources


async def _create_database(name: str) -> str:
    async with await psycopg.AsyncConnection.connect(PG_ADMIN, autocommit=True) as admin:
        await admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    conninfo = f"host=127.0.0.1 port=5432 user=postgres dbname={name}"
    async with await psycopg.AsyncConnection.connect(conninfo) as connection:
        await connection.execute(
            "CREATE TABLE candidates (id text PRIMARY KEY, name text NOT NULL, title text NOT NULL, "
            "years_experience integer NOT NULL, skills jsonb NOT NULL, location text NOT NULL)"
        )
        await connection.execute(
            "CREATE TABLE jobs (id text PRIMARY KEY, title text NOT NULL, department text NOT NULL, "
            "min_years integer NOT NULL, required_skills jsonb NOT NULL, location text NOT NULL)"
        )
        async with connection.cursor() as cursor:
            pg_only = {**PG_ONLY, "years_experience": PG_ONLY["yearsExperience"]}
            for row in [*SEED["candidates"], pg_only]:
                await cursor.execute(
                    "INSERT INTO candidates VALUES (%(id)s, %(name)s, %(title)s, %(years_experience)s, "
                    "%(skills)s, %(location)s)",
                    {**row, "skills": json.dumps(row["skills"])},
                )
            for row in SEED["jobs"]:
                await cursor.execute(
                    "INSERT INTO jobs VALUES (%(id)s, %(title)s, %(department)s, %(min_years)s, "
                    "%(required_skills)s, %(location)s)",
                    {**row, "required_skills": json.dumps(row["required_skills"])},
                )
    return conninfo


async def _drop_database(name: str) -> None:
    async with await psycopg.AsyncConnection.connect(PG_ADMIN, autocommit=True) as admin:
        await admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="module")
async def pg_conninfo() -> AsyncIterator[str]:
    """A fresh database holding the seed (plus one PostgreSQL-only candidate), dropped afterwards."""
    name = f"mcprt_test_{secrets.token_hex(4)}"
    try:
        yield await _create_database(name)
    finally:
        await _drop_database(name)


async def pg_count(conninfo: str, table: str) -> int:
    async with await psycopg.AsyncConnection.connect(conninfo) as connection:
        cursor = await connection.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)))
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


def pg_settings(conninfo: str, **overrides: Any) -> PostgresSettings:
    entry = {"kind": "postgres", "conninfo": conninfo, "operations": PG_OPERATIONS, **overrides}
    return PostgresSettings.model_validate(entry)


@dataclass
class ApiLog:
    raw_paths: list[str]
    queries: list[list[tuple[str, str]]]


def _api_app(log: ApiLog) -> Starlette:
    """A JSON API over the seed; every call needs the token header, like a real one."""
    by_id = {table: {row["id"]: row for row in rows} for table, rows in SEED.items()}

    def record(request: Request) -> JSONResponse | None:
        log.raw_paths.append(request.scope["raw_path"].decode())
        log.queries.append(list(request.query_params.multi_items()))
        if request.headers.get("x-api-key") != API_TOKEN:
            return JSONResponse({"error": "bad token"}, status_code=401)
        return None

    async def one(request: Request) -> JSONResponse:
        table = request.path_params["table"]
        row = by_id.get(table, {}).get(request.path_params["id"])
        if (refused := record(request)) is not None:
            return refused
        if row is None:
            return JSONResponse({"error": "no such id"}, status_code=404)
        return JSONResponse(_api_row(table, row))

    async def by_skill(request: Request) -> JSONResponse:
        if (refused := record(request)) is not None:
            return refused
        skill = request.query_params.get("skill")
        return JSONResponse({"items": [{"id": r["id"]} for r in SEED["candidates"] if skill in r["skills"]]})

    async def search(request: Request) -> JSONResponse:
        if (refused := record(request)) is not None:
            return refused
        skill = (await request.json()).get("skill")
        items = [{"id": r["id"]} for r in SEED["candidates"] if skill in r["skills"]]
        return JSONResponse({"data": {"items": items}})

    async def busy(request: Request) -> JSONResponse:
        record(request)
        return JSONResponse({"error": "later"}, status_code=429, headers={"Retry-After": "4"})

    return Starlette(
        routes=[
            Route("/api/candidates", by_skill),
            Route("/api/search", search, methods=["POST"]),
            Route("/api/busy", busy),
            Route("/api/{table}/{id:path}", one),
        ]
    )


def _api_row(table: str, row: dict[str, Any]) -> dict[str, Any]:
    if table == "candidates":
        return {
            "id": row["id"],
            "name": row["name"],
            "title": row["title"],
            "yearsExperience": row["years_experience"],
            "skills": row["skills"],
            "location": row["location"],
        }
    return {
        "id": row["id"],
        "title": row["title"],
        "department": row["department"],
        "minYears": row["min_years"],
        "requiredSkills": row["required_skills"],
        "location": row["location"],
    }


HTTP_OPERATIONS = {
    "candidate.byId": {"path": "/candidates/{candidateId}"},
    "job.byId": {"path": "/jobs/{jobId}"},
    "candidates.bySkill": {
        "path": "/candidates",
        "query": ["skill"],
        "result_path": "items",
        "result": "many",
    },
    "candidates.search": {
        "method": "POST",
        "path": "/search",
        "body": ["skill"],
        "result_path": "data.items",
        "result": "many",
    },
    "busy": {"path": "/busy"},
}


@pytest.fixture(scope="module")
async def api() -> AsyncIterator[tuple[str, ApiLog]]:
    log = ApiLog([], [])
    async with serving(_api_app(log)) as base_url:
        yield f"{base_url}/api", log


def http_settings(base_url: str, **overrides: Any) -> HttpJsonSettings:
    entry = {
        "kind": "http_json",
        "base_url": base_url,
        "headers_from_env": {"X-Api-Key": TOKEN_ENV},
        "read_timeout_s": 5,
        "operations": HTTP_OPERATIONS,
        **overrides,
    }
    return HttpJsonSettings.model_validate(entry)


MONGO_OPERATIONS = {
    "candidate.byId": {
        "collection": "candidates",
        "filter": {"id": {"$param": "candidateId"}},
        "projection": {"_id": 0},
        "result": "one",
    },
    "job.byId": {
        "collection": "jobs",
        "filter": {"id": {"$param": "jobId"}},
        "projection": {"_id": 0},
        "result": "one",
    },
}


async def _mongodb_provider(uri: str) -> AsyncIterator[RetrievalProvider]:
    from pymongo import AsyncMongoClient

    database = f"mcprt_retrieval_{secrets.token_hex(4)}"
    admin: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri)
    await admin[database]["candidates"].insert_many([_api_row("candidates", r) for r in SEED["candidates"]])
    await admin[database]["jobs"].insert_many([_api_row("jobs", r) for r in SEED["jobs"]])
    settings = MongoDbSettings.model_validate(
        {"kind": "mongodb", "database": database, "operations": MONGO_OPERATIONS}
    )
    provider = MongoRetrievalProvider("mongo", settings)
    try:
        yield provider
    finally:
        await provider.aclose()
        await admin.drop_database(database)
        await admin.close()


@pytest.fixture(params=["sqlite", "postgres", "http_json", "mongodb"])
async def source(
    request: pytest.FixtureRequest, pg_conninfo: str, api: tuple[str, ApiLog], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[RetrievalProvider]:
    """Each source kind holding the seed, answering `candidate.byId` and `job.byId`."""
    monkeypatch.setenv(TOKEN_ENV, API_TOKEN)
    if request.param == "sqlite":
        yield SqliteRelationalProvider.seeded_in_temporary_directory()
        return
    if request.param == "mongodb":
        uri = os.environ.get("MONGODB_URI")
        if not uri:
            pytest.skip("MONGODB_URI not set")
        async for provider in _mongodb_provider(uri):
            yield provider
        return
    opened: PostgresRetrievalProvider | HttpJsonRetrievalProvider
    if request.param == "postgres":
        opened = PostgresRetrievalProvider("pg", pg_settings(pg_conninfo))
    else:
        opened = HttpJsonRetrievalProvider("api", http_settings(api[0]))
    try:
        yield opened
    finally:
        await opened.aclose()


async def refused(provider: RetrievalProvider, operation: str, params: dict[str, Any]) -> StepFailure:
    with pytest.raises(StepFailure) as failure:
        await provider.retrieve(operation, params)
    return failure.value


# One contract for every source


async def test_every_source_answers_a_candidate_by_id_like_the_embedded_seed(
    source: RetrievalProvider,
) -> None:
    assert await source.retrieve("candidate.byId", {"candidateId": "c-1"}) == {
        "id": "c-1",
        "name": "Ada Lovelace",
        "title": "Senior Python Engineer",
        "yearsExperience": 8,
        "skills": ["python", "redis", "sql", "distributed-systems"],
        "location": "Remote",
    }


async def test_every_source_answers_a_job_by_id_like_the_embedded_seed(source: RetrievalProvider) -> None:
    job = await source.retrieve("job.byId", {"jobId": "j-3"})
    assert job == {
        "id": "j-3",
        "title": "Site Reliability Engineer",
        "department": "Infrastructure",
        "minYears": 6,
        "requiredSkills": ["kubernetes", "go", "postgres", "terraform"],
        "location": "Amsterdam",
    }


async def test_every_source_says_not_found_for_an_unknown_id(source: RetrievalProvider) -> None:
    assert (await refused(source, "candidate.byId", {"candidateId": "c-404"})).code == "not_found"


@pytest.mark.parametrize("attempt", INJECTIONS)
async def test_an_injection_attempt_through_a_bound_input_finds_nothing(
    source: RetrievalProvider, attempt: str
) -> None:
    assert (await refused(source, "candidate.byId", {"candidateId": attempt})).code == "not_found"


async def test_every_source_refuses_an_operator_document_as_an_input(source: RetrievalProvider) -> None:
    failure = await refused(source, "candidate.byId", {"candidateId": {"$ne": None}})
    assert failure.code == "permanent"


async def test_every_source_refuses_a_missing_input_and_an_unknown_operation(
    source: RetrievalProvider,
) -> None:
    assert (await refused(source, "candidate.byId", {})).code == "permanent"
    assert (await refused(source, "candidate.search", {"candidateId": "c-1"})).code == "permanent"
    assert "candidate.byId" in source.operations and "job.byId" in source.operations


# PostgreSQL


@pytest.fixture
async def pg(pg_conninfo: str) -> AsyncIterator[PostgresRetrievalProvider]:
    provider = PostgresRetrievalProvider("pg", pg_settings(pg_conninfo))
    yield provider
    await provider.aclose()


async def test_postgres_injection_attempts_change_nothing(
    pg: PostgresRetrievalProvider, pg_conninfo: str
) -> None:
    before = await pg_count(pg_conninfo, "candidates")
    for attempt in INJECTIONS:
        assert (await refused(pg, "candidate.byId", {"candidateId": attempt})).code == "not_found"
        assert await pg.retrieve("candidates.bySkill", {"skill": attempt}) == []
    assert await pg_count(pg_conninfo, "candidates") == before == len(SEED["candidates"]) + 1


async def test_postgres_many_rows_and_list_inputs(pg: PostgresRetrievalProvider) -> None:
    assert await pg.retrieve("candidates.bySkill", {"skill": "redis"}) == [
        {"id": "c-1"},
        {"id": "c-5"},
        {"id": "c-pg"},
    ]


async def test_postgres_runs_operations_read_only(pg: PostgresRetrievalProvider, pg_conninfo: str) -> None:
    failure = await refused(pg, "candidate.delete", {"candidateId": "c-1"})
    assert failure.code == "permanent" and "read-only" in failure.message
    assert await pg.retrieve("candidate.byId", {"candidateId": "c-1"})


async def test_postgres_value_of_the_wrong_type_is_permanent(pg: PostgresRetrievalProvider) -> None:
    failure = await refused(pg, "candidates.senior", {"years": "many"})
    assert failure.code == "permanent" and "InvalidTextRepresentation" in failure.message


async def test_postgres_statement_timeout_is_a_timeout(pg_conninfo: str) -> None:
    provider = PostgresRetrievalProvider("pg", pg_settings(pg_conninfo, statement_timeout_ms=100))
    try:
        assert (await refused(provider, "slow", {"seconds": 5})).code == "timeout"
    finally:
        await provider.aclose()


async def test_postgres_unreachable_is_transient_and_never_shows_the_password(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(PASSWORD_ENV, PG_PASSWORD)
    conninfo = f"host=127.0.0.1 port={closed_port()} user=postgres dbname=nowhere"
    settings = pg_settings(conninfo, password_env=PASSWORD_ENV, connect_timeout_s=1)
    provider = PostgresRetrievalProvider("pg", settings)
    try:
        failure = await refused(provider, "candidate.byId", {"candidateId": "c-1"})
    finally:
        await provider.aclose()
    assert failure.code == "transient"
    assert PG_PASSWORD not in failure.message
    assert caplog.records and not [
        r for r in caplog.records if PG_PASSWORD in f"{r.getMessage()} {r.__dict__}"
    ]


# HTTP JSON


@pytest.fixture
async def http(
    api: tuple[str, ApiLog], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[HttpJsonRetrievalProvider]:
    monkeypatch.setenv(TOKEN_ENV, API_TOKEN)
    api[1].raw_paths.clear()
    api[1].queries.clear()
    provider = HttpJsonRetrievalProvider("api", http_settings(api[0]))
    yield provider
    await provider.aclose()


async def test_http_path_values_are_url_encoded_into_one_segment(
    http: HttpJsonRetrievalProvider, api: tuple[str, ApiLog]
) -> None:
    assert (await refused(http, "candidate.byId", {"candidateId": "a/b?c=d#e f"})).code == "not_found"
    assert api[1].raw_paths == ["/api/candidates/a%2Fb%3Fc%3Dd%23e%20f"]


@pytest.mark.parametrize("segment", ["..", ".", ""])
async def test_http_dot_or_empty_path_segments_are_refused_before_sending(
    http: HttpJsonRetrievalProvider, api: tuple[str, ApiLog], segment: str
) -> None:
    assert (await refused(http, "candidate.byId", {"candidateId": segment})).code == "permanent"
    assert api[1].raw_paths == []


async def test_http_query_inputs_are_bound_parameters(
    http: HttpJsonRetrievalProvider, api: tuple[str, ApiLog]
) -> None:
    assert await http.retrieve("candidates.bySkill", {"skill": "go"}) == [{"id": "c-5"}]
    assert await http.retrieve("candidates.bySkill", {"skill": "go&skill=python"}) == []
    assert api[1].queries == [[("skill", "go")], [("skill", "go&skill=python")]]


async def test_http_post_sends_body_inputs_and_reads_the_result_path(http: HttpJsonRetrievalProvider) -> None:
    assert await http.retrieve("candidates.search", {"skill": "pytorch", "ignored": 1}) == [{"id": "c-3"}]


async def test_http_429_carries_its_retry_after(http: HttpJsonRetrievalProvider) -> None:
    failure = await refused(http, "busy", {})
    assert (failure.code, failure.retry_after_ms) == ("transient", 4000)


async def test_http_secret_header_comes_from_the_environment(
    http: HttpJsonRetrievalProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "wrong-token")
    rejected = await refused(http, "job.byId", {"jobId": "j-1"})
    assert rejected.code == "unauthenticated"
    assert f"X-Api-Key from {TOKEN_ENV}" in rejected.message and "'api'" in rejected.message
    assert "wrong-token" not in rejected.message
    monkeypatch.delenv(TOKEN_ENV)
    failure = await refused(http, "job.byId", {"jobId": "j-1"})
    assert failure.code == "permanent" and TOKEN_ENV in failure.message


# MongoDB without a server: what is decided before (or instead of) talking to one


@pytest.fixture
async def unreachable_mongo(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[MongoRetrievalProvider]:
    monkeypatch.setenv("MCPRT_TEST_MONGO_URI", f"mongodb://reader:{PG_PASSWORD}@127.0.0.1:{closed_port()}/")
    entry = {
        "kind": "mongodb",
        "uri_env": "MCPRT_TEST_MONGO_URI",
        "database": "nowhere",
        "server_selection_timeout_ms": 300,
        "operations": MONGO_OPERATIONS,
    }
    provider = MongoRetrievalProvider("mongo", MongoDbSettings.model_validate(entry))
    yield provider
    await provider.aclose()


async def test_mongodb_unreachable_is_transient_and_never_shows_the_uri_password(
    unreachable_mongo: MongoRetrievalProvider,
) -> None:
    failure = await refused(unreachable_mongo, "candidate.byId", {"candidateId": "c-1"})
    assert failure.code == "transient"
    assert PG_PASSWORD not in failure.message


async def test_mongodb_refuses_an_operator_document_input_before_querying(
    unreachable_mongo: MongoRetrievalProvider,
) -> None:
    failure = await refused(unreachable_mongo, "candidate.byId", {"candidateId": {"$ne": None}})
    assert failure.code == "permanent" and "scalar" in failure.message


# rag-final-test end to end from PostgreSQL, and offline on the embedded default


def run_cli(tmp_path: Path, state: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mcp_runtime.cli", "run", str(RAG_FINAL_TEST)]
    command += ["--input", json.dumps(state), "--data-dir", str(tmp_path / "data"), "--workers", "2", *extra]
    env = {**os.environ, "MCP_RUNTIME_PROVIDERS_FILE": ""}
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, check=False)


def final_result(stdout: str) -> dict[str, Any]:
    return json.loads(stdout.split("Final result (compose):", 1)[1])


async def test_rag_final_test_runs_end_to_end_with_retrieval_from_postgres(
    pg_conninfo: str, tmp_path: Path
) -> None:
    providers_file = tmp_path / "providers.json"
    entry = {"kind": "postgres", "conninfo": pg_conninfo, "operations": PG_OPERATIONS}
    providers_file.write_text(json.dumps({"retrieval": {"default": entry}}), encoding="utf-8")
    state = {"candidateId": "c-pg", "jobId": "j-1"}
    done = await asyncio.to_thread(run_cli, tmp_path, state, "--providers-file", str(providers_file))
    assert done.returncode == 0, done.stderr
    assert "Status: Completed" in done.stdout
    structured = final_result(done.stdout)["data"]["structured"]
    assert structured["candidate"] == PG_ONLY
    assert structured["job"]["title"] == "Backend Engineer (Python)"


async def test_rag_final_test_still_runs_offline_on_the_embedded_default(tmp_path: Path) -> None:
    done = await asyncio.to_thread(run_cli, tmp_path, {"candidateId": "c-2", "jobId": "j-2"})
    assert done.returncode == 0, done.stderr
    assert "Status: Completed" in done.stdout
    assert final_result(done.stdout)["data"]["structured"]["candidate"]["name"] == "Grace Hopper"
