"""Issue 13.10: the `mcp-runtime` command line as a user meets it.

Real `mcp-runtime` processes on the test redis-server (a key prefix of their own): bad
arguments are usage errors (exit 2, the argument named, no traceback); a failed run names
each failed step's error code and message; a run parked on a human-input gate prints the
command that answers it, and that command, run as printed, completes the run; a taken port
stops `serve` before it claims to be serving; every option explains itself.
"""

from __future__ import annotations

import argparse
import json
import secrets
import shlex
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from mcp_runtime.cli import _parser, main
from runtime_core.hot_state import EmbeddedRedis
from tests.e2e.mcp_support import clean_environment, mcp_runtime_command

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "pipelines"
FAILING = {
    "name": "fails",
    "steps": [
        {
            "name": "flaky",
            "stepKey": "test.flaky",
            "config": {"failTimes": 5, "retry": {"maxRetries": 1, "baseDelayMs": 5}},
        },
        {"name": "after", "stepKey": "test.noop", "dependsOn": ["flaky"]},
    ],
}


Cli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def cli(redis_server: EmbeddedRedis, tmp_path: Path) -> Cli:
    env = clean_environment(
        REDIS_URL=redis_server.url, MCP_RUNTIME_REDIS_PREFIX=f"cli{secrets.token_hex(3)}:"
    )

    def run(*arguments: str, data_dir: bool = True) -> subprocess.CompletedProcess[str]:
        command = [mcp_runtime_command(), *arguments]
        if data_dir:
            command += ["--data-dir", str(tmp_path / "data")]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)

    return run


def assert_usage_error(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    for fragment in fragments:
        assert fragment in done.stderr, done.stderr


def exit_code_of(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """`mcp-runtime ARGV` in this process (argument handling needs no subprocess): code, stderr."""
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse ends a usage error this way
        code = int(exit_.code or 0)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (["--input", "{not json"], "argument --input: not valid JSON"),
        (["--input", "[1, 2]"], "argument --input: must be a JSON object like '{\"key\": 1}', not list"),
        (["--workers", "0"], "argument --workers: must be at least 1, got 0"),
        (["--workers", "four"], "argument --workers: expected a whole number, got 'four'"),
    ],
    ids=["input-not-json", "input-not-object", "workers-0", "workers-not-a-number"],
)
def test_a_bad_run_argument_is_a_usage_error_naming_it(
    capsys: pytest.CaptureFixture[str], arguments: list[str], fragment: str
) -> None:
    code, stderr = exit_code_of(capsys, "run", str(EXAMPLES / "fan-out.json"), *arguments)
    assert (code, "Traceback" in stderr) == (2, False) and fragment in stderr, stderr


def test_a_missing_pipeline_file_is_an_error_without_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, stderr = exit_code_of(capsys, "run", str(tmp_path / "nope.json"))
    assert code == 2 and stderr.startswith("error [not_found]: Pipeline file ") and "nope.json" in stderr


def test_runtime_instance_with_a_pool_of_zero_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, stderr = exit_code_of(
        capsys,
        "runtime-instance",
        *(
            "--transport",
            "http",
            "--port",
            "8801",
            "--tenant",
            "t",
            "--redis-url",
            "redis://x",
            "--host-id",
            "h",
        ),
        *("--pool-size", "0"),
    )
    assert code == 2 and "argument --pool-size: must be at least 1, got 0" in stderr


def test_a_failed_run_prints_each_failed_steps_error_code_and_message(cli: Cli, tmp_path: Path) -> None:
    pipeline = tmp_path / "fails.json"
    pipeline.write_text(json.dumps(FAILING), encoding="utf-8")
    done = cli("run", str(pipeline))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Status: Failed" in done.stdout
    assert "Failed: step 'flaky' (test.flaky) failed: [transient]" in done.stdout
    failed = done.stdout.split("Failed or retrying steps:\n", 1)[1].splitlines()
    assert failed[0].startswith("  flaky (test.flaky, Failed): [transient] ")
    assert "Retries exhausted" in failed[0] and "(retries 1, failed at 20" in failed[0]


