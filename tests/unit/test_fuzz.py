"""Hostile input at every public entry point that takes messages or text: the answer is
a valid output or a ctxfold error, never another exception; and no regular expression
backtracks catastrophically on the inputs that stress it.

A longer run, with the counts of what came back (typed error / valid output):
``CTXFOLD_FUZZ_EXAMPLES=500 pytest tests/unit/test_fuzz.py -s``.
"""

from __future__ import annotations

import json
import os
import signal
import string
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxfold
from ctxfold import CtxfoldError
from ctxfold.cli import CliError, load_file
from ctxfold.references import ReferenceIndex, extractors
from ctxfold.rendering import as_turns
from ctxfold.testing import check_tool_integrity
from ctxfold.text import adapters, decode
from ctxfold.text.adapters import split_message_text
from ctxfold.text.layers import (
    build_codebook,
    looks_indentation_sensitive,
    minify_json,
    normalize_whitespace,
    truncate_observation,
)
from ctxfold.text.primitives import find_identifiers, split_sentences

COUNTER = ctxfold.get_counter("approx")  # fast; the tiktoken one is tested elsewhere
OUTCOMES: Counter[str] = Counter()
EXAMPLES = int(os.environ.get("CTXFOLD_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
)

# ----------------------------------------------------------------------- inputs

_text = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",)) | st.sampled_from('[]{}"\\`/\n'),
    max_size=200,
)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)
_call = st.fixed_dictionaries(
    {},
    optional={
        "id": st.sampled_from(["a", "b", "", None, 3]),
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {},
            optional={"name": _text | st.none(), "arguments": _text | _json},
        ),
    },
)
_message = st.fixed_dictionaries(
    {},
    optional={
        "role": st.sampled_from(["system", "user", "assistant", "tool", "robot", None]),
        "content": _text | st.none() | st.lists(_json, max_size=3) | _json,
        "tool_calls": st.lists(_call, max_size=3) | _json,
        "tool_call_id": st.sampled_from(["a", "b", "", None]) | _json,
        "name": _text | st.none() | _json,
        "extra": _json,
    },
)
_messages = st.lists(_message, max_size=8) | _json


def _outcome(kind: str) -> None:
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").split("::")[-1].split(" ")[0]
    OUTCOMES[f"{test.removeprefix('test_')[:40]}: {kind}"] += 1


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    if "CTXFOLD_FUZZ_EXAMPLES" in os.environ:
        print(f"\nfuzz outcomes ({EXAMPLES} examples a test):")
        for key, n in sorted(OUTCOMES.items()):
            print(f"  {key}: {n}")


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Fail (instead of hanging) when the block runs longer than ``seconds``."""

    def expired(signum: int, frame: Any) -> None:
        raise TimeoutError(f"took longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def answers(call: Callable[[], Any]) -> Any:
    """The call's result, or None for a ctxfold error; anything else fails the test."""
    try:
        with time_limit(60):
            result = call()
    except CtxfoldError:
        _outcome("typed error")
        return None
    _outcome("valid output")
    return result


# ------------------------------------------------------------------ entry points


@FUZZ
@given(_messages, st.sampled_from(["auto", "sliding_window", "summarize", "hierarchical"]))
def test_compress_answers_anything_with_a_valid_history_or_a_typed_error(raw, strategy):
    options = {"overflow": "best_effort"} if strategy != "summarize" else {}
    result = answers(
        lambda: ctxfold.compress(raw, budget=40, strategy=strategy, counter=COUNTER, **options)
    )
    if result is not None:
        original = ctxfold.from_openai(raw)
        check_tool_integrity(original, list(result.messages))
        json.dumps(result.to_openai())  # the output is JSON, whatever came in
        back = ctxfold.expand(result)
        assert back.complete and list(back.messages) == original


HOSTILE = st.sampled_from(
    [
        "[" * 500 + "]" * 500,
        '{"a":' * 200 + "1" + "}" * 200,
        "\x00\x01\x02 control",
        " \t" * 2_000,
        "é" * 3_000,
        "```\n" + "x" * 5_000,
        "Traceback (most recent call last):\n" + '  File "a.py", line 1\n' * 300,
        "§§ §AB codes",
    ]
)


@st.composite
def _hostile_histories(draw: Any) -> list[ctxfold.Message]:
    """Well-formed histories whose texts are hostile."""
    from dataclasses import replace

    from ctxfold.testing.strategies import conversations

    msgs = draw(conversations(max_units=6))
    out = []
    for m in msgs:
        if isinstance(m.content, str) and draw(st.booleans()):
            m = replace(m, content=draw(HOSTILE))
        out.append(m)
    return out


