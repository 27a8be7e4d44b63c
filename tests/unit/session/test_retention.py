"""Issue 47, items 13 and 15: a session's records are never evicted, a session can be
deleted and pruned, and ``clear(drop_originals=True)`` drops the cleared history's
records and originals, redacted ones included, leaving a log that reads."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import ctxfold
from ctxfold import ConfigurationError, Message, Session
from ctxfold._state import _defaults
from ctxfold.exceptions import SessionNotFoundError
from ctxfold.storage import MemoryStore, RedisStore, SQLiteStore, get_store, prune

KEY = "sk-proj-" + "Ab3dE6gH9jK2mN5pQ8rS1tU4vW7xY0zA"  # shaped as an OpenAI key


def _chat(n: int, tag: str = "") -> list[Message]:
    msgs = [Message("system", "You are a helpful assistant.")]
    for k in range(n):
        msgs.append(Message("user", f"{tag} question {k}: how do I read file_{k}.txt? " * 3))
        msgs.append(Message("assistant", f"{tag} answer {k}: open('file_{k}.txt').read() " * 4))
    return msgs


@pytest.mark.parametrize("spec", ["memory", "sqlite:///:memory:", "shared object"])
def test_a_session_in_memory_survives_compress_filling_the_shared_store(
    spec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 13: unrelated ``compress`` calls past the shared store's cap used to evict a
    session's records (``load`` then raised ``SessionNotFoundError``, ``Session(id)``
    opened empty). A memory spec now names the uncapped store of sessions, and the
    capped store never drops an entry of a session's namespace (given it directly)."""
    monkeypatch.setitem(_defaults, "store", MemoryStore(max_bytes=40_000))
    store: Any = get_store() if spec == "shared object" else spec
    history = _chat(6)
    session = Session(store=store, budget=400)
    session.add(history)
    shown = session.render()
    for k in range(60):  # unrelated compressions: several times the cap
        ctxfold.compress(_chat(4, f"other {k}"), budget=150, store="memory")
    assert get_store().evicted > 0
    back = Session.load(session.session_id, store=store, budget=400)
    assert [m.text for m in back.history] == [m.text for m in history]
    assert back.render().to_openai() == shown.to_openai()
    assert len(Session(session.session_id, store=store)) == len(history)


def _stores(tmp_path: Path, redis_url: str | None, redis_prefix: str | None) -> list[Any]:
    stores: list[Any] = [MemoryStore(), SQLiteStore(tmp_path / "s.db")]
    if redis_url:
        stores.append(RedisStore(redis_url, prefix=redis_prefix or "t:"))
    return stores


def _holding(store: Any, text: str) -> list[str]:
    """The ids of the entries of ``store`` whose value holds ``text``."""
    ids = store.ids_with_prefix("")
    return [i for i, v in zip(ids, store.get_many(ids), strict=True) if v and text.encode() in v]


@pytest.fixture
def stores(tmp_path: Path, request: pytest.FixtureRequest) -> list[Any]:
    url = prefix = None
    if "CTXFOLD_REDIS_URL" in __import__("os").environ:
        url, prefix = request.getfixturevalue("redis_url"), request.getfixturevalue("redis_prefix")
    return _stores(tmp_path, url, prefix)


def test_a_deleted_session_is_gone_and_the_others_stay(stores: list[Any]) -> None:
    """Item 15: every record of the session (all epochs, its originals with the
    redacted ones, its keys) goes; another session and ``compress``'s originals stay."""
    for store in stores:
        gone = Session("gone", store=store, budget=300, redact=True)
        gone.add([*_chat(5), Message("user", f"my key is {KEY}, keep it safe")])
        gone.render()
        gone.clear()
        gone.add(_chat(5, "second epoch"))
        gone.render()
        kept = Session("kept", store=store, budget=300)
        kept.add(_chat(5))
        kept.render()
        assert _holding(store, KEY)
        n = Session.delete("gone", store=store)
        assert n > 20
        assert _holding(store, KEY) == []
        assert not [i for i in store.ids_with_prefix("") if ":7:gone:" in i or ":4:gone:" in i]
        with pytest.raises(SessionNotFoundError):
            Session.load("gone", store=store)
        assert len(Session("gone", store=store)) == 0
        assert len(Session.load("kept", store=store)) == len(_chat(5))
        assert Session.delete("gone", store=store) == 0


def test_delete_in_the_process_memory_by_default() -> None:
    session = Session(budget=300)
    session.add(_chat(3))
    assert Session.delete(session.session_id) > 0
    with pytest.raises(SessionNotFoundError):
        Session.load(session.session_id, store="memory")


def test_clear_keeps_everything_by_default_and_can_drop_the_originals(stores: list[Any]) -> None:
    """``clear()`` keeps the cleared history in the store (redacted originals too);
    ``clear(drop_originals=True)`` deletes every record of the earlier epochs and
    every original, and the session reads again, now and after new turns."""
    for store in stores:
        session = Session("c", store=store, budget=300, redact=True)
        session.add([*_chat(6), Message("user", f"deploy with {KEY} now")])
        first = session.render()
        assert "[secret" in str(first.to_openai()) and first.round_id is not None
        session.clear()
        assert _holding(store, KEY)  # kept: the default says so
        session.add([Message("user", f"again {KEY}")])
        session.render()
        session.clear(drop_originals=True)
        assert _holding(store, KEY) == []
        assert len(Session.load("c", store=store, budget=300, redact=True)) == 0
        session.add(_chat(6, "after"))
        shown = session.render()
        back = Session.load("c", store=store, budget=300, redact=True)
        assert len(back) == len(_chat(6)) and back.render().to_openai() == shown.to_openai()
        expanded = session.expand(shown)
        assert expanded.complete


def test_a_store_that_cannot_delete_says_so_before_anything_changes() -> None:
    class Plain:  # the two methods of the protocol, no more
        def __init__(self) -> None:
            self.data: dict[str, bytes] = {}

        def put_many(self, entries: Any) -> None:
            for k, v in entries.items():
                self.data.setdefault(k, v)

        def get_many(self, ids: Any) -> list[bytes | None]:
            return [self.data.get(i) for i in ids]

    store = Plain()
    session = Session("p", store=store, budget=300)
    session.add(_chat(2))
    with pytest.raises(ConfigurationError, match="delete_many"):
        session.clear(drop_originals=True)
    assert len(Session.load("p", store=store)) == len(_chat(2))  # not cleared
    with pytest.raises(ConfigurationError, match="delete_many"):
        Session.delete("p", store=store)
    with pytest.raises(ConfigurationError):
        session.clear(drop_originals="yes")  # type: ignore[arg-type]


def test_sessions_are_pruned_by_age_and_count(stores: list[Any]) -> None:
    for store in stores:
        for k in range(3):
            Session(f"p{k}", store=store).add(_chat(1, str(k)))
            time.sleep(0.01)
        assert prune(store, max_sessions=1).sessions == ("p1", "p0")
        assert len(Session.load("p2", store=store)) == 3
        later = time.time() + 3600
        assert prune(store, max_age=1800, now=later).sessions == ("p2",)
        with pytest.raises(SessionNotFoundError):
            Session.load("p2", store=store)
