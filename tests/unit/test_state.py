"""The process's memo tables: least recent first out, safe across threads, and (of
strings, numbers and tuples of them) never walked by the garbage collector."""

from __future__ import annotations

import gc
import threading

import pytest

import ctxfold
from ctxfold import _state
from ctxfold._state import LRU, OwnMemo, own_memo, owning
from ctxfold.session import Session
from tests.conftest import example_conversations


def test_a_table_forgets_the_least_recently_used_an_eighth_at_a_time() -> None:
    table: LRU[str] = LRU(16)
    for k in range(16):
        table.put(k, f"v{k}")
    assert table.get(0) == "v0"  # now the most recent
    table.put(16, "v16")  # over: 1 and the next two go (17 - 16 + 16 // 8 = 3)
    assert len(table) == 14
    assert [table.get(k) for k in (1, 2, 3)] == [None, None, None]
    assert table.get(0) == "v0" and table.get(4) == "v4" and table.get(16) == "v16"
    table.reserve(100)
    for k in range(100, 180):
        table.put(k, "x")
    assert len(table) == 94  # nothing forgotten below the new size
    table.clear()
    assert len(table) == 0 and table.get(0) is None


def test_a_table_makes_a_missing_value_once_even_none() -> None:
    made: list[str] = []

    def kind(token: str) -> str | None:
        made.append(token)
        return None if token.isalpha() else "id"

    table: LRU[str | None] = LRU(8)
    assert [table.cached(t, kind, t) for t in ("word", "HAT039", "word", "HAT039")] == [
        None,
        "id",
        None,
        "id",
    ]
    assert made == ["word", "HAT039"]  # a None made once is kept, not made again


def test_a_table_looks_up_many_keys_and_makes_the_missing_in_one_call() -> None:
    calls: list[list[str]] = []

    def lengths(words: list[str]) -> list[int]:
        calls.append(words)
        return [len(w) for w in words]

    table: LRU[int] = LRU(8)
    table.put("seen", 99)  # a kept value is served, not made again
    assert table.map(["ab", "seen", "abc", "ab"], lengths) == [2, 99, 3, 2]
    assert calls == [["ab", "abc"]]  # each missing key once, in first-seen order
    assert table.map(["abc", "ab"], lengths) == [3, 2] and len(calls) == 1
    assert table.map([], lengths) == [] and len(calls) == 1
    many = [f"w{k}" for k in range(20)]  # more than the table holds: all served
    assert table.map(many, lengths) == [len(w) for w in many]
    assert len(table) <= 8


def test_a_bulk_look_up_is_whole_though_another_thread_clears_the_table() -> None:
    table: LRU[int] = LRU(8)
    table.put("seen", 4)
    calls: list[list[str]] = []

    def lengths(words: list[str]) -> list[int]:
        calls.append(words)
        table.clear()  # as another thread's eviction would, while this one makes
        return [len(w) for w in words]

    assert table.map(["seen", "new", "seen"], lengths) == [4, 3, 4]
    assert calls == [["new"]]  # what was read before is served, the missing made once
    assert table.map(["seen"], lengths) == [4]  # cleared meanwhile: made again
    assert calls == [["new"], ["seen"]]


def test_new_entries_wait_apart_so_a_settled_table_is_not_walked_again() -> None:
    """An entry the collector still tracks waits apart from the main table (up to a
    quarter of the table's size): a long session's memos, once a full collection
    has untracked them, are not walked again in every full collection because of
    the few entries a render adds."""
    table: LRU[tuple[str, int]] = LRU(100_000)
    gc.disable()  # as in a call: no collection sees the new entries yet
    try:
        for k in range(3_000):
            table.put(f"k{k}", ("v", k))
        assert not gc.is_tracked(table._data)  # all wait apart, still tracked
        gc.collect()  # the collector sees them: untracked now
        for k in range(3_000, 4_096):  # the fresh dict doubles: its settled entries move
            table.put(f"k{k}", ("v", k))
        assert len(table._data) == 3_000 and len(table) == 4_096
        assert not gc.is_tracked(table._data)  # only untracked entries went in
        assert table.get("k0") == ("v", 0) and table.get("k4095") == ("v", 4095)
        assert table.map(["k1", "k4000", "new"], lambda ks: [("m", len(ks))]) == [
            ("v", 1),
            ("v", 4000),
            ("m", 1),
        ]
    finally:
        gc.enable()


def test_a_table_of_values_the_collector_keeps_tracking_stays_bounded() -> None:
    table: LRU[list[int]] = LRU(64)  # lists: tracked for good
    for k in range(1_000):
        table.put(k, [k])
        assert len(table) <= 64 and len(table._fresh) <= 64 // 4 + 1
    assert table.get(999) == [999]


def test_a_collection_while_fresh_entries_move_cannot_break_the_move() -> None:
    """Moving fresh entries makes no object a collection could start on, so no other
    thread's put (here: a collector's callback, which runs Python code as another
    thread might) changes what is being walked."""
    table: LRU[list[int]] = LRU(100_000)
    for k in range(2_000):
        table.put(("k", k), [k])  # tracked: they stay fresh
    added = [0]

    def another_put(phase: str, _: dict[str, int]) -> None:
        if phase == "stop":
            added[0] += 1
            table._fresh[("other", added[0])] = [0]

    threshold = gc.get_threshold()
    gc.callbacks.append(another_put)
    gc.set_threshold(100)
    try:
        table._settle()
        for k in range(2_000, 4_000):
            table.put(("k", k), [k])
    finally:
        gc.callbacks.remove(another_put)
        gc.set_threshold(*threshold)
    assert table.get(("k", 3_999)) == [3_999]


