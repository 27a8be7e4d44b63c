"""How a reversible round is stored: every message as a JSON record under an id
derived from its content, written in one atomic batch per round.

In a persistent store (SQLite, Redis, a store of your own) the id is keyed: an HMAC
of the content's SHA-256 under a random key the store keeps (:func:`store_key`), so
an id made for one store says nothing in another, and nobody can confirm a guessed
message by asking a store for the id its content would have. A memory store, private
to its process, keeps plain content ids (so compressing the same history in two
processes gives the same output). Ids written before keys existed are still read."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from .._state import LRU, memo
from ..messages import ContentPart, Message, ToolCall
from ..storage.store import MemoryStore, NamespacedStore, VerbatimStore, put_new

__all__ = [
    "Batch",
    "Read",
    "entry_id",
    "load",
    "marker",
    "matches",
    "message_bytes",
    "message_from_record",
    "message_record",
    "secret_key",
    "store_key",
    "tag_key",
]

_ID_LENGTHS = (12, 24, 64)  # digits; a longer id only when a shorter one holds other content


def entry_id(digest: bytes, digits: int) -> str:
    """The store id of content with this SHA-256 ``digest``: ``digits`` decimal digits.
    Digits, because the tiktoken encodings cut a run of digits into groups of three, one
    token each: a 12-digit id always costs 4 tokens (a 10-character hex id costs 4 to 7,
    which made the room a round's tag needs a guess). Ids of older versions (hex) are
    still read."""
    width = min(len(digest), max(8, digits // 2))  # at least 64 bits behind the digits
    return str(int.from_bytes(digest[:width], "big") % 10**digits).zfill(digits)


#: Where a persistent store keeps the key of its content ids (32 random bytes).
KEY_ID = "ctxfold:content-key"
_KEYS: weakref.WeakKeyDictionary[object, bytes | None] = weakref.WeakKeyDictionary()


def store_key(store: VerbatimStore, *, create: bool = True) -> bytes | None:
    """The key of ``store``'s content ids, kept in the store, made on first use
    (``create=False``, for reading: ``None`` when none was ever made, so every id
    there is a plain one). ``None`` for a memory store: plain content ids."""
    inner: object = store
    while isinstance(inner, NamespacedStore):
        inner = inner.store
    if isinstance(inner, MemoryStore):
        return None
    with contextlib.suppress(KeyError, TypeError):
        return _KEYS[store]
    key = store.get_many([KEY_ID])[0]
    if key is None and create:
        fresh = os.urandom(32)
        key = fresh if not put_new(store, {KEY_ID: fresh}) else store.get_many([KEY_ID])[0]
    if key is not None:
        with contextlib.suppress(TypeError):  # a store that takes no weak reference
            _KEYS[store] = key
    return key


def secret_key(store: VerbatimStore) -> bytes:
    """The secret ctxfold signs records and keys marks with in ``store``: a persistent
    store's content key (:func:`store_key`, made on first use and kept in the store),
    a memory store's own :attr:`ctxfold.storage.MemoryStore.key` (random unless given)."""
    inner: object = store
    while isinstance(inner, NamespacedStore):
        inner = inner.store
    if isinstance(inner, MemoryStore):
        return inner.key
    key = store_key(store)
    assert key is not None  # made on first use in every store that is not a memory one
    return key


def _reading_key(store: VerbatimStore) -> bytes | None:
    """The key ids read from ``store`` are checked with (a plain id passes too): a
    memory store's own key (its redacted originals' ids are keyed), else the content
    key if one was ever made."""
    inner: object = store
    while isinstance(inner, NamespacedStore):
        inner = inner.store
    return inner.key if isinstance(inner, MemoryStore) else store_key(store, create=False)


def _keyed(key: bytes | None, digest: bytes) -> bytes:
    """The digest an id is made from: the content's SHA-256, keyed when a key is given."""
    return digest if key is None else hmac.new(key, digest, hashlib.sha256).digest()


def marker(entry_id: str) -> str:
    """The marker a compressed text carries for a stored span."""
    return f"[expand {entry_id}]"


def tag_key(round_id: str) -> str:
    """The store key under which a round keeps the fingerprint of the message that
    carries its tag, so that only that message is taken for the round's own (see
    :func:`ctxfold.expand`), never a user's text that copies the tag."""
    return f"tag:{round_id}"


def encode(obj: Mapping[str, Any]) -> bytes:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")


def message_record(m: Message) -> dict[str, Any]:
    content: Any = m.content
    if isinstance(content, tuple):
        content = [[p.type, p.text, p.extra] for p in content]
    record: dict[str, Any] = {
        "k": "msg",
        "role": m.role,
        "content": content,
        "name": m.name,
        "calls": [[c.id, c.name, c.arguments, c.type] for c in m.tool_calls],
        "call_id": m.tool_call_id,
        "id": m.id,
        "extras": [list(x) for x in m.extras],
    }
    if m.metadata:
        try:
            json.dumps(dict(m.metadata), sort_keys=True)
            record["meta"] = dict(m.metadata)
        except (TypeError, ValueError):
            pass  # metadata the model never sees and JSON cannot hold stays behind
    return record


_ENCODED: LRU[tuple[bytes, bytes]] = memo(5_000)


def message_bytes(m: Message) -> tuple[bytes, bytes]:
    """``m``'s record as stored, and its SHA-256: memoized by content for a message
    without metadata (metadata is in the record but not in the fingerprint)."""
    if m.metadata:
        return _encoded(m)
    return _ENCODED.cached(m.fingerprint, _encoded, m)


def _encoded(m: Message) -> tuple[bytes, bytes]:
    data = encode(message_record(m))
    return data, hashlib.sha256(data).digest()


def message_from_record(r: Mapping[str, Any]) -> Message:
    content = r["content"]
    if isinstance(content, list):
        content = tuple(ContentPart(t, text, extra) for t, text, extra in content)
    return Message(
        r["role"],
        content,
        name=r["name"],
        tool_calls=tuple(ToolCall(*c) for c in r["calls"]),
        tool_call_id=r["call_id"],
        id=r["id"],
        extras=tuple((k, v) for k, v in r["extras"]),
        metadata=r.get("meta", {}),
    )


class Batch:
    """Entries of one round: ids resolved against the store (a longer id when the
    short one holds other content), then written in one atomic ``put_many``."""

    def __init__(self, store: VerbatimStore, *, key: bytes | None = None) -> None:
        """``key``: the key of the ids (default: the store's content key,
        :func:`store_key`; redacted originals use :func:`secret_key`)."""
        self.store = store
        self.key = store_key(store) if key is None else key
        self.entries: dict[str, bytes] = {}

    def add_all(self, records: Sequence[Mapping[str, Any]]) -> list[str]:
        datas = [encode(r) for r in records]
        return self._add(datas, [hashlib.sha256(d).digest() for d in datas])

    def add_messages(
        self, messages: Sequence[Message], records: Sequence[bytes | None] | None = None
    ) -> list[str]:
        """The ids of ``messages``' records (each encoded once per content: a session
        stores its prefix again at every compaction). ``records``: each message's
        record as a caller encoded it already (``encode(message_record(m))``, a session's
        log row holds it), or None where it did not."""
        if records is None:
            encoded = [message_bytes(m) for m in messages]
        else:
            encoded = [
                message_bytes(m) if data is None else (data, hashlib.sha256(data).digest())
                for m, data in zip(messages, records, strict=True)
            ]
        return self._add([d for d, _ in encoded], [h for _, h in encoded])

    def _add(self, datas: list[bytes], digests: list[bytes]) -> list[str]:
        ids = [""] * len(datas)
        todo = list(range(len(datas)))
        for n in _ID_LENGTHS:
            if not todo:
                break
            keys = [entry_id(_keyed(self.key, digests[k]), n) for k in todo]
            unknown = [key for key in dict.fromkeys(keys) if key not in self.entries]
            stored = dict(zip(unknown, self.store.get_many(unknown), strict=True))
            left = []
            for k, key in zip(todo, keys, strict=True):
                have = self.entries.get(key, stored.get(key))
                if have is None or have == datas[k]:
                    self.entries[key] = datas[k]
                    ids[k] = key
                else:
                    left.append(k)
            todo = left
        return ids

    def add(self, record: Mapping[str, Any]) -> str:
        return self.add_all([record])[0]

    def add_tag(self, round_id: str, carrier: Message) -> None:
        """Record ``carrier`` as the message that carries the tag of ``round_id``."""
        self.entries[tag_key(round_id)] = carrier.fingerprint.encode("ascii")

    def commit(self) -> None:
        self.store.put_many(self.entries)


def matches(entry: str, data: bytes, key: bytes | None = None) -> bool:
    """Whether ``data`` is what an id derived from content names: the id is computed
    again from the bytes, keyed by the store's ``key`` or plain (decimal ids; the hex
    prefixes of older versions too)."""
    digest = hashlib.sha256(data).digest()
    if entry.isdigit():
        n = len(entry)
        return entry_id(digest, n) == entry or (
            key is not None and entry_id(_keyed(key, digest), n) == entry
        )
    return digest.hex().startswith(entry.lower())


class Read(NamedTuple):
    """Records read back: ``records`` holds ``None`` where the store lacks the id or
    its record is corrupt (listed in ``corrupt``: not what its id names, or not JSON)."""

    records: list[dict[str, Any] | None]
    corrupt: list[str]


def load(store: VerbatimStore, ids: Sequence[str]) -> Read:
    """The records stored under ``ids``, each checked against its id."""
    records: list[dict[str, Any] | None] = []
    corrupt: list[str] = []
    key = _reading_key(store) if ids else None
    for entry, value in zip(ids, store.get_many(list(ids)), strict=True):
        record: Any = None
        if value is not None:
            try:
                record = json.loads(value) if matches(entry, value, key) else None
            except ValueError:  # not JSON (a UnicodeDecodeError is one too)
                record = None
            if not isinstance(record, dict):
                corrupt.append(entry)
                record = None
        records.append(record)
    return Read(records, corrupt)
