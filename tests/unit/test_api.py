from __future__ import annotations

import asyncio
import json
import logging
import re

import pytest

import ctxfold
from conftest import example_records
from ctxfold import (
    BaseCompressor,
    CompressionResult,
    ConfigurationError,
    InvalidMessageError,
    Message,
    SlidingWindow,
)


def record():
    return example_records()[0]


def test_compress_accepts_openai_dicts_and_returns_openai_dicts():
    raw = record()["messages"]
    before = json.dumps(raw)
    result = ctxfold.compress(raw, budget=1500)
    assert isinstance(result, CompressionResult)
    assert result.strategy == "auto"
    assert result.stats.tokens_after <= 1500 < result.stats.tokens_before
    out = result.to_openai()
    assert out[0] == raw[0]  # system prompt kept verbatim
    assert out[-1] == raw[-1]  # newest message kept
    assert json.dumps(raw) == before  # input untouched
    assert len(result.trace) == len(raw)


def test_compress_accepts_messages_and_any_counter():
    msgs = ctxfold.from_openai(record()["messages"])
    exact = ctxfold.compress(msgs, budget=2000, counter="gpt-4o")
    approx = ctxfold.compress(msgs, budget=2000, counter="approx")
    words = ctxfold.compress(msgs, budget=2000, counter=lambda t: len(t.split()))
    assert exact.stats.counter == "o200k_base" and approx.stats.counter == "approx"
    assert words.stats.tokens_after <= 2000
    assert all(isinstance(m, Message) for m in exact.messages)


def test_stats_are_consistent():
    s = ctxfold.compress(record()["messages"], budget=1500).stats
    assert s.ratio == pytest.approx(s.tokens_before / s.tokens_after)
    assert s.reduction_pct == pytest.approx(100 * (1 - s.tokens_after / s.tokens_before))
    assert s.messages_after < s.messages_before and s.elapsed_ms >= 0 and s.fits
    assert s.as_dict()["fits"] is True and s.as_dict()["budget"] == 1500


def test_each_compression_is_logged_with_its_stats(caplog):
    with caplog.at_level(logging.INFO, logger="ctxfold"):
        result = ctxfold.compress(record()["messages"], budget=1500)
    [rec] = [r for r in caplog.records if r.name == "ctxfold"]
    assert rec.ctxfold_stats == result.stats.as_dict()
    assert f"{result.stats.tokens_before} -> {result.stats.tokens_after} tokens" in rec.message


def test_strategy_options_and_instances():
    raw = record()["messages"]
    r = ctxfold.compress(raw, budget=1500, strategy="sliding_window", keep_first=1)
    assert r.trace[1].reason == "keep_first"
    r2 = ctxfold.compress(raw, budget=1500, strategy=SlidingWindow(keep_first=1))
    assert r2.to_openai() == r.to_openai()
    r3 = ctxfold.compress(raw, budget=1500, strategy=SlidingWindow, keep_first=1)
    assert r3.to_openai() == r.to_openai()


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"strategy": "nope"}, "unknown strategy 'nope'; registered: auto, hierarchical, hybrid"),
        ({"strategy": 42}, "strategy must be"),
        (
            {"strategy": "sliding_window", "window": 3},
            "has no option 'window'; its options: cache, keep_first",
        ),
        ({"recent_share": 1.5}, "recent_share must be a number in"),
        ({"strategy": SlidingWindow(), "keep_first": 1}, "configure the instance"),
        ({"counter": "p50k_bogus"}, "unknown tokenizer"),
    ],
)
def test_configuration_errors_say_what_to_do(kwargs, fragment):
    with pytest.raises(ConfigurationError, match=fragment):
        ctxfold.compress(record()["messages"], budget=100, **kwargs)


def test_invalid_input_is_a_typed_error():
    with pytest.raises(InvalidMessageError, match="message 1"):
        ctxfold.compress([{"role": "user", "content": "a"}, {"role": "x"}], budget=10)
    with pytest.raises(InvalidMessageError, match="list of messages"):
        ctxfold.compress("hello", budget=10)  # type: ignore[arg-type]


def test_a_compression_is_checked_when_made_and_compresses_when_called():
    raw = record()["messages"]
    shrink = ctxfold.Compression(1500, strategy="sliding_window", counter="o200k_base")
    once = ctxfold.compress(raw, budget=1500, strategy="sliding_window")
    assert shrink(raw).to_openai() == once.to_openai()
    assert shrink(raw).stats.budget == 1500
    # nothing is read before a bad setting is refused
    for bad in (
        {"budget": 0},
        {"budget": 100, "strategy": "slidng_window"},
        {"budget": 100, "counter": "p50k_bogus"},
        {"budget": 100, "query": 42},
        {"budget": 100, "keep_recent": 3},
    ):
        with pytest.raises(ConfigurationError):
            ctxfold.Compression(**bad)

    class Plain:  # a compressor of one's own: no BaseCompressor, takes no query
        name = "plain"

        def compress(self, messages, *, budget, counter=None):
            return ctxfold.compress(messages, budget=budget, counter=counter)

        async def acompress(self, messages, *, budget, counter=None):
            return self.compress(messages, budget=budget, counter=counter)

    assert ctxfold.Compression(1500, strategy=Plain())(raw).messages
    with pytest.raises(ConfigurationError, match="takes no query"):
        ctxfold.Compression(1500, strategy=Plain(), query="where?")