def test_a_table_of_no_entries_keeps_none() -> None:
    table: LRU[list[int]] = LRU(0)
    table.put("a", [1])  # tracked: it would stay fresh
    assert len(table) == 0 and table.get("a") is None


def test_with_the_collector_off_a_put_rarely_looks_through_the_fresh_entries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settled: list[int] = []
    settle = LRU._settle

    def counted(self: LRU[tuple[int]]) -> None:
        settled.append(len(self._fresh))
        settle(self)

    monkeypatch.setattr(LRU, "_settle", counted)
    table: LRU[tuple[int]] = LRU(4_096)  # at most 1,024 fresh entries
    gc.disable()  # as a program may: nothing is ever untracked
    try:
        for k in range(20_000):
            table.put(k, (k,))
    finally:
        gc.enable()
    assert len(table) <= 4_096 and table.get(19_999) == (19_999,)
    # Each look is at most 1,025 entries and comes after 256 puts or more (the fresh
    # dict half emptied, or an eighth of the table forgotten), not on every put.
    assert len(settled) <= 20_000 // 256 + 8 and max(settled) <= 1_025


def test_threads_sharing_a_table_lose_nothing_but_old_entries() -> None:
    table: LRU[tuple[int, int]] = LRU(64)
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for k in range(5_000):
                table.put((t, k), (t, k))
                hit = table.get((t, k - 3))
                assert hit is None or hit == (t, k - 3)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(table) <= 64


def test_the_memos_a_compression_and_a_session_fill_are_not_walked() -> None:
    """Every memo table holds strings, numbers and tuples of them at most two deep,
    so the collections of the two young generations stop tracking each entry: none
    reaches the oldest generation, whose full collections are a long-running
    process's pauses, and once a full collection has looked at a table it is not
    walked at all (until a new entry comes)."""
    ctxfold.clear_caches()
    gc.collect()
    gc.disable()  # every entry is made in the youngest generation, as a call makes it
    try:
        for _, msgs in example_conversations():
            budget = ctxfold.share_budget(msgs, 0.25, ctxfold.get_counter("o200k_base"))
            ctxfold.compress(msgs, budget=budget)
            session = Session(budget=budget, recall_share=0.3)  # recall on, agent run or not
            session.add(msgs)
            session.render(query=msgs[-1].text[:200] or "what was decided?")
        tables = [
            c.__self__ for c in _state._clearers if isinstance(getattr(c, "__self__", None), LRU)
        ]
        assert len(tables) >= 6
        filled = [t for t in tables if len(t)]
        assert len(filled) >= 5
        gc.collect(0)
        gc.collect(1)
        entries = [e for t in filled for e in (*t._data.items(), *t._fresh.items())]
        deep = [(k, v) for k, v in entries if gc.is_tracked(v)]
        assert not deep, deep[:3]
        assert not [k for k, _ in entries if gc.is_tracked(k)]
    finally:
        gc.enable()
    gc.collect()
    assert not [t for t in filled if gc.is_tracked(t._data)]


def test_a_call_runs_with_the_collector_paused_and_restores_it() -> None:
    """compress and a session's render pause the cyclic collector while they run (a
    hook inside the call sees it off) and enable it again after."""
    _, msgs = example_conversations()[0]
    seen: list[bool] = []
    off = ctxfold.on("compaction_completed", lambda _: seen.append(gc.isenabled()))
    try:
        assert gc.isenabled()
        ctxfold.compress(msgs, budget=2_000)
        session = Session(budget=2_000)
        session.add(msgs)
        session.render()
        assert seen == [False, False] and gc.isenabled()
        ctxfold.pause_gc(False)  # opted out: left alone
        ctxfold.compress(msgs, budget=2_000)
        assert seen[-1] is True
        gc.disable()  # the program's own choice stands
        ctxfold.pause_gc(True)
        ctxfold.compress(msgs, budget=2_000)
        assert seen[-1] is False and not gc.isenabled()
    finally:
        off()
        ctxfold.pause_gc(True)
        gc.enable()


def test_calls_on_many_threads_share_one_pause() -> None:
    """The collector comes back when the last of overlapping calls ends, not the
    first, and an error inside a call still ends its pause."""
    inside = threading.Barrier(4)
    first_left = threading.Event()
    states: list[bool] = []

    def call(k: int) -> None:
        with _state.collector_paused():
            inside.wait()  # all four inside at once
            if k:
                first_left.wait()
                states.append(gc.isenabled())  # the others, after the first left
        if not k:
            first_left.set()

    threads = [threading.Thread(target=call, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert states == [False] * 3 and gc.isenabled()
    try:
        with _state.collector_paused(), _state.collector_paused():
            raise ValueError("boom")
    except ValueError:
        pass
    assert gc.isenabled()


def test_an_own_memo_keeps_what_a_turn_asked_for_and_drops_the_rest() -> None:
    memo = OwnMemo()
    memo.put("a", 1)
    memo.put("b", 2)
    memo.turn()
    assert memo.get("a") == 1  # asked for in this turn: kept into the next
    memo.put("c", 3)
    memo.turn()
    assert memo.get("b") is None  # not asked for in a whole turn: dropped
    assert (memo.get("a"), memo.get("c"), len(memo)) == (1, 3, 2)
    assert memo.get("missing") is None


def test_owning_makes_a_memo_current_for_the_block_and_this_thread_only() -> None:
    memo, inner = OwnMemo(), OwnMemo()
    seen: list[OwnMemo | None] = []
    assert own_memo() is None
    with owning(memo):
        assert own_memo() is memo
        thread = threading.Thread(target=lambda: seen.append(own_memo()))
        thread.start()
        thread.join()
        with pytest.raises(ValueError), owning(inner):
            assert own_memo() is inner
            raise ValueError
        assert own_memo() is memo
    assert own_memo() is None and seen == [None]
