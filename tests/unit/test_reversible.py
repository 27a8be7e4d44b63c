"""Reversible compaction: the verbatim store, markers, the round block and expand()."""

from __future__ import annotations

import re

import pytest

import ctxfold
from conftest import DATA_DIR, SKIP_NO_DATA, example_conversations
from ctxfold import (
    ExpandError,
    HierarchicalCompressor,
    HybridCompressor,
    MemoryStore,
    Message,
    SemanticCompressor,
    SlidingWindow,
    SQLiteStore,
    SummarizingCompressor,
    get_counter,
)
from ctxfold.testing import load_conversations
from ctxfold.testing.doubles import FakeEmbedder, FakeSummarizer

COUNTER = get_counter("o200k_base")
MARKER = re.compile(r"\[expand ([0-9a-f]{10,64})\]")


def strategies(store: object) -> dict[str, ctxfold.BaseCompressor]:
    opts = {"reversible": True, "store": store}
    return {
        "auto": ctxfold.AutoCompressor(reversible=True, store=store),
        "sliding_window": SlidingWindow(overflow="best_effort", **opts),
        "summarize": SummarizingCompressor(
            summarizer=FakeSummarizer(), cache=False, overflow="best_effort", **opts
        ),
        "semantic": SemanticCompressor(
            embedder=FakeEmbedder(), cache=False, overflow="best_effort", **opts
        ),
        "hierarchical": HierarchicalCompressor(overflow="best_effort", **opts),
        "hybrid": HybridCompressor(
            [SemanticCompressor(embedder=FakeEmbedder(), cache=False, fit="none"), "auto"],
            **opts,
        ),
    }


def budget_for(msgs: list[Message], fraction: float) -> int:
    """The system prompt plus ``fraction`` of the rest, as the benchmark does."""
    system = sum(COUNTER.count_message(m) for m in msgs if m.role == "system")
    return int(system + 3 + fraction * (COUNTER.count_messages(msgs) - system - 3))


def check_round_trip(compressor: ctxfold.BaseCompressor, msgs: list[Message], budget: int):
    result = compressor.compress(msgs, budget=budget, counter=COUNTER)
    if any(w.startswith("reversible:") for w in result.warnings):
        assert "[ctxfold round" not in "\n".join(m.text for m in result.messages)
        return result  # no room for the block beside the pinned messages, and it says so
    back = ctxfold.expand(result, store=compressor.store)
    assert back.complete and back.to_openai() == ctxfold.to_openai(msgs)
    assert list(back.messages) == msgs
    if result.messages != tuple(msgs):
        assert back.rounds == 1
        text = "\n".join(m.text for m in result.messages)
        for entry in MARKER.findall(text):  # every marker can be expanded
            assert ctxfold.expand(entry, store=compressor.store)
    return result


@pytest.mark.parametrize("name", list(strategies(None)))
def test_round_trip_on_the_examples_for_every_strategy(name):
    store = MemoryStore()
    compressor = strategies(store)[name]
    for _, msgs in example_conversations():
        for fraction in (0.25, 0.1):
            budget = budget_for(msgs, fraction)
            result = check_round_trip(compressor, msgs, budget)
            if getattr(compressor, "overflow", "error") == "error":
                assert result.stats.tokens_after <= budget


@pytest.mark.parametrize("name", list(strategies(None)))
def test_round_trip_on_every_shared_conversation(name):
    if DATA_DIR is None:
        pytest.skip(SKIP_NO_DATA)
    store = MemoryStore()
    compressor = strategies(store)[name]
    plain = total = 0
    for path in sorted(DATA_DIR.glob("*.jsonl")):
        for _, msgs in load_conversations(path):
            result = check_round_trip(compressor, msgs, budget_for(msgs, 0.1))
            total += 1
            plain += any(w.startswith("reversible:") for w in result.warnings)
    assert total == 165 and plain <= 2  # a block needs ~40 tokens beside the system prompt


def test_the_block_carries_the_round_the_omitted_span_and_references_within_its_share():
    msgs = next(m for name, m in example_conversations() if "sqlfluff" in name)
    store = MemoryStore()
    budget = COUNTER.count_messages(msgs) // 10
    result = SlidingWindow(reversible=True, store=store).compress(
        msgs, budget=budget, counter=COUNTER
    )
    block = next(
        m for m in result.messages if m.metadata.get("ctxfold", {}).get("kind") == "references"
    )
    assert result.messages[1] is block  # right after the system prompt
    assert block.text.startswith("[ctxfold round ") and "Omitted: " in block.text
    assert "Files (read the file):" in block.text
    refs = block.text.split("[ctxfold references", 1)[1]
    assert COUNTER.count_text(refs) <= 0.1 * budget
    assert result.stats.tokens_after <= budget
    omitted = MARKER.findall(block.text.splitlines()[1])[0]
    assert "Rule L060" in ctxfold.expand(omitted, store=store)  # the task, dropped


def test_nested_rounds_expand_back_to_the_very_first_history():
    msgs = next(m for name, m in example_conversations() if "sqlfluff" in name)
    store = MemoryStore()
    auto = ctxfold.AutoCompressor(reversible=True, store=store)
    first = auto.compress(msgs[:60], budget=2500, counter=COUNTER)
    grown = [*first.messages, *msgs[60:]]
    second = auto.compress(grown, budget=2500, counter=COUNTER)
    back = ctxfold.expand(second, store=store)
    assert back.complete and back.rounds == 2 and list(back.messages) == msgs
    one = ctxfold.uncompress(first, store=store)
    assert list(one.messages) == msgs[:60]


