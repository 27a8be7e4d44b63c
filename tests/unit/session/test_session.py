"""ctxfold.Session: renders that fit and extend each other, a record that survives a
restart in SQLite and Redis, and sessions that never see each other."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import ctxfold
from ctxfold import BudgetError, ConfigurationError, ExpandError, Message, to_openai
from ctxfold._state import LRU, OwnMemo, own_memo
from ctxfold.result import RECALL_KEY, is_note, without_recall
from ctxfold.session import Session
from ctxfold.storage import MemoryStore, RedisStore, SQLiteStore
from ctxfold.strategies.auto.analysis import Analyzer
from ctxfold.testing import check_continuation, check_tool_integrity
from ctxfold.validity import turn_order_problems
from tests.conftest import example_conversations, examples_and_shared

REPO = Path(__file__).resolve().parents[3]
COUNTER = ctxfold.TiktokenCounter()


def _conversations() -> list[tuple[str, list[Message]]]:
    return examples_and_shared(4)


def _drive(session: Session, msgs: list[Message], budget: int) -> list[ctxfold.CompressionResult]:
    """Render before every assistant message, as an agent loop does, then add it."""
    renders = []
    for m in msgs:
        if m.role == "assistant":
            renders.append(session.render(budget))
        session.add(m)
    return renders


def _replay(session: Session, msgs: list[Message], budget: int) -> list[ctxfold.CompressionResult]:
    """:func:`_drive`, then one last render."""
    return [*_drive(session, msgs, budget), session.render(budget)]


def _wire(result: ctxfold.CompressionResult) -> str:
    return json.dumps(result.to_openai(), sort_keys=True)


@pytest.mark.parametrize("name,msgs", _conversations(), ids=lambda x: str(x)[:40])
def test_every_render_fits_keeps_tool_calls_whole_ends_on_the_newest_and_extends_the_last(
    name: str, msgs: list[Message]
) -> None:
    budget = 3000
    session = Session(budget=budget, store=MemoryStore())
    renders = _replay(session, msgs, budget)
    counter = ctxfold.get_counter("o200k_base")
    extended = 0
    for k, r in enumerate(renders):
        out = list(r.messages)
        assert r.stats.tokens_after == counter.count_messages(out) <= budget
        check_tool_integrity(msgs, out)
        check_continuation(msgs[: r.stats.messages_before], out)  # where the agent is
        if not turn_order_problems(msgs[: r.stats.messages_before]):
            assert not turn_order_problems(out)  # a request strict chat APIs accept
        assert [d.index for d in r.trace] == list(range(r.stats.messages_before))
        if k and r.round_id == renders[k - 1].round_id:
            # Byte for byte up to the previous render's recall block, for the cache;
            # the view without its block extends the last one's.
            prev, cur = renders[k - 1].messages, r.messages
            at = next((j for j, m in enumerate(prev) if RECALL_KEY in m.metadata), len(prev))
            assert to_openai(cur[:at]) == to_openai(prev[:at])
            view = to_openai(without_recall(prev))
            assert to_openai(without_recall(cur))[: len(view)] == view
            extended += 1
    assert session.history == tuple(msgs)  # the record is never altered
    assert extended >= (len(renders) - 1) / 2  # compactions are the exception
    # Every round is reversible: the last render expands to the whole history.
    back = ctxfold.expand(renders[-1], store=session.expand_tool().store)
    assert back.complete and ctxfold.to_openai(back.messages) == ctxfold.to_openai(msgs)


def _asking_chat() -> list[Message]:
    """A long chat with a fact early on, ending on a question about it."""
    msgs = [Message("system", "You are Ben, chatting with Ana.")]
    for k in range(60):
        said = "My locker code at the gym is 4471." if k == 3 else f"Turn {k}: the weather, " * 6
        msgs += [Message("user", said), Message("assistant", f"Noted, turn {k}. " * 5)]
    return [*msgs, Message("user", "What is my gym locker code?")]


@pytest.mark.parametrize(
    "name,msgs",
    [*example_conversations(), ("asking chat", _asking_chat())],
    ids=lambda x: str(x)[:30] if isinstance(x, str) else "",
)
def test_a_first_render_not_cache_stable_is_what_compress_returns(
    name: str, msgs: list[Message]
) -> None:
    """One pipeline: the same history gives the same view, decisions and savings
    through ``compress`` and a session's first render (a session that is not
    cache-stable; a cache-stable one compacts lower, to its low-water mark)."""
    # Where a render happens: no call waiting for its results (a session keeps one out
    # of its rounds, so that results arriving later join it).
    ends = [k for k in range(1, len(msgs) + 1) if not msgs[k - 1].tool_calls]
    recalls = False
    for end in (ends[len(ends) // 2], ends[-1]):
        history = msgs[:end]
        for budget in (1500, 3000):
            want = ctxfold.compress(history, budget=budget)
            session = Session(budget=budget, store=MemoryStore(), cache_stable=False)
            session.add(history)
            got = session.render()
            assert _wire(got) == _wire(want), (end, budget)
            assert [(d.action, d.reason, d.tokens_after) for d in got.trace] == [
                (d.action, d.reason, d.tokens_after) for d in want.trace
            ]
            assert got.stats.savings == want.stats.savings
            assert got.stats.tokens_after == want.stats.tokens_after
            recalls |= any(RECALL_KEY in m.metadata for m in want.messages)
    assert recalls or name != "asking chat"


def test_compaction_goes_down_to_the_low_water_mark() -> None:
    _, msgs = example_conversations()[1]
    budget = 4000
    session = Session(budget=budget, store=MemoryStore(), low_water=0.5)
    renders = _drive(session, msgs, budget)
    rounds = [k for k in range(1, len(renders)) if renders[k].round_id != renders[k - 1].round_id]
    assert len(rounds) >= 2
    for k in rounds:  # rendered before an assistant message: no call is waiting
        assert renders[k].stats.tokens_after <= 0.5 * budget
        assert renders[k - 1].stats.tokens_after <= budget


def test_not_cache_stable_fits_tighter_and_compacts_more_often() -> None:
    _, msgs = example_conversations()[-1]
    budget = 2500
    stable = Session(budget=budget, store=MemoryStore())
    tight = Session(budget=budget, store=MemoryStore(), cache_stable=False)
    a, b = _replay(stable, msgs, budget), _replay(tight, msgs, budget)
    rounds_a = len({r.round_id for r in a} - {None})
    rounds_b = len({r.round_id for r in b} - {None})
    assert rounds_b > rounds_a
    used_a = sum(r.stats.tokens_after for r in a)
    used_b = sum(r.stats.tokens_after for r in b)
    assert used_b > used_a  # the whole budget used on every turn


def test_a_call_waiting_for_its_results_stays_whole_across_a_compaction() -> None:
    _, msgs = example_conversations()[-1]
    call_at = max(i for i, m in enumerate(msgs) if m.tool_calls and i > len(msgs) // 2)
    session = Session(budget=2500, store=MemoryStore())
    session.add(msgs[: call_at + 1])  # the call is in, its results are not
    first = session.render()
    assert first.messages[-1] == msgs[call_at]
    session.add(msgs[call_at + 1 :])
    check_tool_integrity(msgs, list(session.render().messages))


def test_async_twins_give_the_sync_results() -> None:
    _, msgs = example_conversations()[0]
    sync, asyn = (
        Session(budget=2000, store=MemoryStore()),
        Session(budget=2000, store=MemoryStore()),
    )

    async def run() -> list[str]:
        out = []
        for m in msgs:
            if m.role == "assistant":
                out.append(_wire(await asyn.arender()))
            await asyn.aadd(m)
        return out

    expected = []
    for m in msgs:
        if m.role == "assistant":
            expected.append(_wire(sync.render()))
        sync.add(m)
    assert asyncio.run(run()) == expected


def test_two_sessions_in_one_store_never_see_each_other() -> None:
    store = MemoryStore()
    (_, a_msgs), (_, b_msgs) = example_conversations()[:2]
    a = Session("a", budget=1500, store=store)
    b = Session("a:0", budget=1500, store=store)  # an id that extends the other's
    ra, rb = _replay(a, a_msgs, 1500)[-1], _replay(b, b_msgs, 1500)[-1]
    assert Session.load("a", store=store).history == tuple(a_msgs)
    assert Session.load("a:0", store=store).history == tuple(b_msgs)
    assert ra.round_id and rb.round_id
    assert a.expand(ra.round_id)
    with pytest.raises(ExpandError):
        b.expand(ra.round_id)
    with pytest.raises(ExpandError):
        a.expand(rb.round_id)


def test_clear_starts_over_and_keeps_the_old_record() -> None:
    store = MemoryStore()
    _, msgs = example_conversations()[0]
    s = Session("c", budget=1500, store=store)
    last = _replay(s, msgs, 1500)[-1]
    s.clear()
    assert s.history == () and s.render().messages == ()
    s.add({"role": "user", "content": "hello again"})
    again = Session.load("c", store=store, budget=1500)
    assert [m.text for m in again.history] == ["hello again"]
    assert last.round_id and again.expand(last.round_id)  # nothing is lost


def test_settings_are_checked_when_the_session_is_made() -> None:
    with pytest.raises(ConfigurationError, match="low_water"):
        Session(low_water=0.9, high_water=0.5)
    with pytest.raises(ConfigurationError, match="budget"):
        Session(budget=-1)
    with pytest.raises(ConfigurationError, match="cache_stable"):
        Session(cache_stable="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="session_id"):
        Session("")
    with pytest.raises(ConfigurationError, match="budget"):
        Session(store=MemoryStore()).render()
    with pytest.raises(ConfigurationError):
        Session(strategy="no_such_strategy")


def test_a_system_prompt_over_the_budget_is_a_budget_error() -> None:
    s = Session(budget=200, store=MemoryStore())
    s.add([{"role": "system", "content": "rule " * 400}, {"role": "user", "content": "hi"}])
    with pytest.raises(BudgetError) as info:
        s.render()
    assert info.value.budget == 200 and info.value.required > 200
    assert len(s.history) == 2  # nothing is lost


def _store_roundtrip(store_spec: object, make_store) -> None:  # type: ignore[no-untyped-def]
    """A session reopened from a persistent store renders what an uninterrupted one
    renders (in memory: the stored originals' ids, keyed in a persistent store, aside)
    and keeps its ids across the reopening."""
    _, msgs = example_conversations()[-1]
    half = len(msgs) // 2
    whole = Session("s", budget=2000, store=MemoryStore())
    first = Session("s", budget=2000, store=make_store())
    last = ""
    for m in msgs[:half]:
        if m.role == "assistant":
            last = _wire(first.render())
            assert _unkeyed(last) == _unkeyed(_wire(whole.render()))
        first.add(m)
        whole.add(m)
    again = Session.load("s", store=make_store(), budget=2000)
    assert _wire(Session.load("s", store=make_store(), budget=2000).render()).startswith(
        last[:-2]
    )  # the same prefix, ids and all
    for m in msgs[half:]:
        if m.role == "assistant":
            assert _unkeyed(_wire(again.render())) == _unkeyed(_wire(whole.render()))
        again.add(m)
        whole.add(m)
    assert _unkeyed(_wire(again.render())) == _unkeyed(_wire(whole.render()))
    assert again.history == tuple(msgs)
    assert ctxfold.expand(again.render(), store=again.expand_tool().store).complete


def _unkeyed(wire: str) -> str:
    """A render with the ids of stored originals blanked (a persistent store keys them)."""
    return re.sub(r"(round |expand )\d{12}", r"\1<id>", wire)


def test_a_session_in_sqlite_renders_after_reopening_as_if_uninterrupted(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    _store_roundtrip(path, lambda: SQLiteStore(path))


def test_a_session_in_redis_renders_after_reopening_as_if_uninterrupted(
    redis_url: str, redis_prefix: str
) -> None:
    _store_roundtrip(redis_url, lambda: RedisStore(redis_url, prefix=redis_prefix))


_KILLED = """
import os, signal, sys
from ctxfold.session import Session
from tests.conftest import example_conversations
_, msgs = example_conversations()[-1]
s = Session("agent", budget=2000, store=sys.argv[1])
for m in msgs[: len(msgs) // 2]:
    if m.role == "assistant":
        s.render()
    s.add(m)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_process_killed_mid_conversation_resumes_where_it_stopped(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'agent.db'}"
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_KILLED), url],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    _, msgs = example_conversations()[-1]
    whole = Session(budget=2000, store=MemoryStore())
    _drive(whole, msgs[: len(msgs) // 2], 2000)
    resumed = Session.load("agent", store=url, budget=2000)
    assert resumed.history == tuple(msgs[: len(msgs) // 2])
    for m in msgs[len(msgs) // 2 :]:
        if m.role == "assistant":
            assert _unkeyed(_wire(resumed.render())) == _unkeyed(_wire(whole.render()))
        resumed.add(m)
        whole.add(m)


def test_a_render_without_compaction_does_work_for_the_new_messages_only() -> None:
    class Counting(ctxfold.TiktokenCounter):
        calls = 0

        def count_message(self, message: Message) -> int:
            Counting.calls += 1
            return super().count_message(message)

    _, msgs = example_conversations()[1]
    session = Session(budget=100_000, store=MemoryStore(), counter=Counting("o200k_base"))
    session.add(msgs[:-1])
    session.render()
    Counting.calls = 0
    session.add(msgs[-1])
    result = session.render()
    assert Counting.calls == 1  # the new message, once; nothing of the history again
    assert result.messages == tuple(msgs)


def test_working_ahead_only_fills_caches_the_renders_are_the_same() -> None:
    _, msgs = example_conversations()[-1]
    warm = _drive(Session(budget=2000, store=MemoryStore()), msgs, 2000)
    cold_session = Session(budget=2000, store=MemoryStore())
    cold = []
    for m in msgs:
        if m.role == "assistant":
            ctxfold.clear_caches()  # whatever the session prepared is gone
            cold.append(cold_session.render())
        cold_session.add(m)
    assert [_wire(r) for r in cold] == [_wire(r) for r in warm]


def test_a_compaction_finds_the_note_it_folds_again_analysed_ahead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    analyse, compact = Analyzer._analyse, ctxfold.AutoCompressor.compact
    compacting: list[bool] = []
    notes_analysed_in_compactions: list[Message] = []

    def spy_analyse(self: Analyzer, m: Message, tok: int) -> Any:
        if compacting and is_note(m):
            notes_analysed_in_compactions.append(m)
        return analyse(self, m, tok)

    def spy_compact(self: ctxfold.AutoCompressor, conv: Any) -> Any:
        compacting.append(True)
        try:
            return compact(self, conv)
        finally:
            compacting.pop()

    monkeypatch.setattr(Analyzer, "_analyse", spy_analyse)
    monkeypatch.setattr(ctxfold.AutoCompressor, "compact", spy_compact)
    ctxfold.clear_caches()
    _, msgs = example_conversations()[0]  # its notes join the leading system block
    session = Session(budget=1500, store=MemoryStore())
    renders = _replay(session, msgs, 1500)
    assert len({r.round_id for r in renders}) >= 4  # it compacted again and again
    assert {m.role for r in renders for m in r.messages if is_note(m)} >= {"system"}
    assert notes_analysed_in_compactions == []  # the renders between did it


@pytest.mark.parametrize("strategy", ["sliding_window", "hierarchical"])
def test_any_strategy_that_compacts_can_run_a_session(strategy: str) -> None:
    _, msgs = example_conversations()[1]
    session = Session(budget=3000, strategy=strategy, store=MemoryStore())
    renders = _replay(session, msgs, 3000)
    assert all(r.stats.tokens_after <= 3000 for r in renders)
    assert all(not turn_order_problems(list(r.messages)) for r in renders)
    assert ctxfold.expand(renders[-1], store=session.expand_tool().store).complete


def test_a_bad_message_is_refused_whole_and_nothing_is_stored() -> None:
    store = MemoryStore()
    s = Session("bad", budget=1000, store=store)
    s.add({"role": "user", "content": "hello"})
    with pytest.raises(ctxfold.InvalidMessageError, match="1"):
        s.add([{"role": "assistant", "content": "hi"}, {"role": "wizard", "content": "?"}])
    assert [m.text for m in s.history] == ["hello"]
    assert [m.text for m in Session.load("bad", store=store).history] == ["hello"]


def test_a_record_changed_behind_the_session_is_a_typed_error_on_load() -> None:
    from ctxfold.exceptions import CorruptRecordError
    from ctxfold.session.log import namespace

    store = MemoryStore()
    Session("x", store=store).add([{"role": "user", "content": "hello"}])
    store.put_many({namespace("y") + "0:m:0": b"not json"})
    with pytest.raises(CorruptRecordError, match="'y'"):
        Session.load("y", store=store)
    assert Session.load("x", store=store).history[0].text == "hello"


def test_the_default_low_water_leaves_room_for_about_twenty_turns() -> None:
    chat = [Message("system", "Two friends chat.")]
    for k in range(1200):
        chat.append(Message("user" if k % 2 == 0 else "assistant", f"Day {k}: we met at {k}:00."))
    session = Session(budget=6000, store=MemoryStore(), recall_share=0)  # the view alone
    renders = _drive(session, chat, 6000)
    after = [r for p, r in itertools.pairwise(renders) if r.round_id != p.round_id]
    # Short turns: the room for twenty of them is under 10% of the budget (the least).
    assert after and all(0.8 * 6000 <= r.stats.tokens_after <= 0.9 * 6000 for r in after)
    _, agent = example_conversations()[1]  # tool results of hundreds of tokens
    renders = _drive(Session(budget=4000, store=MemoryStore()), agent, 4000)
    after = [r for p, r in itertools.pairwise(renders) if r.round_id != p.round_id]
    assert after and all(r.stats.tokens_after <= 0.6 * 4000 for r in after)  # 40% (the most)


def test_loading_an_id_the_store_never_held_is_an_error_and_the_constructor_starts_it() -> None:
    from ctxfold.exceptions import SessionNotFoundError

    store = MemoryStore()
    with pytest.raises(SessionNotFoundError, match="'nobody'"):
        Session.load("nobody", store=store)
    fresh = Session("nobody", store=store)
    assert fresh.history == ()
    fresh.clear()  # a cleared session exists, empty
    assert Session.load("nobody", store=store).history == ()


@pytest.mark.full_sweep  # 19 s: a compaction on every turn of three conversations
def test_compacting_every_turn_keeps_most_of_what_one_compaction_keeps() -> None:
    """A compaction sees only its last note and the messages since, yet scores words
    by their rarity in the whole history: folded again turn after turn, the note keeps
    most of the answers that one compaction of the whole history keeps (LoCoMo, its
    three shortest conversations, 4K tokens, compacting on every turn). Recall is off:
    this is what the note alone keeps (a chat's questions each take room for recall,
    and the note compacts smaller; tests/unit/recall has what that buys)."""
    from tests.conftest import DATA_DIR, SKIP_NO_DATA

    if DATA_DIR is None:
        pytest.skip(SKIP_NO_DATA)
    lines = (DATA_DIR / "locomo.jsonl").read_text(encoding="utf-8").splitlines()
    records = sorted(map(json.loads, lines), key=lambda r: len(r["messages"]))[:3]
    kept = {"session": 0, "compress": 0}
    for record in records:
        msgs = ctxfold.from_openai(record["messages"])
        session = Session(budget=4000, store=MemoryStore(), cache_stable=False, recall_share=0)
        outputs = {
            "session": _replay(session, msgs, 4000)[-1].messages,
            "compress": ctxfold.compress(msgs, budget=4000).messages,
        }
        answers = [str(q["answer"]).lower() for q in record["probes"]["questions"]]
        for name, out in outputs.items():
            shown = "\n".join(m.text for m in out).lower()
            kept[name] += sum(1 for a in answers if a and a in shown)
    assert kept["session"] >= 0.65 * kept["compress"], kept


def test_a_session_keeps_the_identifiers_of_a_long_task_across_compactions() -> None:
    """The task's identifiers weigh more; folded, then shown again verbatim by a tool
    result, then folded with it, they keep that weight round after round (mini-SWE-agent,
    the six conversations with the longest task statement, 4K tokens; 79% before)."""
    from tests.conftest import DATA_DIR, SKIP_NO_DATA

    if DATA_DIR is None:
        pytest.skip(SKIP_NO_DATA)
    lines = (DATA_DIR / "mini_swe_agent.jsonl").read_text(encoding="utf-8").splitlines()

    def task_length(record: dict[str, Any]) -> int:
        return len(next(m["content"] for m in record["messages"] if m["role"] == "user"))

    records = sorted(map(json.loads, lines), key=task_length, reverse=True)[:6]
    found = findable = 0
    for record in records:
        msgs = ctxfold.from_openai(record["messages"])
        out = _replay(Session(budget=4000, store=MemoryStore()), msgs, 4000)[-1].messages
        history = "\n".join(m.text + " ".join(c.arguments for c in m.tool_calls) for m in msgs)
        shown = "\n".join(m.text + " ".join(c.arguments for c in m.tool_calls) for m in out)
        idents = [i for i in record["probes"]["identifiers"] if i in history]
        found, findable = found + sum(i in shown for i in idents), findable + len(idents)
    assert found >= 0.95 * findable, (found, findable)


def test_each_compaction_is_handed_the_word_counts_of_the_whole_history() -> None:
    """A strategy sees the last note and the messages since, and with them the counts
    of the whole history: in how many messages each content word occurs. The first
    compaction sees the whole history itself, so it scores by its own counts, as
    ``compress`` does."""
    from ctxfold.text.scoring import content_words

    seen: list[tuple[int, dict[str, int]] | None] = []

    class Spy(ctxfold.AutoCompressor):
        def compact(self, conversation):  # type: ignore[no-untyped-def]
            rarity = conversation.rarity
            seen.append(None if rarity is None else (rarity.documents, dict(rarity.frequency)))
            return super().compact(conversation)

    _, msgs = example_conversations()[0]
    session = Session(budget=1500, store=MemoryStore(), strategy=Spy())
    _replay(session, msgs, 1500)
    first = next(k for k, told in enumerate(seen) if told is not None)
    assert first >= 1  # (a round may try more than once) renders come before calls
    assert len(seen) > first
    for told in seen[first:]:  # each later one is told of the whole
        assert told is not None
        documents, frequency = told
        words = [content_words(m.text) for m in msgs[:documents]]
        assert frequency == dict(Counter(w for ws in words for w in ws))


def test_a_resumed_compaction_renders_as_the_uninterrupted_session() -> None:
    """A history kept elsewhere (an agent's checkpoint) and the compaction record kept
    beside it: a new process takes the compaction up instead of making it again."""
    _, msgs = example_conversations()[-1]
    half = len(msgs) // 2
    whole = Session(budget=2000, store=MemoryStore())
    _drive(whole, msgs[:half], 2000)
    record = whole.compaction
    assert record is not None and whole.folded > 0
    record = json.loads(json.dumps(record))  # it is JSON, as a checkpoint keeps it
    again = Session.resume(msgs[:half], record, budget=2000)
    assert json.loads(json.dumps(again.compaction)) == record
    assert again.folded == whole.folded
    assert _wire(again.render()) == _wire(whole.render())
    for m in msgs[half:]:
        if m.role == "assistant":
            assert _wire(again.render()) == _wire(whole.render())
        again.add(m)
        whole.add(m)
    assert again.history == tuple(msgs)
    assert Session.resume(msgs[:3], None, budget=2000).compaction is None


def test_a_compaction_record_of_another_history_is_refused_and_compacted_afresh() -> None:
    _, msgs = example_conversations()[-1]
    session = Session(budget=2000, store=MemoryStore())
    _drive(session, msgs, 2000)
    record = session.compaction
    assert record is not None
    edited = list(msgs)
    k = record["fold"]["upto"] - 1
    edited[k] = Message(
        edited[k].role,
        "edited",
        tool_calls=edited[k].tool_calls,
        tool_call_id=edited[k].tool_call_id,
    )
    damaged = {**record, "fold": {**record["fold"], "upto": len(msgs) + 5}}
    for history, rec in [
        (edited, record),  # the history was edited since
        (msgs[: k // 2], record),  # shorter than what the record stands for
        (msgs, damaged),
        (msgs, {**record, "version": 99}),
        (msgs, {"fold": "x"}),
    ]:
        resumed = Session.resume(history, rec, budget=2000)
        assert resumed.resumed.outcome.value == "refused" and resumed.compaction is None
        assert "cannot be verified" in resumed.resumed.reason


@pytest.mark.parametrize("share", [k / 100 for k in range(10, 50, 2)])
def test_every_render_keeps_strict_turn_order_at_any_budget(share: float) -> None:
    """The airline chat's lookups return long records, at many budgets: every render
    is a strict request (the prefix ends on the side its input ended on, its note fills
    the gap folding left) and ends on the newest message, whole or cut in place."""
    msgs = next(m for name, m in example_conversations() if "airline" in name)[1:]
    session = Session(budget=int(COUNTER.count_messages(msgs) * share), store=MemoryStore())
    for k, m in enumerate(msgs):
        if m.role == "assistant":
            out = list(session.render().messages)
            assert turn_order_problems(out) == []
            check_continuation(msgs[:k], out)
        session.add(m)


def test_a_follower_adds_what_is_new_and_reads_again_what_follows_an_edit() -> None:
    from ctxfold.session import Follower

    _, msgs = example_conversations()[-1]
    dicts = ctxfold.to_openai(msgs)
    reads: list[int] = []

    def convert(items: list[dict[str, object]]) -> list[Message]:
        reads.append(len(items))
        return ctxfold.from_openai(items)

    follower = Follower(
        Session(budget=2000, store=MemoryStore()),
        convert,
        key=lambda d: json.dumps(d, sort_keys=True),  # a snapshot of each item
    )
    first = follower.render(dicts[:20])
    assert follower.render(dicts[:20]) is first  # unchanged: not rendered again
    assert follower.render(dicts[:20], 1500) is not first
    follower.render(dicts[:26])
    assert reads == [20, 6]  # only what was new
    edited = [*dicts[:5], {"role": "user", "content": "Start again."}]
    assert follower.render(edited).messages[-1].text == "Start again."
    assert len(follower.session.history) == 6 and reads[-1] == 1  # after the 5 kept
    # an earlier item replaced, the length and the last item the same: read again
    removed = [*edited[:2], {"role": edited[2]["role"], "content": "[removed]"}, *edited[3:]]
    before = follower.render(edited)
    assert follower.render(removed) is not before
    assert follower.session.history[2].text == "[removed]" and reads[-1] == 4
    assert follower.session.history == tuple(ctxfold.from_openai(removed))
    # an item edited in place (the same object): read again too
    before = follower.render(removed)
    removed[1]["content"] = "card [removed]"
    assert follower.render(removed) is not before
    assert follower.session.history[1].text == "card [removed]"


def test_a_follower_by_default_knows_items_by_what_the_model_sees() -> None:
    """Without a key function, an item is known by its converted message's
    fingerprint: an edit in place of an item already read is seen."""
    from ctxfold.session import Follower

    items = [
        {"role": "user", "content": "card 4111 1111 1111 1111"},
        {"role": "user", "content": "ok"},
    ]
    follower = Follower(Session(budget=2000, store=MemoryStore()), ctxfold.from_openai)
    assert "4111" in follower.render(items).messages[0].text
    items[0]["content"] = "[removed]"
    shown = "\n".join(m.text for m in follower.render(items).messages)
    assert "4111" not in shown and "[removed]" in shown


def test_a_follower_splits_its_render_into_prefix_own_items_and_recall_block() -> None:
    from ctxfold.session import Follower

    msgs = [Message("system", "You are Ben.")]
    for k in range(120):
        text = "My gym locker is the blue one by the sauna." if k == 4 else f"Chat {k}."
        msgs.append(Message("user" if k % 2 == 0 else "assistant", text))
    msgs.append(Message("user", "Which gym locker is mine?"))
    dicts = ctxfold.to_openai(msgs)
    follower = Follower(
        Session(budget=300, store=MemoryStore(), strategy="sliding_window"),
        ctxfold.from_openai,
        key=lambda d: json.dumps(d, sort_keys=True),
    )
    followed = follower.follow(dicts)
    assert followed.block is not None and "sauna" in followed.block.text
    own = followed.view(ctxfold.to_openai(followed.prefix), dicts, lambda m: m.to_openai())
    assert own == followed.result.to_openai()  # the caller's objects, the same request
    # after the compaction, the items that follow it are sent as the caller's own
    more = [*dicts, {"role": "assistant", "content": "The blue one."}, dict(dicts[-1])]
    later = follower.follow(more)
    assert later.result.round_id == followed.result.round_id and later.tail == len(dicts)
    own = later.view(ctxfold.to_openai(later.prefix), more, lambda m: m.to_openai())
    assert own == later.result.to_openai()
    assert own[len(later.prefix)] is more[-2]  # the block opens the newest, a copy


def _tool_loop(steps: int, lines: int) -> list[Message]:
    """An agent's run: a task, then calls whose results are ``lines`` long each."""
    msgs = [
        Message("system", "You are a coding agent."),
        Message("user", "Fix the failing test in src/app.py: the parser drops quotes."),
    ]
    for k in range(steps):
        call = ctxfold.ToolCall(f"c{k}", "bash", json.dumps({"cmd": f"cat src/mod{k}.py"}))
        out = "\n".join(
            f"{k}:{i}: value_{k}_{i} = parse(row[{i}]) # src/mod{k}.py" for i in range(lines)
        )
        msgs += [
            Message("assistant", f"Step {k}.", tool_calls=(call,)),
            Message("tool", out, tool_call_id=f"c{k}"),
        ]
    return msgs


def test_an_agent_always_sees_its_newest_result_even_when_it_is_most_of_the_budget() -> None:
    """Results of about half the budget each: every render ends on the newest result
    (whole, or cut in place when it alone is over its share), never on the task."""
    msgs = _tool_loop(10, 60)
    session = Session(budget=2500, store=MemoryStore())
    session.add(msgs[:2])
    for k in range(2, len(msgs), 2):
        session.add(msgs[k : k + 2])
        out = list(session.render().messages)
        assert COUNTER.count_messages(out) <= 2500
        check_continuation(msgs[: k + 2], out)
        check_tool_integrity(msgs[: k + 2], out)
        assert "src/app.py" in "\n".join(m.text for m in out)  # the task, said or listed
    huge = _tool_loop(1, 400)  # one result over the whole room: cut in place, stored
    store = MemoryStore()
    result = ctxfold.compress(huge, budget=1500, store=store)
    assert result.trace[-1].reason == "shortened:newest" and result.messages[-1].role == "tool"
    assert COUNTER.count_messages(result.messages) <= 1500
    assert list(ctxfold.expand(result, store=store).messages) == huge


def test_a_newest_result_that_fits_the_budget_is_rendered_whole_as_compress_gives_it() -> None:
    """A newest result of 70% of the room the system prompt and the note's minimum
    leave fits: a session compacting to the budget renders it byte for byte, exactly
    what ``compress`` gives, the rest folded reversibly (expand gives it all back)."""
    msgs = _tool_loop(6, 30)
    budget = 1500
    room = budget - COUNTER.count_messages(msgs[:1]) - 20  # ``Policy.note_overhead``
    call = Message("assistant", "Run the tests.", tool_calls=(ctxfold.ToolCall("z", "bash", "{}"),))
    result = Message("tool", "", tool_call_id="z")
    while COUNTER.count_message(call) + COUNTER.count_message(result) < 0.7 * room:
        result = Message(
            "tool", result.text + f"test_{len(result.text)} FAILED\n", tool_call_id="z"
        )
    msgs += [call, result]
    store = MemoryStore()
    session = Session(budget=budget, store=store, cache_stable=False)
    session.add(msgs)
    rendered = session.render()
    out = list(rendered.messages)
    assert out[-2:] == msgs[-2:] and COUNTER.count_messages(out) <= budget
    check_continuation(msgs, out)
    assert not turn_order_problems(out)
    assert out == list(ctxfold.compress(msgs, budget=budget, store=MemoryStore()).messages)
    assert list(ctxfold.expand(rendered, store=store).messages) == msgs


def test_a_render_announces_itself_with_the_stats_compress_gives() -> None:
    msgs = _tool_loop(12, 30)
    seen: list[ctxfold.CompressionResult] = []
    off = ctxfold.on("compaction_completed", lambda e: seen.append(e["result"]))
    try:
        session = Session(budget=2000, store=MemoryStore())
        session.add(msgs)
        result = session.render()
    finally:
        off()
    assert seen == [result]
    assert result.round_id is not None and result.stats.savings.get("selection", 0) > 0
    reopened = Session(session.session_id, store=session.store, budget=2000).render()
    assert reopened.stats.savings == result.stats.savings  # kept in the stored record


@pytest.mark.parametrize("where", ["sqlite", "memory"])
def test_expand_finds_a_sessions_render_given_its_store_or_none(where, tmp_path):
    msgs = next(m for name, m in example_conversations() if "airline" in name)
    spec = f"sqlite:///{tmp_path / 's.db'}" if where == "sqlite" else None
    session = Session("support-7", budget=1500, store=spec)
    session.add(msgs)
    shown = session.render()
    assert shown.round_id is not None
    for back in (ctxfold.expand(shown, store=spec), ctxfold.expand(shown), session.expand(shown)):
        assert back.complete and list(back.messages) == msgs
    assert session.expand(list(shown.messages)).complete  # its messages alone, by the session
    assert "user:" in session.expand(shown.round_id)
    if spec is None:
        return  # the process's shared store may hold the same round from another test
    # the store alone, without the session's id: found in the part the session wrote
    alone = ctxfold.expand(list(shown.messages), store=spec)
    assert alone.complete and list(alone.messages) == msgs
    assert ctxfold.expand(shown.round_id, store=spec) == session.expand(shown.round_id)
    other = f"sqlite:///{tmp_path / 'other.db'}"  # a store that never held it
    assert ctxfold.expand(list(shown.messages), store=other).missing == (shown.round_id,)
    with pytest.raises(ExpandError, match=r"Session.load\(session_id, store=...\).expand"):
        ctxfold.expand(shown.round_id, store=other)


class _Counting(ctxfold.AutoCompressor):
    """``auto``, counting the messages it is asked to work ahead on."""

    def __init__(self) -> None:
        super().__init__()
        self.prepared: list[Message] = []

    def prepare(self, messages: Any, tokens: Any) -> None:
        self.prepared += messages
        super().prepare(messages, tokens)


def test_a_reopened_session_works_ahead_only_on_what_its_last_compaction_left() -> None:
    store = MemoryStore()
    _, msgs = example_conversations()[0]
    s = Session("r", budget=1500, store=store)
    last = _replay(s, msgs, 1500)[-1]
    assert s.folded > 0  # it compacted
    counting = _Counting()
    again = Session.load("r", store=store, budget=1500, strategy=counting)
    assert _wire(again.render()) == _wire(last)  # what the session would have rendered
    prefix = len(last.messages) - (len(msgs) - s.folded)
    # the prefix (its note and what it kept) and the messages since: not the history
    assert len(counting.prepared) <= prefix + len(msgs) - s.folded < len(msgs)


class _Reads(MemoryStore):
    """A memory store that keeps the keys of each read."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[list[str]] = []

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        self.reads.append(list(keys))
        return super().get_many(keys)


def test_reopening_reads_each_record_once_in_round_trips_of_bounded_size() -> None:
    store = _Reads()
    _, msgs = example_conversations()[0]
    s = Session("r", budget=1500, store=store)
    last = _replay(s, msgs, 1500)[-1]
    held = [k for k in store._data if ":0:c:" in k or ":0:m:" in k]
    assert sum(":0:c:" in k for k in held) > 3  # it compacted again and again
    store.reads.clear()
    again = Session.load("r", store=store, budget=1500)
    assert _wire(again.render()) == _wire(last)
    assert again.render().trace == s.render().trace  # every compaction's decisions
    read = Counter(k for keys in store.reads for k in keys)
    assert all(read[k] == 1 for k in held)  # never counted first, then read again
    assert max(len(keys) for keys in store.reads) <= 256  # never the whole history at once


def _counting(texts: list[str], scale: int = 1) -> Any:
    """A token counter (a ``str -> int`` function) that keeps every text it counts."""

    def count(text: str) -> int:
        texts.append(text)
        return scale * (len(text) // 4 + 1)

    return count


def test_reopening_takes_the_token_counts_its_compactions_stored() -> None:
    """A compaction stores the token counts of the messages it took in, so reopening a
    long session counts only what no compaction covers (and one message of each
    compaction, to check the counter is the one that wrote them); with another
    counter it counts everything again."""
    store = MemoryStore()
    _, msgs = example_conversations()[-1]
    s = Session("r", budget=2000, store=store, counter=_counting([]))
    last = _replay(s, msgs, 2000)[-1]
    folds = sum(":0:c:" in k for k in store._data)
    assert folds > 3 and s.folded > len(msgs) // 2
    counted: list[str] = []
    again = Session.load("r", store=store, budget=2000, counter=_counting(counted))
    shown = {m.text for m in again._fold.prefix if m.text}
    hidden = {m.text for m in msgs[: s.folded] if m.text} - shown
    assert len(hidden & set(counted)) <= folds < len(hidden) // 4  # one of each at most
    assert _wire(again.render()) == _wire(last)
    assert again.render().trace == s.render().trace
    assert again.render().stats.tokens_before == s.counter.count_messages(msgs)
    recounted: list[str] = []
    other = Session.load("r", store=store, budget=2000, counter=_counting(recounted, 2))
    assert hidden <= set(recounted)  # a count differs: all again
    twice = ctxfold.get_counter(_counting([], 2)).count_messages(msgs)
    assert other.render().stats.tokens_before == twice


class _Recording(ctxfold.tokens.CallableCounter):
    """A counter that remembers each message it counts (not what its cache answers)."""

    def __init__(self, counted: list[str]) -> None:
        super().__init__(lambda text: len(text) // 4 + 1, name="recording", cache_size=8)
        self.counted = counted

    def _count_message(self, m: Message) -> int:
        self.counted.append(m.fingerprint)
        return super()._count_message(m)


def test_a_compaction_takes_the_token_counts_the_session_keeps() -> None:
    """The session counts each message as it is added; its compaction takes those
    counts and never counts a message it folds again (a history longer than the
    counter's cache was counted twice over: seconds at 100,000 messages)."""
    _, msgs = example_conversations()[-1]
    counted: list[str] = []
    s = Session(budget=2000, store=MemoryStore(), counter=_Recording(counted))
    s.add(msgs)
    result = s.render()
    assert s.folded > len(msgs) // 2
    hidden = {msgs[d.index].fingerprint for d in result.trace if d.tokens_after == 0}
    assert len(hidden) > len(msgs) // 4
    assert all(counted.count(f) == 1 for f in hidden)  # at add, never by a compaction
    assert result.stats.tokens_before == s.counter.count_messages(msgs)


@pytest.mark.parametrize("redact", [False, True], ids=["plain", "redacting"])
def test_every_compaction_is_given_the_counts_its_counter_gives(
    redact: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Turn by turn, reopened halfway, with tool calls still waiting and secrets
    masked: each compaction's counts are what the counter gives its inputs."""
    from ctxfold.contract import Conversation

    made = Conversation.of.__func__  # type: ignore[attr-defined]  # the classmethod's function
    given: list[tuple[list[int], list[int]]] = []

    def of(cls: type[Conversation], messages: list[Message], **kw: Any) -> Conversation:
        conv = made(cls, messages, **kw)
        uncached = [kw["counter"]._count_message(m) for m in messages]
        given.append((conv.tokens, uncached))
        return conv

    monkeypatch.setattr(Conversation, "of", classmethod(of))
    for k, (_, msgs) in enumerate(example_conversations()):
        msgs = [
            dataclasses.replace(m, content=f"{m.text} sk-proj-{'A1b2C3d4' * 4}")
            if i % 3 == 0 and m.text
            else m
            for i, m in enumerate(msgs)
        ]
        budget = ctxfold.share_budget(msgs, 0.3, COUNTER)
        store = SQLiteStore(tmp_path / f"{k}.db")
        s = Session(f"s{k}", budget=budget, store=store, redact=redact)
        half = len(msgs) // 2
        _drive(s, msgs[:half], budget)
        again = Session.load(f"s{k}", store=store, budget=budget, redact=redact)
        _replay(again, msgs[half:], budget)
    assert len(given) > 10  # one per compaction, whatever targets it tries
    assert all(tokens == counted for tokens, counted in given)


def test_a_conversation_takes_counts_it_is_given_and_refuses_a_wrong_number() -> None:
    from ctxfold.contract import Conversation
    from ctxfold.units import group_units

    msgs = [Message("user", "one two three"), Message("assistant", "four")]
    counted: list[str] = []
    counter = _Recording(counted)
    conv = Conversation.of(
        msgs, budget=10, counter=counter, grouping=group_units(msgs), tokens=(7, 9)
    )
    assert conv.tokens == [7, 9] and not counted
    assert Conversation.of(msgs, budget=10, counter=counter, grouping=group_units(msgs)).tokens == [
        counter.count_message(m) for m in msgs
    ]
    with pytest.raises(ValueError, match="1 token counts given for 2 messages"):
        Conversation.of(msgs, budget=10, counter=counter, grouping=group_units(msgs), tokens=[7])


@pytest.mark.parametrize(
    ("wrote", "reads"), [("cl100k_base", "o200k_base"), ("o200k_base", "approx")]
)
def test_a_session_reopened_with_another_counter_counts_its_history_again(
    wrote: str, reads: str
) -> None:
    """Counters that agree on some messages (each compaction's newest here: "ok") still
    differ on the history: reopened with another one, every message is counted with it."""
    store = MemoryStore()
    turns = []
    for k in range(12):
        turns.append(Message("user", "ok"))
        turns.append(
            Message("assistant", f"Résumé {k}: naïve café façade, 東京の天気は晴れです。" * 2)
        )
    s = Session("r", budget=300, store=store, counter=wrote)
    _replay(s, turns, 300)
    assert s.folded > 0
    again = Session.load("r", store=store, budget=300, counter=reads)
    assert again.render().stats.tokens_before == ctxfold.get_counter(reads).count_messages(turns)


def test_a_session_reopened_without_its_redaction_counts_what_it_shows() -> None:
    """A redacting session counts the masked messages: reopened without redaction, it
    counts the messages as they are (each compaction's newest here holds no secret)."""
    store = MemoryStore()
    key = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 3
    turns = [
        Message("user", "Please help me plan. " * 30),
        Message("assistant", f"Your key {key} is kept. " + "Here is a plan. " * 30),
    ] * 20
    s = Session("r", budget=1200, store=store, redact=True)
    _replay(s, turns, 1200)
    assert s.folded > 0
    again = Session.load("r", store=store, budget=1200)
    assert again.render().stats.tokens_before == again.counter.count_messages(turns)


def test_sessions_compacting_in_turns_do_not_analyse_their_notes_again(monkeypatch):
    """A long note is analysed line by line, each line memoized, so that the next
    compaction, which folds the note again, analyses only the lines new to it. The
    process's table of lines is shared: many sessions compacting in turns evicted one
    session's lines before it compacted again (a 32K session among 20 paid 99 ms a
    compaction instead of 34). Each session keeps what its own turns read: a line is
    analysed again only when a whole turn (compaction to compaction) did not read it."""
    from ctxfold.strategies.auto import analysis

    monkeypatch.setattr(
        analysis, "POLICY", dataclasses.replace(analysis.POLICY, note_lines_from=150)
    )
    monkeypatch.setattr(analysis, "_LINES", LRU(1))  # as if other sessions filled it
    turns: Counter[int] = Counter()
    analysed: dict[tuple[int, str], list[int]] = {}
    turn, alone = OwnMemo.turn, analysis.Analyzer._line_alone

    def counted_turn(self: OwnMemo) -> None:
        turns[id(self)] += 1
        turn(self)

    def counted(self: Any, line: str, role: str) -> Any:
        memo = id(own_memo())
        analysed.setdefault((memo, line), []).append(turns[memo])
        return alone(self, line, role)

    monkeypatch.setattr(OwnMemo, "turn", counted_turn)
    monkeypatch.setattr(analysis.Analyzer, "_line_alone", counted)
    convs = [msgs for _, msgs in example_conversations()]
    sessions = [Session(budget=1500) for _ in convs]
    for k in range(max(map(len, convs))):
        for session, msgs in zip(sessions, convs, strict=True):
            if k < len(msgs):
                session.add(msgs[k])
                session.render()
    assert min(turns.values()) >= 3 and len(analysed) > 100
    assert id(None) not in {memo for memo, _ in analysed}  # always for a session
    soon = [at for at in analysed.values() for a, b in itertools.pairwise(at) if b - a < 2]
    assert not soon


def test_adding_a_bare_text_says_how_to_give_it_a_role():
    session = Session(budget=100)
    with pytest.raises(ctxfold.InvalidMessageError, match="a text needs a role"):
        session.add("hello")
    assert len(session) == 0
    session.add({"role": "user", "content": "hello"})
    assert len(session) == 1


@pytest.mark.parametrize(("given", "meant"), [("stratgy", "strategy"), ("budgte", "budget")])
def test_a_misspelt_session_option_names_the_closest_and_every_valid_one(given, meant) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Session(**{given: 1000})
    message = str(caught.value)
    assert message.startswith(f"Session has no option {given!r} (did you mean {meant!r}?)")
    assert "low_water" in message and "recall_share" in message
    assert Session("s", budget=500, strategy="auto").budget == 500  # the right ones pass


def test_the_history_as_text_fits_what_is_asked() -> None:
    """``Session.text``: a render written as a transcript within ``max_tokens``, made
    again in a smaller room when the text counts over; ``""`` for an empty session; a
    ``BudgetError`` when even the system prompt does not fit."""
    from ctxfold.messages import transcript

    counter = ctxfold.TiktokenCounter("o200k_base")
    s = Session(counter=counter, budget=600)
    assert s.text() == ""
    s.add({"role": "system", "content": "You answer questions about the trip."})
    for k in range(40):
        s.add({"role": "user", "content": f"Day {k}: we visited museum M{k} in town T{k}."})
        s.add({"role": "assistant", "content": f"Noted: M{k} in T{k} on day {k}."})
    for limit in (600, 300, 150):
        text = s.text(limit, query=False)
        assert 0 < counter.count_text(text) <= limit
        assert text.startswith("system: You answer questions about the trip.")
    # a history that fits is its whole transcript
    small = Session(counter=counter)
    small.add([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    assert small.text(100) == transcript(small.history)
    assert asyncio.run(small.atext(100)) == small.text(100)
    with pytest.raises(BudgetError):
        s.text(8)