@FUZZ
@given(
    _hostile_histories(),
    st.sampled_from(["auto", "sliding_window", "summarize", "semantic", "hierarchical", "hybrid"]),
    st.sampled_from([0.05, 0.25, 0.6, 1.0]),
    st.booleans(),
)
def test_compress_keeps_the_contract_on_hostile_texts(msgs, strategy, fraction, reversible):
    from ctxfold.testing import check_invariants
    from ctxfold.testing.doubles import FakeEmbedder

    budget = int(COUNTER.count_messages(msgs) * fraction)
    options: dict[str, Any] = {"reversible": reversible}
    if strategy == "semantic":
        options["embedder"] = FakeEmbedder()
    compressor = ctxfold.strategies.resolve_strategy(strategy, **options)
    answers(lambda: check_invariants(compressor, msgs, budget=budget, counter=COUNTER))


@FUZZ
@given(_text | st.sampled_from(["[" * 300 + "]" * 300, "{" * 50, '{"a": [1, {"b": "c"}]}']))
def test_the_text_layers_and_adapters_answer_any_text(text):
    pieces, _ = answers(lambda: split_message_text(text, adapters())) or ([], [])
    assert len("".join(p.text for p in pieces)) <= max(len(text), 1) * 2 + 64
    answers(lambda: minify_json(text))
    answers(lambda: normalize_whitespace(text, prose=True))
    answers(lambda: truncate_observation(text, max_lines=5, head=2, tail=2))
    book = build_codebook([text * 3], COUNTER.count_text, static=True, dynamic=True, paths=True)
    encoded, _ = book.encode(text)
    assert decode(encoded, book.entries) == text


@FUZZ
@given(st.lists(_text, max_size=4))
def test_reference_extraction_answers_any_text(texts):
    answers(lambda: ReferenceIndex.from_messages([{"role": "user", "content": t} for t in texts]))


@FUZZ
@given(st.lists(_json, max_size=4))
def test_render_answers_any_turns(turns):
    made = answers(lambda: as_turns(turns))
    if made is not None:
        answers(lambda: ctxfold.render(made))


@FUZZ
@given(_messages)
def test_expand_answers_any_history(raw):
    answers(lambda: ctxfold.expand(raw))


@FUZZ
@given(st.binary(max_size=300) | _json.map(lambda v: json.dumps(v).encode()))
def test_the_cli_reader_answers_any_file(data):
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        f.write(data)
        f.flush()
        try:
            with time_limit(60):
                load_file(f.name)
            _outcome("valid output")
        except (CliError, CtxfoldError):
            _outcome("typed error")


# ------------------------------------------------------------ no catastrophic regex

STRESS = [
    "a" * 50_000,
    "/" * 50_000,
    "a/" * 25_000,
    "-" * 50_000,
    "." * 50_000,
    "a." * 25_000,
    "_" * 50_000,
    "(" * 20_000,
    "`" * 20_000,
    '"' * 20_000,
    "'" * 20_000,
    "http://" + "a" * 50_000,
    "https://x.com/" + "(" * 10_000,
    " " * 50_000 + "x",
    "\n" * 50_000,
    "Error: " + "a " * 20_000,
    'File "' + "a" * 20_000,
    "$ " + "a " * 20_000,
    "1" * 50_000,
    "1:" * 25_000,
    "A" * 50_000,
    "aA" * 25_000,
    string.punctuation * 2_000,
    "x = (" * 5_000,
    "[" * 5_000 + "a" + "]" * 5_000,
    "    " * 10_000 + "def f(",
]


@pytest.mark.parametrize("k", range(len(STRESS)))
def test_no_pattern_backtracks_catastrophically(k):
    text = STRESS[k]
    started = time.perf_counter()
    with time_limit(30):  # linear work takes well under a second here
        list(find_identifiers(text))
        split_sentences(text)
        for extract in extractors().values():
            list(extract(text))
        split_message_text(text, adapters())
        normalize_whitespace(text, prose=True)
        looks_indentation_sensitive(text)
        chat = [{"role": "user", "content": "go"}, {"role": "assistant", "content": text}]
        ctxfold.compress([*chat, {"role": "user", "content": "next"}], budget=2000)
    # Linear work on 50,000 characters is well under a second; a pattern that retries
    # from every position of a run took 12-84 s on some of these texts.
    assert time.perf_counter() - started < 5
