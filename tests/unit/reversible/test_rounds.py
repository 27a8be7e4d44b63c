"""Reversible compaction: the verbatim store, markers, the round block and expand()."""

from __future__ import annotations

import hashlib
import re
from typing import ClassVar

import pytest

import ctxfold
from conftest import example_conversations, shared_conversations
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
from ctxfold.result import is_note
from ctxfold.reversible.expand import with_notes_known
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
    return ctxfold.share_budget(msgs, fraction, COUNTER)


def check_round_trip(compressor: ctxfold.BaseCompressor, msgs: list[Message], budget: int):
    try:
        result = compressor.compress(msgs, budget=budget, counter=COUNTER)
    except ctxfold.BudgetError as exc:  # no room for the round's tag beside what is kept
        assert exc.required > budget
        assert "round's tag" in str(exc) or "the newest unit" in str(exc)
        return None
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
            if result is not None and compressor.overflow == "error":
                assert result.stats.tokens_after <= budget


# auto is reversible by default, so its contract suite already expands every shared
# conversation at several budgets (invariant 7); the others are checked here.
@pytest.mark.full_sweep
@pytest.mark.parametrize("name", [n for n in strategies(None) if n != "auto"])
def test_round_trip_on_the_shared_conversations(name):
    store = MemoryStore()
    compressor = strategies(store)[name]
    refused = 0
    convs = shared_conversations()
    for _, msgs in convs:
        refused += check_round_trip(compressor, msgs, budget_for(msgs, 0.1)) is None
    # the round's line (~16 tokens) and the newest exchange, cut, must fit beside the
    # system prompt: 4 of the 165 conversations leave 25-59 tokens for them at 10%
    assert convs and refused <= 4


def test_a_gap_note_carries_the_round_and_references_within_their_share():
    msgs = next(m for name, m in example_conversations() if "sqlfluff" in name)
    store = MemoryStore()
    budget = COUNTER.count_messages(msgs) // 10
    result = SlidingWindow(reversible=True, store=store).compress(
        msgs, budget=budget, counter=COUNTER
    )
    block = next(
        m for m in result.messages if m.metadata.get("ctxfold", {}).get("round") == result.round_id
    )
    # Right after the system prompt, as the user: the window opens with the assistant.
    assert result.messages[1] is block and block.role == "user"
    left_out = result.decision_counts()["dropped"]
    head = block.text.splitlines()[0]
    assert head.startswith(
        f"[ctxfold round {result.round_id}: {left_out} earlier messages left out"
    )
    assert "Files (read the file):" in block.text
    assert COUNTER.count_text(block.text) <= 0.1 * budget  # the tag and the references
    assert result.stats.tokens_after <= budget
    hidden = ctxfold.expand(result.round_id, store=store)  # the round's id gives them back
    assert "Rule L060" in hidden  # the task, dropped


def test_a_note_carries_the_round_in_its_first_line():
    msgs = next(m for name, m in example_conversations() if "sqlfluff" in name)
    store = MemoryStore()
    result = ctxfold.AutoCompressor(reversible=True, store=store).compress(
        msgs, budget=3000, counter=COUNTER
    )
    notes = [m for m in result.messages if m.metadata.get("ctxfold", {}).get("kind") == "note"]
    assert len(notes) == 1 and result.round_id
    folded = sum(d.reason.startswith("folded") for d in result.trace)
    assert notes[0].text.startswith(
        f"[ctxfold round {result.round_id}: {folded} earlier messages condensed"
    )
    assert sum("[ctxfold round" in m.text for m in result.messages) == 1  # no second block
    hidden = ctxfold.expand(result.round_id, store=store)
    for d in result.trace:
        if d.tokens_after == 0:
            assert msgs[d.index].text[:200] in hidden


