"""Issue 14.4 from the command line: `mcp-runtime run` says why a run failed (real OS process)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_run_without_its_input_names_the_failed_step_its_code_message_and_time(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcp_runtime.cli",
            "run",
            str(ROOT / "examples" / "pipelines" / "rag-final-test.json"),
            "--data-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )

    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert "Status: Failed" in lines
    [failed] = [line for line in lines if line.startswith("Failed: ")]
    assert failed.startswith(
        "Failed: step 'candidate' (rag.retrieval) failed: [resolver]"
    ) or failed.startswith("Failed: step 'job' (rag.retrieval) failed: [resolver]")
    explained = [line.strip() for line in lines if line.startswith("  ") and ", Failed): [resolver]" in line]
    assert len(explained) == 2
    assert explained[0].startswith(
        "candidate (rag.retrieval, Failed): [resolver] Binding 'state.candidateId' found nothing"
    )
    assert "(retries 0, failed at 20" in explained[0]
