"""``Session.truncate`` and a follower's edits: a history cut back is written as two
records whatever it keeps, reads back as it was left, and renders as a session that
holds the same messages would."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import ctxfold
from ctxfold import ConfigurationError, Message
from ctxfold.session import Follower, Session
from ctxfold.storage import MemoryStore, SQLiteStore
from ctxfold.validity import turn_order_problems


def _turns(n: int, tag: str = "") -> list[dict[str, str]]:
    return [
        {
            "role": ("user", "assistant")[k % 2],
            "content": f"{tag}message {k}: order ORD-{k} ships from depot D{k % 7}",
        }
        for k in range(n)
    ]


def _rows(path: Path) -> int:
    with sqlite3.connect(path) as db:
        (n,) = db.execute("SELECT COUNT(*) FROM ctxfold_store").fetchone()
    return int(n)


@pytest.mark.parametrize("keep", [995, 600, 10])
def test_a_truncation_writes_two_records_whatever_it_keeps(tmp_path: Path, keep: int) -> None:
    path = tmp_path / "s.db"
    session = Session("t", store=SQLiteStore(path))
    turns = _turns(1000)
    session.add(turns)
    before = _rows(path)
    session.truncate(keep)
    assert _rows(path) - before <= 3  # the marker, the closing record (and its landmark)
    assert session.history == tuple(ctxfold.from_openai(turns[:keep]))
    session.add(_turns(4, "new "))
    again = Session.load("t", store=SQLiteStore(path))
    assert again.history == session.history and len(again) == keep + 4


def test_truncate_keeps_the_compactions_that_cover_only_what_it_keeps() -> None:
    session = Session(store=MemoryStore(), budget=400)
    for turn in _turns(60):
        session.add(turn)
        session.render()
    folded = session.folded
    assert folded > 20
    session.truncate(len(session) - 2)  # after the compaction: it stays
    assert session.folded == folded
    keep = (folded - 5) // 2 * 2  # ends on an answer: the new turns follow it
    session.truncate(keep)  # inside it: dropped, and the rest still renders
    assert session.folded < keep
    session.add(_turns(2, "after "))
    out = session.render()
    assert out.stats.tokens_after <= 400 and turn_order_problems(list(out.messages)) == []
    assert out.messages[-1].text == "after message 1: order ORD-1 ships from depot D1"


def test_truncate_validates_keep_and_zero_is_clear() -> None:
    store = MemoryStore()
    session = Session("v", store=store)
    session.add(_turns(6))
    with pytest.raises(ConfigurationError, match="holds 6 messages"):
        session.truncate(7)
    with pytest.raises(ConfigurationError, match="at least 0"):
        session.truncate(-1)
    entries = len(store._data)
    session.truncate(6)  # nothing to drop: nothing written
    assert len(store._data) == entries
    session.truncate(0)
    assert session.history == () and session._log.epoch == 1
    assert Session.load("v", store=store).history == ()


def test_a_redacting_session_truncated_keeps_its_originals_and_masks() -> None:
    store = MemoryStore(key=b"k" * 32)
    session = Session("r", store=store, redact=True, budget=1000)
    session.add([{"role": "user", "content": "my key is sk-proj-Abcdefghijklmnopqrstuvwx12"}])
    session.add(_turns(4))
    session.truncate(2)
    assert "sk-proj-Abcdefghijklmnopqrstuvwx12" in session.history[0].text
    assert "sk-proj-" not in ctxfold.to_openai(session.render().messages)[0]["content"]
    again = Session.load("r", store=store, redact=True, budget=1000)
    assert again.history == session.history


def test_a_follower_writes_only_what_an_edit_changed(tmp_path: Path) -> None:
    """Ten edits, each of a message near the end of a 100-message list: the store
    grows by the rewritten messages (and two records an edit), not by the list."""
    path = tmp_path / "f.db"
    follower: Follower[dict[str, str]] = Follower(
        Session("f", store=SQLiteStore(path), budget=3000), ctxfold.from_openai
    )
    items = _turns(100)
    follower.render(items)
    start = _rows(path)
    for edit in range(10):
        at = 95 - edit
        items = [*items[:at], {**items[at], "content": f"edited {edit}"}, *items[at + 1 :]]
        out = follower.render(items)
        assert [m.text for m in follower.session.history] == [d["content"] for d in items]
        assert turn_order_problems(list(out.messages)) == []
    rewritten = sum(100 - (95 - edit) for edit in range(10))  # 5, 6, ..., 14 messages
    assert _rows(path) - start <= rewritten + 3 * 10  # was 10 x 100 messages, and more
    again = Session.load("f", store=SQLiteStore(path), budget=3000)
    assert again.history == follower.session.history
    assert [m.text for m in again.history][90:96] == [*(d["content"] for d in items[90:96])]


def test_a_follower_taking_up_a_stored_session_keeps_the_part_that_matches() -> None:
    store = MemoryStore()
    Session("u", store=store).add(_turns(8))
    edited = [*_turns(5), {"role": "assistant", "content": "another answer"}]
    follower: Follower[dict[str, str]] = Follower(
        Session("u", store=store, budget=1000), ctxfold.from_openai
    )
    follower.render(edited)
    assert follower.session.history == tuple(ctxfold.from_openai(edited))
    assert follower.session._log.epoch == 1 and follower.session._log._own("m") == 5
    assert isinstance(follower.session.history[0], Message)
