"""The tool-output benchmark (``benchmarks/logs.py``): its generator's gold is true of
the conversations it makes, and a small run gives a well-formed row for every family,
budget and method."""

from __future__ import annotations

import json
import sys

import pytest

from ctxfold import from_openai
from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import logs
import logs_gen

SMALL = (6_000, 9_000)  # tokens: big enough for several outputs, small enough to run fast


@pytest.mark.parametrize("family", list(logs_gen.FAMILIES))
def test_every_gold_identifier_is_on_its_line_in_a_tool_result(family: str) -> None:
    for seed in range(3):
        record = logs_gen.generate(family, seed, SMALL)
        msgs = record["messages"]
        assert record["gold"] and any(g["ids"] for g in record["gold"])
        for g in record["gold"]:
            assert msgs[g["message"]]["role"] == "tool"
            assert g["line"] in msgs[g["message"]]["content"].split("\n")
            for kind, ident in g["ids"]:
                assert kind and logs.found(ident, g["line"]), (ident, g["line"])
        # what the agent and the user said never names one: what an output shows of
        # an identifier came from the tool output
        said = logs.text_of([m for m in from_openai(msgs) if m.role != "tool"])
        assert record["task"] in said
        assert not [i for i in logs.gold_ids(record) if logs.found(i, said)]


def test_a_conversation_is_a_function_of_its_family_and_seed() -> None:
    a, b = logs_gen.generate("tests", 3), logs_gen.generate("tests", 3)
    assert json.dumps(a) == json.dumps(b)
    assert json.dumps(a) != json.dumps(logs_gen.generate("tests", 4))
    tokens = logs.ENC.count_messages(from_openai(a["messages"]))
    assert 27_000 <= tokens <= 88_000  # the default size, 30-80K, give or take a line


def test_an_identifier_is_found_whole_only() -> None:
    assert logs.found("src/a.py:21", "at src/a.py:21, in f")
    assert not logs.found("src/a.py:21", "at src/a.py:212, in f")
    assert not logs.found("test_x", "test_x_eur PASSED")
    assert logs.found("KeyError('k_7')", "raised KeyError('k_7') at x")


def test_a_small_run_gives_a_well_formed_row_for_each_family_budget_and_method() -> None:
    records = logs.records_for(list(logs_gen.FAMILIES), 2, (10_000, 14_000))
    results = logs.run_all(records, list(logs.METHODS))
    families = [*logs_gen.FAMILIES, "all"]
    budgets = {m: [logs.label(b) for b in logs.METHODS[m][0]] for m in logs.METHODS}
    expected = {(f, b, h, m) for f in families for m in logs.METHODS for b in budgets[m]
                for h in logs.HALVES}  # fmt: skip
    assert set(results) == expected
    for key, row in results.items():
        for name in ("ids", "lines", "task", "fit", "valid"):
            assert 0.0 <= row[name] <= 1.0, (key, name)
        assert row["median_ms"] > 0
        assert row["conversations"] == (12 if key[0] == "all" else 2) // (
            2 if key[2] != "all" else 1
        )
    for method in ("compress", "session"):
        for b in budgets[method]:
            row = results[("all", b, "all", method)]
            assert row["fit"] == row["valid"] == 1.0
            assert row["notes"] > 0 and row["list"] is not None and row["sentence"] is not None
    trimmed = results[("all", "10%", "all", "trim_messages")]
    assert trimmed["notes"] == 0 and trimmed["list"] is None
    assert "| all | 10% | all | compress |" in logs.table(results)