def test_missing_entries_are_reported_not_hidden():
    msgs = next(m for name, m in example_conversations() if "sqlfluff" in name)
    result = ctxfold.AutoCompressor(reversible=True, store=MemoryStore()).compress(
        msgs, budget=3000, counter=COUNTER
    )
    elsewhere = ctxfold.expand(result, store=MemoryStore())
    assert not elsewhere.complete and elsewhere.rounds == 0
    assert list(elsewhere.messages) == list(result.messages)  # nothing invented
    round_id = re.search(r"\[ctxfold round ([0-9a-f]+)\]", result.messages[1].text)
    assert round_id and elsewhere.missing == (round_id.group(1),)
    with pytest.raises(ExpandError, match="nothing is stored"):
        ctxfold.expand("0123456789", store=MemoryStore())
    with pytest.raises(ExpandError):
        ctxfold.AutoCompressor(reversible=True, store=MemoryStore()).expand(result)


def test_a_history_that_fits_is_not_touched_and_writes_nothing():
    store = MemoryStore()
    msgs = [Message("user", "hi"), Message("assistant", "hello")]
    result = ctxfold.AutoCompressor(reversible=True, store=store).compress(msgs, budget=1000)
    assert list(result.messages) == msgs and len(store) == 0


def test_the_same_history_twice_stores_each_original_once():
    msgs = next(m for name, m in example_conversations() if "sqlfluff" in name)
    store = MemoryStore()
    auto = ctxfold.AutoCompressor(reversible=True, store=store)
    a = auto.compress(msgs, budget=3000, counter=COUNTER)
    size = len(store)
    b = auto.compress(msgs, budget=3000, counter=COUNTER)
    assert a.messages == b.messages and len(store) == size
    assert size >= len(set(msgs))


def test_reversible_off_leaves_no_markers():
    msgs = next(m for name, m in example_conversations() if "sqlfluff" in name)
    plain = ctxfold.AutoCompressor(reversible=False).compress(msgs, budget=3000)
    assert not MARKER.search("\n".join(m.text for m in plain.messages))
    assert "[ctxfold round" not in "\n".join(m.text for m in plain.messages)
    with pytest.raises(ctxfold.ConfigurationError, match="reversible"):
        ctxfold.AutoCompressor(reversible="yes")  # type: ignore[arg-type]
    with pytest.raises(ctxfold.ConfigurationError, match="store"):
        ctxfold.AutoCompressor(reversible=True, store="ftp://nowhere")


# ------------------------------------------------------------------------ backends


def test_sqlite_store_persists_and_serves_another_process(tmp_path):
    path = tmp_path / "store.db"
    msgs = next(m for name, m in example_conversations() if "sqlfluff" in name)
    with SQLiteStore(path) as store:
        result = ctxfold.AutoCompressor(reversible=True, store=store).compress(msgs, budget=3000)
    with SQLiteStore(path) as reopened:
        back = ctxfold.expand(result, store=reopened)
        assert back.complete and list(back.messages) == msgs
    assert ctxfold.get_store(f"sqlite:///{path}").get_many(["nope"]) == [None]
    with pytest.raises(ctxfold.ConfigurationError, match="does not exist"):
        SQLiteStore(tmp_path / "no" / "such.db")


def test_stores_never_overwrite_and_write_batches_whole(tmp_path):
    for store in (MemoryStore(), SQLiteStore(tmp_path / "s.db")):
        store.put_many({"a": b"1", "b": b"2"})
        store.put_many({"a": b"other", "c": b"3"})
        assert store.get_many(["a", "b", "c", "d"]) == [b"1", b"2", b"3", None]
        with pytest.raises(ctxfold.ConfigurationError, match="bytes"):
            store.put_many({"e": b"5", "f": "six"})  # type: ignore[dict-item]
        assert store.get_many(["e"]) == [None]  # nothing of a bad batch


def test_redis_store_round_trip(redis_url, redis_prefix):
    assert isinstance(ctxfold.get_store(redis_url), ctxfold.RedisStore)
    store = ctxfold.RedisStore(redis_url, prefix=redis_prefix)
    msgs = next(m for name, m in example_conversations() if "sqlfluff" in name)
    result = ctxfold.AutoCompressor(reversible=True, store=store).compress(msgs, budget=3000)
    back = ctxfold.expand(result, store=ctxfold.RedisStore(redis_url, prefix=redis_prefix))
    assert back.complete and list(back.messages) == msgs
    store.put_many({"k-redis-test": b"1"})
    store.put_many({"k-redis-test": b"2"})
    assert store.get_many(["k-redis-test"]) == [b"1"]
    store.close()


def test_store_specs():
    assert ctxfold.get_store() is ctxfold.get_store(None)
    assert isinstance(ctxfold.get_store("memory"), MemoryStore)
    with pytest.raises(ctxfold.ConfigurationError, match="unknown store spec"):
        ctxfold.get_store("postgres://x")
    with pytest.raises(ctxfold.ConfigurationError, match="store must be"):
        ctxfold.get_store(42)  # type: ignore[arg-type]