def test_a_tight_budget_gets_a_shorter_round_line_and_any_note_role_carries_it():
    msgs = next(m for name, m in example_conversations() if "airline" in name)
    system = COUNTER.count_messages(msgs[:1])
    store = MemoryStore()
    # the full line when it is a small part of the room; in a tight room the bare tag
    # is reserved, and the full line is used only where the note left it room
    for room, heads in ((1200, (": ",)), (200, (": ", "]\n")), (150, (": ", "]\n"))):
        result = ctxfold.AutoCompressor(store=store).compress(
            msgs, budget=system + room, counter=COUNTER
        )
        assert result.round_id and result.stats.tokens_after <= system + room
        line = next(m for m in result.messages if "[ctxfold round" in m.text).text
        assert line.startswith(tuple(f"[ctxfold round {result.round_id}{h}" for h in heads))
        assert list(ctxfold.expand(result, store=store).messages) == msgs
    # a room the newest unit (a call and its result) cannot fit beside the tag: an
    # error, not a request that ends on the note
    with pytest.raises(ctxfold.BudgetError) as caught:
        ctxfold.AutoCompressor(store=store).compress(msgs, budget=system + 18, counter=COUNTER)
    assert caught.value.required > caught.value.budget == system + 18
    as_assistant = ctxfold.AutoCompressor(store=store, note_role="assistant").compress(
        msgs, budget=system + 1200, counter=COUNTER
    )
    note = next(m for m in as_assistant.messages if "[ctxfold round" in m.text)
    assert note.role == "assistant"
    assert list(ctxfold.expand(as_assistant, store=store).messages) == msgs
    quoted = [*msgs, Message("user", f"what is [ctxfold round {as_assistant.round_id}]?")]
    assert ctxfold.expand(quoted, store=store).rounds == 0  # a user's words are not a round


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
    assert result.round_id and elsewhere.missing == (result.round_id,)
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


def test_a_capped_memory_store_drops_the_oldest_entries_and_expand_says_so(caplog):
    store = MemoryStore(max_bytes=2000)
    store.put_many({"a": b"x" * 900})
    store.put_many({"b": b"y" * 900})
    store.put_many({"a": b"ignored"})  # written again: now the newest, value kept
    with caplog.at_level("WARNING", logger="ctxfold"):
        store.put_many({"c": b"w" * 900})
    assert store.get_many(["a", "b", "c"]) == [b"x" * 900, None, b"w" * 900]
    assert store.evicted == 1 and store.nbytes <= 2000
    assert "dropped its oldest" in caplog.text and "sqlite" in caplog.text
    big = MemoryStore(max_bytes=10)
    big.put_many({"k1": b"0" * 50, "k2": b"1" * 50})  # a batch is never cut in part
    assert big.get_many(["k1", "k2"]) == [b"0" * 50, b"1" * 50]

    conversations = [m for _, m in example_conversations()]
    first, second = conversations[0], conversations[1]
    auto = ctxfold.AutoCompressor(reversible=True, store=MemoryStore())
    one = auto.compress(first, budget=budget_for(first, 0.1), counter=COUNTER)
    size = auto.store.nbytes
    tight = MemoryStore(max_bytes=size + 100)  # room for one round, not two
    auto = ctxfold.AutoCompressor(reversible=True, store=tight)
    one = auto.compress(first, budget=budget_for(first, 0.1), counter=COUNTER)
    assert ctxfold.expand(one, store=tight).complete
    auto.compress(second, budget=budget_for(second, 0.1), counter=COUNTER)
    lost = ctxfold.expand(one, store=tight)
    assert not lost.complete and one.round_id in lost.missing
    assert list(lost.messages) == list(one.messages)  # nothing invented

    assert ctxfold.get_store().max_bytes == ctxfold.DEFAULT_MAX_BYTES
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ctxfold.ConfigurationError, match="max_bytes"):
            MemoryStore(max_bytes=bad)  # type: ignore[arg-type]


