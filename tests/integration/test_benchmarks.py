"""``python -m benchmarks``: its report, its plots and its check against the baseline.
(CI runs the whole thing at ``--size tiny --check`` on the shared data.)"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_suite", REPO / "benchmarks/__main__.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_suite"] = module
    spec.loader.exec_module(module)
    return module


def _rows(bench: ModuleType, retention: float) -> list:
    return [
        bench.Row("compare", "locomo", "25%", "ctxfold auto", 1.0, 1.0, retention, 0.25, 9.0),
        bench.Row("compare", "locomo", "25%", "trim_messages", 1.0, 1.0, 0.3, 0.25, 4.0),
        bench.Row(
            "replay",
            "locomo",
            "8000",
            "session",
            1.0,
            1.0,
            0.8,
            0.9,
            1.0,
            {"cost": 0.2, "latency": [(100, 1.0), (2000, 3.0)]},
        ),
    ]


def test_the_check_fails_below_the_baseline_of_ctxfolds_rows(bench, tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "BASELINE", tmp_path / "baseline.json")
    assert bench.check(_rows(bench, 0.7), "tiny")[0].startswith("no baseline")
    bench.record_baseline(_rows(bench, 0.7), "tiny")
    recorded = json.loads((tmp_path / "baseline.json").read_text())["tiny"]
    assert sorted(recorded) == ["compare|locomo|25%|ctxfold auto", "replay|locomo|8000|session"]
    assert bench.check(_rows(bench, 0.7), "tiny") == []
    assert bench.check(_rows(bench, 0.75), "tiny") == []  # better is fine
    worse = bench.check(_rows(bench, 0.69), "tiny")
    assert worse == ["compare|locomo|25%|ctxfold auto: retention 0.69 < baseline 0.7"]
    assert "holds no 'small' run" in bench.check(_rows(bench, 0.7), "small")[0]


def test_recording_one_stage_keeps_the_others_and_checks_only_what_ran(
    bench, tmp_path, monkeypatch
):
    monkeypatch.setattr(bench, "BASELINE", tmp_path / "baseline.json")
    bench.record_baseline(_rows(bench, 0.7), "tiny")
    logs_row = bench.Row("logs", "tests", "25%", "compress", 1.0, 1.0, 0.6)
    bench.record_baseline([logs_row], "tiny")  # as --only logs --record does
    recorded = json.loads((tmp_path / "baseline.json").read_text())["tiny"]
    assert sorted(recorded) == [
        "compare|locomo|25%|ctxfold auto",
        "logs|tests|25%|compress",
        "replay|locomo|8000|session",
    ]
    assert bench.check([logs_row], "tiny") == []  # the stages not run are not "missing"
    worse = bench.check([bench.Row("logs", "tests", "25%", "compress", 1.0, 1.0, 0.5)], "tiny")
    assert worse == ["logs|tests|25%|compress: retention 0.5 < baseline 0.6"]


def test_the_report_and_plots(bench, tmp_path):
    rows = [*_rows(bench, 0.7), *bench.stage_cost([1_000, 3_000], bench.Progress(2))]
    meta = {"size": "tiny", "date": "2026-11-26", "machine": "test", "seconds": 1.0}
    text = bench.report(rows, meta)
    assert "## compare" in text and "## replay" in text and "## cost" in text
    assert "| locomo | 8000 | session | 1.000 | 1.000 | 0.800 | 0.900 | 1.000 | 0.200 |" in text
    made = bench.plots(rows, tmp_path)
    assert made == ["retention.png", "latency.png", "cost.png"]
    assert all((tmp_path / name).read_bytes()[:4] == b"\x89PNG" for name in made)


def test_the_recorded_baseline_covers_every_stage(bench):
    recorded = json.loads((REPO / "benchmarks" / "baseline.json").read_text())["tiny"]
    stages = {key.split("|")[0] for key in recorded}
    assert stages == {"compare", "replay", "next_action", "recall", "agent", "anthropic", "logs"}
    assert all(floors["fit"] in (None, 1.0) for floors in recorded.values())


def _scaling() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_scaling", REPO / "benchmarks/scaling.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_scaling_splits_the_worst_turn_and_reopens_its_session(tmp_path, capsys):
    scaling = _scaling()
    out = tmp_path / "rows.json"
    assert scaling.main(["--sizes", "60", "--measures", "turns", "load", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["60"]
    turns = rows["turns"]
    assert turns["worst_ms"] >= turns["median_ms"] > 0
    assert turns["worst_cpu_ms"] > 0  # the work in a render, beside its wall time
    # 60 messages never search in arrays: no render imports numpy, none is set aside
    assert turns["import_cpu_ms"] == 0.0
    assert turns["worst_cpu_other_ms"] == turns["worst_cpu_ms"]
    assert rows["load"]["cpu"] > 0  # the session the turns built, read back


def test_scaling_reports_what_a_compaction_costs_beside_the_worst(tmp_path):
    out = tmp_path / "rows.json"
    argv = ["--sizes", "200", "--budget", "3000", "--measures", "turns", "--json", str(out)]
    assert _scaling().main(argv) == 0
    turns = json.loads(out.read_text())["200"]["turns"]
    assert 0 < turns["median_compaction_ms"] <= turns["worst_compaction_ms"]


def test_scaling_refuses_to_load_a_session_no_turns_built(capsys):
    with pytest.raises(SystemExit):
        _scaling().main(["--sizes", "60", "--measures", "load"])
    assert "add turns" in capsys.readouterr().err
