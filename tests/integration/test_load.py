"""The load benchmark (``benchmarks/load.py``) on a small scale: worker processes on
one Redis server and one SQLite file, one killed and restarted, Redis restarted, and
every session's history and expansion exact at the end."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.mark.full_sweep
def test_sessions_survive_kills_and_a_redis_restart_exactly(tmp_path: Path) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not on the PATH (.ci/run installs it)")
    out = tmp_path / "load.json"
    args = ["--processes", "3", "--sessions", "24", "--turns", "12", "--kills", "2"]
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "load.py"), *args, "--json", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(out.read_text())
    assert report["wrong"] == [] and report["failed_workers"] == []
    # every turn is stored (``wrong`` compares each session's whole history); a worker
    # killed after storing a turn and before logging it loses that one log line
    logged = report["turns"] + report["cold_turns"]
    assert 24 * 12 - report["kills"] <= logged <= 24 * 12
    assert report["kills"] == 2 and report["redis_restarts"] == 1