def test_acompress_matches_compress():
    c = SlidingWindow()
    raw = record()["messages"]
    sync = c.compress(raw, budget=1500)
    asyn = asyncio.run(c.acompress(raw, budget=1500))
    assert asyn.to_openai() == sync.to_openai() and asyn.trace == sync.trace


def test_registering_a_strategy_makes_it_available_by_name():
    class KeepAll(BaseCompressor):
        name = "keep_last_only"

        def compact(self, conv):

            messages = conv.messages
            return (
                messages[-1:],
                [
                    ctxfold.Decision(
                        i, "kept" if i == len(messages) - 1 else "dropped", "t", 0, 0, self.name
                    )
                    for i in range(len(messages))
                ],
                {},
            )

    ctxfold.register_strategy("keep_last_only", KeepAll)
    try:
        assert "keep_last_only" in ctxfold.strategies.registered()
        r = ctxfold.compress(record()["messages"], budget=200, strategy="keep_last_only")
        assert len(r.messages) == 1
        with pytest.raises(ConfigurationError, match="already registered"):
            ctxfold.register_strategy("keep_last_only", KeepAll)
    finally:
        ctxfold.register_strategy("keep_last_only", SlidingWindow, replace=True)


def test_strategies_view_is_read_only():
    with pytest.raises(TypeError):
        ctxfold.strategies.registered()["x"] = SlidingWindow  # type: ignore[index]


def test_result_converts_to_anthropic():
    result = ctxfold.compress(record()["messages"], budget=1500, strategy="sliding_window")
    system, turns = result.to_anthropic()
    assert system == record()["messages"][0]["content"]
    assert all(t["role"] in ("user", "assistant") for t in turns)
    # auto's note is a system-style message: Anthropic gets it in the system parameter
    system, turns = ctxfold.compress(record()["messages"], budget=1500).to_anthropic()
    assert system.startswith(record()["messages"][0]["content"])
    assert "[ctxfold round " in system  # auto is reversible by default
    assert all(t["role"] in ("user", "assistant") for t in turns)


def test_condense_writes_the_note_within_max_tokens_and_keeps_identifiers():
    record = next(r for r in example_records() if "airline" in r["id"])
    history = record["messages"][1:]  # what a summarizing middleware hands over
    counter = ctxfold.get_counter("o200k_base")
    for max_tokens in (150, 400, 1200):
        text = ctxfold.condense(history, max_tokens=max_tokens)
        assert 0 < counter.count_text(text) <= max_tokens
        assert "sophia_silva_7557" in text  # the user id the agent looked up first
    text = ctxfold.condense(history, max_tokens=400)
    assert text.startswith("[ctxfold: ") and "earlier messages condensed" in text
    assert "\nuser: " in text and "tool result" in text  # the newest turns in full
    assert ctxfold.condense(history, max_tokens=400) == text  # deterministic
    short = [{"role": "user", "content": "Book HAT039 for Ana."}]
    assert ctxfold.condense(short, max_tokens=50) == "user: Book HAT039 for Ana."
    key = "sk-proj-" + "Ab3dE5gH7jK9mN1pQ3sT5vX7zB9dF1hJ3kL5"
    said = [{"role": "user", "content": f"my key is {key}, keep it"}]
    assert key in ctxfold.condense(said, max_tokens=200)
    masked = ctxfold.condense(said, max_tokens=200, redact=True)  # short, yet masked
    assert key not in masked and "[secret " in masked


def test_condense_can_keep_the_originals_for_the_expand_tool(tmp_path):
    record = next(r for r in example_records() if "airline" in r["id"])
    store = ctxfold.SQLiteStore(tmp_path / "originals.db")
    text = ctxfold.condense(record["messages"][1:], max_tokens=400, reversible=True, store=store)
    round_id = re.search(r"\[ctxfold round (\d+)[]:]", text).group(1)
    assert "sophia_silva_7557" in ctxfold.expand(round_id, store=store)
    with pytest.raises(ctxfold.ConfigurationError, match="max_tokens must be a positive"):
        ctxfold.condense(record["messages"], max_tokens=-1)