@pytest.mark.parametrize(
    ("config", "printed"),
    [
        (
            {"tempalte": "Rate {name}"},
            "error [invalid_pipeline] rule step_config: Step 'ask' (ai.prompt) has an unknown config key "
            "`tempalte`: did you mean `template`?",
        ),
        (
            {"template": "Rate {name}", "provider": "gpt-5"},
            "error [invalid_pipeline] rule provider_configured: Step 'ask' (ai.prompt): ",
        ),
    ],
    ids=["config-typo", "provider-not-configured"],
)
def test_a_refused_pipeline_names_the_validation_rule_it_broke(
    cli: Cli, tmp_path: Path, config: dict[str, str], printed: str
) -> None:
    pipeline = tmp_path / "refused.json"
    step = {"name": "ask", "stepKey": "ai.prompt", "config": config}
    pipeline.write_text(json.dumps({"name": "refused", "steps": [step]}), encoding="utf-8")
    done = cli("run", str(pipeline))
    assert_usage_error(done, printed)


def test_steps_output_prints_the_result_of_every_step(cli: Cli) -> None:
    done = cli("run", str(EXAMPLES / "fan-out.json"), "--steps-output")
    assert done.returncode == 0, done.stdout + done.stderr
    pipeline = json.loads((EXAMPLES / "fan-out.json").read_text(encoding="utf-8"))
    for step in pipeline["steps"]:
        assert f"Result of {step['name']} ({step['stepKey']}):" in done.stdout
    assert "Final result" not in done.stdout


def test_a_run_waiting_for_input_prints_the_command_that_answers_it_and_that_command_works(cli: Cli) -> None:
    state = json.dumps({"candidateId": "c-1", "jobId": "j-1"})
    parked = cli("run", str(EXAMPLES / "human-approval.json"), "--input", state)
    assert parked.returncode == 3, parked.stdout + parked.stderr
    assert "Status: WaitingForInput" in parked.stdout
    assert (
        "Step 'approval' waits for input under key 'hire-approval': Approve the hire decision?"
        in parked.stdout
    )
    [printed] = [
        line.strip() for line in parked.stdout.splitlines() if line.strip().startswith("mcp-runtime input")
    ]
    answered = cli(*shlex.split(printed)[1:], data_dir=False)  # exactly as printed (it names the data dir)
    assert answered.returncode == 0, answered.stdout + answered.stderr
    assert "Status: Completed" in answered.stdout and '"approved": true' in answered.stdout
    again = cli(*shlex.split(printed)[1:], data_dir=False)
    assert_usage_error(again, "error [conflict]", "already finished as Completed")


def test_serve_on_a_taken_port_exits_2_and_never_claims_to_be_serving(cli: Cli) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        done = cli("serve", "--transport", "http", "--port", port)
    assert_usage_error(done, f"error [address_unavailable]: Cannot listen on 127.0.0.1:{port}")
    assert "serving MCP" not in done.stderr


def _options(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.Action]]:
    """(command, option) for every option and positional of every subcommand."""
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return [
        (name, action)
        for name, sub in commands.choices.items()
        for action in sub._actions
        if not isinstance(action, argparse._HelpAction)
    ]


def test_every_option_of_every_command_has_help_text() -> None:
    parser = _parser()
    undocumented = [
        f"{name} {action.dest}" for name, action in _options(parser) if not (action.help or "").strip()
    ]
    assert undocumented == []
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert all(choice.help for choice in commands._choices_actions)
    top = parser.format_help()
    for reads_as_documentation in (
        "examples:",
        "environment:",
        "exit codes:",
        "REDIS_URL",
        "mcp-runtime input",
    ):
        assert reads_as_documentation in top
