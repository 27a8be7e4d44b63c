"""JSON nested deeper than ctxfold reads (a hostile tool result, model arguments, an
input file) is text: no RecursionError anywhere a message's JSON is parsed."""

from __future__ import annotations

import json

import pytest

import ctxfold
from ctxfold._json import MAX_DEPTH, TooDeepError, loads
from ctxfold.cli import main
from ctxfold.references import ReferenceIndex
from ctxfold.text.adapters import JsonAdapter
from ctxfold.text.layers import minify_json
from ctxfold.text.primitives import json_strings, json_values

DEEP = "[" * 500 + "]" * 500
DEEPER = "[" * 100_000 + "]" * 100_000
OBJECTS = '{"a":' * 300 + "1" + "}" * 300


def test_loads_refuses_what_nests_too_deep_and_reads_the_rest():
    for text in (DEEP, DEEPER, OBJECTS):
        with pytest.raises(TooDeepError):
            loads(text)
    just = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert loads(just) == json.loads(just)
    assert loads('{"s": "[[[[' + "[" * 500 + '"}')["s"].startswith("[[[[")  # inside a string


@pytest.mark.parametrize("text", [DEEP, DEEPER, OBJECTS])
def test_the_text_helpers_take_deep_json_as_text(text):
    assert json_strings(text) == text and json_values(text) == []
    assert minify_json(text) is None
    assert not JsonAdapter().detect(text)
    ReferenceIndex.from_messages([{"role": "user", "content": text}])


@pytest.mark.parametrize("strategy", ["auto", "hybrid", "summarize", "hierarchical"])
def test_a_deep_tool_result_and_arguments_do_not_stop_a_compression(strategy):
    msgs = [
        {"role": "user", "content": "Parse the payload."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": DEEP}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": DEEP},
        {"role": "assistant", "content": "It is a nested list. " * 40},
    ]
    options = {"overflow": "best_effort"} if strategy == "hierarchical" else {}
    result = ctxfold.compress(msgs, budget=300, strategy=strategy, **options)
    assert result.stats.tokens_after <= result.stats.tokens_before


def test_the_cli_says_an_input_file_nests_too_deep(tmp_path, capsys):
    path = tmp_path / "deep.json"
    path.write_text(DEEPER)
    assert main(["compress", str(path), "--budget", "100"]) == 2
    err = capsys.readouterr().err
    assert "deeper than 100" in err and "Traceback" not in err