def test_an_uncapped_memory_store_keeps_everything_and_nothing_the_collector_walks():
    """A session's default store holds every message twice over (its log and its
    rounds): 200,000 entries at 100,000 messages, which a full collection must not
    walk one by one."""
    import gc

    store = MemoryStore()
    store.put_many({f"k{i}": b"v%d" % i for i in range(5000)})
    assert store.put_new({"k1": b"other"}) == ["k1"]
    store.put_many({"k2": b"ignored"})  # existing ids keep their value
    assert store.get_many(["k1", "k2", "k4999", "nope"]) == [b"v1", b"v2", b"v4999", None]
    assert len(store) == 5000 and store.evicted == 0
    assert store.nbytes == sum(len(f"k{i}") + len(b"v%d" % i) for i in range(5000))
    gc.collect()  # a dict of strings and bytes is untracked by a full collection
    assert not gc.is_tracked(store._data)  # an ordered dict would be walked each time


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


def test_ids_are_digits_so_a_tag_or_marker_costs_the_same_tokens_every_time():
    import hashlib

    from ctxfold.reversible.records import entry_id, marker
    from ctxfold.reversible.rounds import round_heads

    ids = [entry_id(hashlib.sha256(str(k).encode()).digest(), 12) for k in range(500)]
    assert all(re.fullmatch(r"\d{12}", i) for i in ids) and len(set(ids)) == 500
    for name in ("o200k_base", "cl100k_base"):
        counter = ctxfold.get_counter(name)
        assert len({counter.count_text(marker(i)) for i in ids}) == 1
        assert len({counter.count_text(round_heads(i, "")[0]) for i in ids}) == 1
    longer = entry_id(hashlib.sha256(b"x").digest(), 24)
    assert re.fullmatch(r"\d{24}", longer) and entry_id(hashlib.sha256(b"x").digest(), 64)


def test_a_store_written_with_hex_ids_still_expands():
    import hashlib

    from ctxfold.reversible.records import encode, message_record

    def hex_id(data: bytes) -> str:  # how versions before the decimal ids named entries
        return hashlib.sha256(data).hexdigest()[:10]

    store = MemoryStore()
    task, output = Message("user", "fix it"), Message("assistant", "the full answer")
    entries = {hex_id(d): d for d in (encode(message_record(task)), encode(message_record(output)))}
    ids = list(entries)
    round_data = encode({"k": "round", "in": ids, "out": [task.fingerprint], "hid": ids[1:]})
    entries[hex_id(round_data)] = round_data
    store.put_many(entries)
    tag = f"[ctxfold round {hex_id(round_data)}: 1 earlier message]"
    back = ctxfold.expand([task, Message("assistant", tag)], store=store)
    assert back.complete and back.rounds == 1 and list(back.messages) == [task, output]
    assert "the full answer" in ctxfold.expand(f"[expand {ids[1]}]", store=store)


def test_a_note_speaking_as_the_user_is_known_again_only_where_the_store_vouches() -> None:
    # Through OpenAI dicts a note in the user role (strict APIs want a user turn after
    # the system prompt) loses its metadata; the store names it as its round's carrier.
    # A user's message that copies the tag, or the note's whole text, elsewhere is text.
    msgs = next(m for _, m in example_conversations() if len(m) == 87)
    store = MemoryStore()
    result = ctxfold.compress(msgs[:20], budget=900, store=store, reversible=True)
    dicts = result.to_openai()
    note = next(d for d in dicts if str(d.get("content", "")).startswith("[ctxfold round "))
    assert note["role"] == "user"  # the task folded: the round's line opens a user turn
    back = ctxfold.from_openai(dicts)
    known = with_notes_known(store, back)
    assert [is_note(m) for m in known] == [is_note(m) or m.text == note["content"] for m in back]
    copied = Message("user", note["content"].split("\n", 1)[0] + "\nFix the login bug.")
    assert not is_note(with_notes_known(store, [copied])[0])
    assert not is_note(with_notes_known(MemoryStore(), [Message("user", note["content"])])[0])


