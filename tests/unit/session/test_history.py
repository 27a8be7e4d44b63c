"""A session's history packs what a compaction folded, and reads it back unchanged;
its trace is columns, not objects."""

from __future__ import annotations

import gc
import types
from collections import Counter

import pytest

from ctxfold import Message, to_openai
from ctxfold._column import BLOCK
from ctxfold.messages import ContentPart, ToolCall
from ctxfold.result import Decision
from ctxfold.session import Session
from ctxfold.session.history import History
from ctxfold.storage import MemoryStore

MESSAGES = [
    Message("system", "You are a coding agent."),
    Message("user", (ContentPart("text", "Look:"), ContentPart("image_url", extra='{"u": 1}'))),
    Message("assistant", None, tool_calls=(ToolCall("c1", "read", '{"path": "a.py"}'),)),
    Message("tool", "print(1)", tool_call_id="c1", name="read", id="m-4"),
    Message("assistant", "Done.", extras=(("reasoning_content", '"short"'),)),
    Message("user", "Thanks", metadata={"handle": object()}),
]


def test_packed_messages_read_back_equal_by_index_slice_and_iteration() -> None:
    history = History()
    history.extend(MESSAGES)
    history.pack(4)
    history.pack(2)  # never unpacks
    assert len(history) == len(MESSAGES)
    assert list(history) == MESSAGES
    assert [history[i] for i in range(-6, 6)] == MESSAGES + MESSAGES
    assert history[1:5] == MESSAGES[1:5]
    assert history[::2] == MESSAGES[::2]
    assert history[4:] == MESSAGES[4:]
    history.pack(6)
    assert history[5] is MESSAGES[5]  # a message with metadata is kept as it is
    assert history[5].metadata["handle"] is MESSAGES[5].metadata["handle"]
    with pytest.raises(IndexError):
        history[6]


def test_rows_give_the_records_the_log_stored_without_encoding_again() -> None:
    """A compaction's round stores each original's record: taken out of the row the
    session's log wrote (the same bytes it would encode), packed or not; None where
    no stored row holds it (a message kept whole for its metadata, or added without
    a row), and for the prefix messages before them."""
    from ctxfold.reversible.records import encode, message_record
    from ctxfold.session.log import SessionLog

    log = SessionLog(MemoryStore(), "s")
    history = History()
    history.extend(MESSAGES[:4], log.append(MESSAGES[:4]))
    history.extend(MESSAGES[4:])  # no rows
    history.pack(3)
    records = history.rows(1, 6)
    expected = [encode(message_record(m)) for m in MESSAGES[1:4]]
    assert list(records) == [*expected, None, None]
    assert records[0] == expected[0] and records[-1] is None
    assert records[1:3] == expected[1:3]
    assert list(records.after(2)) == [None, None, *expected, None, None]
    history.pack(6)  # message 4 packed as its bare record, 5 kept whole (its metadata)
    assert list(history.rows(3, 6)) == [expected[2], None, None]


def _chat(n: int) -> list[dict[str, str]]:
    said = ["the invoice INV-{k} is due on day {k}", "we moved the meeting to room {k}"]
    return [
        {"role": ("user", "assistant")[k % 2], "content": said[k % 2].format(k=k) * 12}
        for k in range(n)
    ]


def _walked(root: object, skip: type) -> list[tuple[int, str]]:
    """The containers a full collection walks that ``root`` reaches (but not through
    an object of type ``skip``): the number of items it visits in each, and its type."""
    seen, todo, out = {id(root)}, [root], []
    while todo:
        obj = todo.pop()
        referents = gc.get_referents(obj)
        out.append((len(referents), type(obj).__name__))
        for r in referents:
            shared = isinstance(r, (type, types.ModuleType, types.FunctionType, skip))
            if gc.is_tracked(r) and not shared and id(r) not in seen:
                seen.add(id(r))
                todo.append(r)
    return out


def test_a_long_session_keeps_no_object_per_message_it_folded() -> None:
    turns = _chat(1200)  # dicts: the test itself holds no Message
    store = MemoryStore()
    session = Session(budget=3000, store=store)
    gc.collect()
    before = Counter(type(o) for o in gc.get_objects())
    for k, m in enumerate(turns):  # one render kept: of the first 200 messages
        if k == 200:
            early = session.render()
            was = tuple(early.trace)
        elif m["role"] == "user":
            session.render()
        session.add(m)
    last = session.render()
    assert session.folded > 1100
    held = Counter(type(o) for o in gc.get_objects())
    # the messages since the compaction, its prefix, and the memos' bounded few
    live = len(turns) - session.folded + 2 * len(last.messages) + len(early.messages)
    assert held[Message] - before[Message] < live + 50
    assert held[Decision] - before[Decision] < len(was) + 50  # the trace is columns
    assert early.trace == was != last.trace[:200]  # a render's trace: later folds never reach it
    stored = {id(v) for v in store._data.values()}
    assert all(id(row) in stored for row in session._history._packed)  # held once
    gc.collect()
    walked = _walked(session, MemoryStore)  # its store is the user's
    assert max(walked) < (BLOCK, "")  # no list of an item per message: columns
    assert to_openai(session.history) == turns  # all of it, read back
    again = Session.resume(turns, session.compaction, budget=3000)
    assert again.render().messages == last.messages
