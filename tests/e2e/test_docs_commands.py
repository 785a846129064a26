"""Every command the documentation shows works (issue 29.5).

Which blocks are commands: a code block fenced as ```bash in README.md or docs/**/*.md is a
runnable example. Blocks fenced as ```shell need something of the reader's that this suite does not
set up (a production Redis Cluster, their own database, a desktop MCP host, npx); ```text blocks are
output, ```json / ```python / ```yaml blocks are files.

How each runnable block is proven, by exactly one rule of RULES (matched on the block's text):
- `Run`: this test runs the block as written, as one bash script (`set -e`) from the repository root in
  the test's `.venv` environment, on the test redis-server (REDIS_URL, a key prefix of its own) with a
  scratch data directory; only the port 8765 and `/tmp/mcp-runtime-*` directories are swapped for a
  free port and scratch directories, and whatever the block left running (`serve … &`) is stopped
  afterwards. The block's exit code must be the rule's (3 for a run that ends waiting for input).
- `Covered`: a longer scenario another test runs (or the test command itself); this test checks the
  named test function exists in that file and the file contains the command's distinctive literal,
  so dropping or renaming the covering test fails here.
A runnable block that no rule matches fails with its page and text: run it here or name its test.

Besides: README.md's links into docs/ point at pages that exist; the failed-run sample of
docs/pipelines.md is what the CLI prints (ids and times aside); the step example of docs/steps.md,
written to files from the page, runs under `--steps` and completes with the result the page states;
the `mcp-runtime input` command a waiting run prints, run as printed, completes it.
"""

from __future__ import annotations

import ast
import os
import re
import secrets
import shlex
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from mcp_runtime import TOOL_PERMISSIONS
from runtime_core.hot_state import EmbeddedRedis, find_free_port
from tests.e2e.mcp_support import REPOSITORY, clean_environment