@pytest.mark.parametrize(
    ("strategy", "as_dicts"), [("auto", False), ("auto", True), ("sliding_window", True)]
)
def test_a_history_compressed_every_turn_keeps_one_note_and_expands_whole(strategy, as_dicts):
    # The agent loop: each turn the last output plus the new messages is compressed
    # again. An earlier round's note is history, not a pinned system prompt: notes must
    # not pile up until the newest messages no longer fit.
    msgs = next(m for _, m in example_conversations() if len(m) == 87)  # the coding run
    store = MemoryStore()
    current: list = list(msgs[:2])
    rounds = 0
    for pos in range(2, len(msgs), 8):
        current += msgs[pos : pos + 8]
        result = ctxfold.compress(
            current, budget=2500, strategy=strategy, store=store, reversible=True
        )
        assert result.stats.tokens_after <= 2500
        assert not [w for w in result.warnings if "reversible" in w]  # every round is
        rounds += result.round_id is not None
        current = result.to_openai() if as_dicts else list(result.messages)
        shown = ctxfold.from_openai(current) if as_dicts else current
        notes = [m for m in shown if m.text.startswith("[ctxfold round ")]
        assert len(notes) <= 1, [m.text[:40] for m in notes]  # never a pile of them
        newest = msgs[min(pos + 8, len(msgs)) - 1]
        if COUNTER.count_message(newest) <= 2500 // 4:  # within the recency window
            assert shown[-1] == newest
    back = ctxfold.expand(current, store=store)
    assert back.complete and back.rounds >= 5 and back.rounds == rounds
    assert list(back.messages) == list(msgs)


def test_a_message_is_encoded_once_per_content_and_its_metadata_is_kept():
    from ctxfold.reversible.records import encode, message_bytes, message_record

    plain = ctxfold.Message("user", "Check src/app.py")
    data, digest = message_bytes(plain)
    assert data == encode(message_record(plain)) and message_bytes(plain)[0] is data
    assert digest == hashlib.sha256(data).digest()
    noted = ctxfold.Message("user", "Check src/app.py", metadata={"ctxfold": {"what": "x"}})
    assert message_bytes(noted)[0] == encode(message_record(noted)) != data


def test_a_strategy_whose_output_does_not_shrink_a_little_is_given_the_round_s_room_at_once():
    """The round's marks cost what they cost: when an output and its marks are over,
    the strategy is asked again with that much less room, not a few tokens less five
    times over (an output that shrinks only in steps once ended in BudgetError at a
    budget above one that fit: 104-110 tokens here, where 60-102 fit)."""
    from dataclasses import replace

    from ctxfold.contract import Compaction, Conversation
    from ctxfold.result import Decision

    class Steps(ctxfold.BaseCompressor):
        """The system prompt and the newest six messages cut short (each gets a
        marker), or the newest two when six are over the room."""

        name = "steps"
        reversible_default = True
        lists_identifiers = True  # a small first reserve
        calls: ClassVar[list[int]] = []

        def compact(self, conv: Conversation) -> Compaction:
            self.calls.append(conv.budget)
            n = len(conv.messages)
            for keep in (6, 2):
                idx = [0, *range(n - keep, n)]
                out = [conv.messages[0]]
                out += [
                    replace(conv.messages[i], content=conv.messages[i].text[:8]) for i in idx[1:]
                ]
                if conv.counter.count_messages(out) <= conv.budget:
                    break
            trace = [
                Decision(
                    i,
                    "compressed" if i in idx[1:] else "kept" if i == 0 else "summarized",
                    "cut",
                    t,
                    t if i in idx else 0,
                    self.name,
                )
                for i, t in enumerate(conv.tokens)
            ]
            return Compaction(out, trace, {})

    msgs = [Message("system", "Be brief.")]
    msgs += [Message("user" if k % 2 == 0 else "assistant", f"Turn {k}. " * 40) for k in range(40)]
    for budget in range(60, 140, 2):
        Steps.calls = []
        result = Steps(store=MemoryStore()).compress(msgs, budget=budget, counter=COUNTER)
        assert result.stats.tokens_after <= budget
        assert len(Steps.calls) <= 2, (budget, Steps.calls)