PAGES = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```", re.S | re.M)
BLOCK_TIMEOUT_S = 180


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    text: str

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(REPOSITORY)}:{self.line}"


def blocks(lang: str, pages: list[Path] = PAGES) -> list[Block]:
    found = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            if match.group("lang") == lang:
                body = "\n".join(
                    line.removeprefix(match.group("indent")) for line in match["body"].splitlines()
                )
                found.append(Block(page, text.count("\n", 0, match.start()) + 1, lang, body))
    return found


@dataclass(frozen=True)
class Run:
    exit_code: int = 0


@dataclass(frozen=True)
class Covered:
    path: str
    test: str | None  # a test function in `path`; None when `path` is a script (the test command)
    literal: str


SELF = "tests/e2e/test_docs_commands.py"
RULES: list[tuple[str, Run | tuple[Covered, ...]]] = [
    (
        r"^bash scripts/main\.sh$",
        (
            Covered("scripts/main.sh", None, "examples/clients/stdio_client.py"),
            Covered(
                "tests/e2e/test_mcp_stdio.py",
                "test_stdio_example_client_runs_the_rag_pipeline_to_completion",
                "stdio_client.py",
            ),
        ),
    ),
    (r"^bash scripts/test\.sh$", (Covered(".ci/run", None, "scripts/test.sh"),)),
    (r"^bash scripts/ensure-deps\.sh$", (Covered("scripts/test.sh", None, "scripts/ensure-deps.sh"),)),
    (
        r"^uv pip install -e examples/step-plugin$",
        (Covered("scripts/test.sh", None, "-e examples/step-plugin"),),
    ),
    (
        r"^python -m benchmarks --size tiny$",
        (
            Covered(
                "tests/integration/test_benchmarks_smoke.py",
                "test_benchmarks_run_at_tiny_size_and_write_json",
                "tiny",
            ),
        ),
    ),
    (
        r"^python examples/clients/stdio_client\.py --data-dir",
        (
            Covered(
                "tests/e2e/test_mcp_stdio.py",
                "test_stdio_example_client_runs_the_rag_pipeline_to_completion",
                '"--data-dir"',
            ),
        ),
    ),
    (
        r"# 1\. a Redis with the durability|runtime-instance --transport grpc",
        (
            Covered(
                "tests/e2e/test_deployment_recipe.py",
                "test_the_multi_process_recipe_runs_a_tenant_run_on_the_tenants_own_instances",
                "operations.md",
            ),
        ),
    ),
    (
        r"^cd examples/prometheus && promtool",
        (
            Covered(
                "tests/e2e/test_observability.py",
                "test_promtool_accepts_the_example_alerting_rules_and_their_unit_tests",
                "alerts-test.yml",
            ),
        ),
    ),
    (
        r"^export OTEL_EXPORTER_OTLP_ENDPOINT",
        (
            Covered(
                "tests/e2e/test_observability.py",
                "test_one_trace_runs_from_the_client_traceparent_through_mcp_dispatch_and_grpc_child_steps",
                "OTEL_EXPORTER_OTLP_ENDPOINT",
            ),
        ),
    ),
    (
        r"^# stdio, embedded default",
        (
            Covered(
                "tests/e2e/test_mcp_stdio.py",
                "test_stdio_session_runs_as_the_embedded_local_admin_of_tenant_default",
                "stdio",
            ),
            Covered(
                "tests/e2e/test_mcp_http.py",
                "test_http_example_client_runs_the_rag_pipeline_to_completion",
                "http_client.py",
            ),
            Covered(
                "tests/e2e/test_health.py",
                "test_readyz_names_every_check_and_livez_only_the_process",
                "principals.json",
            ),
        ),
    ),
    (
        r"^PYTHONPATH=\. mcp-runtime run my-pipeline\.json",
        (Covered(SELF, "test_the_step_example_runs_under_steps_and_completes_with_its_result", "my_steps"),),
    ),
    (
        r"^export MCP_RUNTIME_DURABLE_URL=postgresql://",
        (
            Covered(
                "tests/e2e/test_postgres_deployment.py",
                "test_serve_and_runtime_instance_processes_share_the_postgresql_store",
                "MCP_RUNTIME_DURABLE_URL",
            ),
        ),
    ),
    (
        r"examples/agents/ticket-agent\.json",
        (
            Covered(
                "tests/e2e/test_agent_example.py",
                "test_the_agent_guide_example_waits_for_approval_then_files_one_ticket",
                "examples/agents/ticket-agent.json",
            ),
        ),
    ),
    (r"human-approval\.json", Run(exit_code=3)),
    (r"^source \.venv/bin/activate|^mcp-runtime (--help|--version|steps|run|hash-token)", Run()),
    (r"^mcp-runtime serve --transport http --port 8765 .*&$", Run()),
]


def matching_rule(block: Block) -> Run | tuple[Covered, ...] | None:
    return next((action for pattern, action in RULES if re.search(pattern, block.text, re.M)), None)


def rule_of(block: Block) -> Run | tuple[Covered, ...]:
    action = matching_rule(block)
    assert action is not None, f"{block.name}: no rule says how this shown command is run:\n{block.text}"
    return action


RUNNABLE = blocks("bash")


def test_every_runnable_block_is_run_here_or_covered_by_a_named_test() -> None:
    for block in RUNNABLE:
        action = rule_of(block)
        for covered in action if isinstance(action, tuple) else ():
            source = (REPOSITORY / covered.path).read_text(encoding="utf-8")
            assert covered.literal in source, (
                f"{block.name}: {covered.path} no longer contains {covered.literal!r}"
            )
            if covered.test is not None:
                functions = {
                    node.name
                    for node in ast.walk(ast.parse(source))
                    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                }
                assert covered.test in functions, f"{block.name}: {covered.path} has no {covered.test}"


@pytest.fixture
def docs_env(redis_server: EmbeddedRedis, tmp_path: Path) -> dict[str, str]:
    return clean_environment(
        REDIS_URL=redis_server.url,
        MCP_RUNTIME_REDIS_PREFIX=f"docs{secrets.token_hex(3)}:",
        MCP_RUNTIME_DATA_DIR=str(tmp_path / "data"),
    )


def run_script(script: str, env: dict[str, str], tmp_path: Path, cwd: Path = REPOSITORY) -> tuple[int, str]:
    """Run `script` with bash -e; stop whatever it left running; (exit code, output)."""
    port = find_free_port()
    script = script.replace("8765", str(port)).replace("/tmp/mcp-runtime-", f"{tmp_path}/mcp-runtime-")
    env = {**env, "MCP_RUNTIME_URL": f"http://127.0.0.1:{port}/mcp"}
    log = tmp_path / f"block-{secrets.token_hex(3)}.log"
    with log.open("w") as output:  # a file, not a pipe: a server left in the background keeps a pipe open
        process = subprocess.Popen(
            ["bash", "-e", "-c", script],
            cwd=cwd,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = process.wait(timeout=BLOCK_TIMEOUT_S)
        finally:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            process.wait()
    return code, log.read_text(encoding="utf-8", errors="replace")


def _distinct(found: list[Block]) -> list[Block]:
    """One block per distinct text (the README's tour is also the site's home page)."""
    return list({block.text: block for block in reversed(found)}.values())[::-1]


RUN_HERE = _distinct([b for b in RUNNABLE if isinstance(matching_rule(b), Run)])


@pytest.mark.parametrize("block", RUN_HERE, ids=lambda block: block.name)
def test_a_shown_block_runs_as_written(block: Block, docs_env: dict[str, str], tmp_path: Path) -> None:
    rule = rule_of(block)
    assert isinstance(rule, Run)
    code, output = run_script(block.text, docs_env, tmp_path)
    assert code == rule.exit_code, f"{block.name} exited {code}:\n{output[-3000:]}"


def _normalised(text: str) -> list[str]:
    text = re.sub(r"exec_[0-9a-f]+", "exec_<id>", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+\+00:00", "<time>", text)
    return [line.rstrip() for line in text.strip().splitlines()]


def test_the_failed_run_sample_is_what_the_cli_prints(docs_env: dict[str, str], tmp_path: Path) -> None:
    [sample] = [
        b for b in blocks("text", [REPOSITORY / "docs" / "pipelines.md"]) if "Status: Failed" in b.text
    ]
    command, *expected = sample.text.splitlines()
    done = subprocess.run(
        shlex.split(command.removeprefix("$ ")),
        cwd=REPOSITORY,
        env=docs_env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert _normalised(done.stdout) == _normalised("\n".join(expected))


def test_the_input_command_a_waiting_run_prints_completes_it_and_the_waiting_step_reads_waiting(
    docs_env: dict[str, str], tmp_path: Path
) -> None:
    waiting = subprocess.run(
        [
            "mcp-runtime",
            "run",
            "examples/pipelines/human-approval.json",
            "--input",
            '{"candidateId":"c-1","jobId":"j-1"}',
        ],
        cwd=REPOSITORY,
        env=docs_env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
        check=False,
    )
    assert waiting.returncode == 3, waiting.stdout + waiting.stderr
    # the parked step reads as waiting, not Ready (issue 29.6)
    assert re.search(r"^approval +human\.approval +WaitingForInput ", waiting.stdout, re.M), waiting.stdout
    [answer] = [
        line.strip() for line in waiting.stdout.splitlines() if line.strip().startswith("mcp-runtime input")
    ]
    done = subprocess.run(
        shlex.split(answer),
        cwd=REPOSITORY,
        env=docs_env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Status: Completed" in done.stdout


def test_the_step_example_runs_under_steps_and_completes_with_its_result(
    docs_env: dict[str, str], tmp_path: Path
) -> None:
    page = REPOSITORY / "docs" / "steps.md"
    [module] = [b for b in blocks("python", [page]) if "class WordStats" in b.text]
    [pipeline] = [b for b in blocks("json", [page]) if '"my-pipeline"' in b.text]
    [command] = [b for b in blocks("bash", [page]) if "my-pipeline.json" in b.text]
    (tmp_path / "my_steps.py").write_text(module.text, encoding="utf-8")
    (tmp_path / "my-pipeline.json").write_text(pipeline.text, encoding="utf-8")
    code, output = run_script(command.text, docs_env, tmp_path, cwd=tmp_path)
    assert code == 0, output[-3000:]
    assert re.search(r"^slug +my\.slugify +Completed", output, re.M), output[-3000:]
    stated = re.findall(r"`(\"\w+\": \d+)`", page.read_text(encoding="utf-8").split(command.text, 1)[1])
    assert stated, "the page no longer states the example's result"
    for pair in stated:
        assert pair in output, f"{pair} is not in the run's output:\n{output[-3000:]}"


def test_the_readme_links_point_at_pages_that_exist() -> None:
    readme = (REPOSITORY / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert targets, "the README links no page of docs/"
    missing = [target for target in targets if not (REPOSITORY / target).exists()]
    assert not missing, f"README.md links pages that do not exist: {missing}"


@pytest.mark.parametrize("page", ["README.md", "docs/index.md"])
def test_the_front_page_names_every_tool_and_spells_each_resource_as_registered(page: str) -> None:
    text = (REPOSITORY / page).read_text(encoding="utf-8")
    paragraph = text[text.index("**Over MCP**") :].split("\n\n", 1)[0]
    named = set(re.findall(r"`([a-z]+(?:\.[a-z]+)?)`", paragraph)) - {"run_pipeline"}
    assert named == set(TOOL_PERMISSIONS), f"README tool list differs: {named ^ set(TOOL_PERMISSIONS)}"
    sources = "\n".join(
        path.read_text(encoding="utf-8") for path in (REPOSITORY / "mcp_runtime").rglob("*.py")
    )
    resources = re.findall(r"`((?:pipeline|step|run|ui)://[^`]+)`", paragraph)
    assert len(resources) == 4
    for resource in resources:
        assert resource in sources, f"{resource} is not spelled as the server registers it"
