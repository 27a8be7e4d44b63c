"""Secrets masked where the model would see them, reversibly: with ``redact=True``
every credential-shaped value (:mod:`ctxfold.text.secrets`) in any field a message
carries becomes ``[secret <id>]``, ``<id>`` naming the original message in the
verbatim store. Compression then works on the masked messages, and
:func:`ctxfold.expand` puts the originals back (checked: masking the original must
give the message it replaces).

One walk (:func:`_walk`) visits every field the model sees: the text content, each
part's text and its other fields (an image's URL), the provider extras
(``reasoning_content``, ``refusal``, ...), each tool call's name and arguments, and the
message's ``name``. The same walk decides whether a message holds a credential, masks
it, and finds the marks again. Fields that hold JSON (arguments, a part's fields, an
extra) are read with ctxfold's JSON reader and masked string by string, so they stay
the JSON they were: only a string literal that held a credential is written again,
every other byte is kept. Ids (a call's, the message's, ``tool_call_id``) and types are
structure, not text, and are left as they are.

The id in a mark is keyed: an HMAC of the original's content under the store's secret
(:func:`ctxfold.reversible.records.secret_key`, a memory store's random ``key`` too),
so nobody who reads the prompt can confirm a guessed credential by rebuilding the
message. The same store with the same key gives the same marks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum

from .._json import loads as json_loads
from ..messages import ContentPart, Message
from ..storage.store import NamespacedStore, VerbatimStore
from ..text.secrets import mask, secret_spans
from .records import Batch, load, message_from_record, secret_key

__all__ = [
    "REDACTED",
    "REDACTING_KEY",
    "SECRET_MARK",
    "holds_redacted",
    "mask_message",
    "redact",
    "unredact",
]

#: The trace flag of a message whose credentials were masked.
REDACTED = "redacted"

#: The mark of a masked value: the id of the original message in the store.
SECRET_MARK = re.compile(r"\[secret (\d{12,64})\]")

#: Where a store says it holds redacted originals (in the store a session's namespace
#: lies in, if any): written before the first original, read by the expand tool,
#: which then masks its answers by default.
REDACTING_KEY = "ctxfold:redacted"


class Reading(Enum):
    """How a field's string is read."""

    TEXT = "text"  #: prose, a name: masked as text
    JSON = "json"  #: JSON text: its strings masked one by one, the rest kept byte for byte


@dataclass(frozen=True, slots=True)
class Field:
    """A field of a message as the walk gives it: how it is read, and the name its
    value stands under (a provider extra's key), which can say the value is secret."""

    reading: Reading
    name: str | None = None


_TEXT = Field(Reading.TEXT)
_JSON = Field(Reading.JSON)
#: What the walk does to each field: its new value (the same string: unchanged).
Edit = Callable[[str, Field], str]


def _walk(m: Message, edit: Edit) -> Message:
    """``m`` with ``edit`` applied to every field the model sees (``m`` itself when no
    field changed)."""
    content = m.content
    if isinstance(content, str):
        content = edit(content, _TEXT)
    elif isinstance(content, tuple):
        content = tuple(_part(p, edit) for p in content)
    calls = tuple(
        replace(c, name=edit(c.name, _TEXT), arguments=edit(c.arguments, _JSON))
        for c in m.tool_calls
    )
    extras = tuple((k, edit(v, Field(Reading.JSON, k))) for k, v in m.extras)
    name = None if m.name is None else edit(m.name, _TEXT)
    if (content, calls, extras, name) == (m.content, m.tool_calls, m.extras, m.name):
        return m
    return replace(m, content=content, tool_calls=calls, extras=extras, name=name)


def _part(p: ContentPart, edit: Edit) -> ContentPart:
    """One content part with ``edit`` applied to its text and its other fields."""
    text = None if p.text is None else edit(p.text, _TEXT)
    extra = edit(p.extra, _JSON)
    return p if (text, extra) == (p.text, p.extra) else replace(p, text=text, extra=extra)


def _masking(mark: str) -> Edit:
    """The edit that replaces every credential in a field by ``mark``."""

    def edit(value: str, field: Field) -> str:
        if field.reading is Reading.JSON:
            return _mask_json(value, mark, field.name)
        return mask(value, mark)

    return edit


# A JSON string literal (in text the JSON reader accepted: every quote outside one
# starts one, and none follows a backslash). Unrolled, so each character is read
# once; never started at a quote after a backslash, so on any text at most one start
# fails (it would have closed at a later quote that may start one).
_LITERAL = re.compile(r'(?<!\\)"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
# After a literal: it is an object's key. Never tried inside a run of whitespace (the
# look-behind), so even a search over a long run reads it once.
_COLON = re.compile(r"(?<![ \t\n\r])[ \t\n\r]*:")


def _mask_json(text: str, mark: str, name: str | None) -> str:
    """``text`` with every credential replaced by ``mark``: string by string if it is
    JSON (only the literals that held one written again, so it stays valid JSON and
    keeps its layout), as text if it is not (nor JSON nested deeper than ctxfold's
    reader takes, which it refuses everywhere). A value is read with the key it
    stands under (``"api_key": "..."``); ``name`` is the key of the document itself."""
    try:
        json_loads(text)
    except ValueError:
        return mask(text, mark)
    out: list[str] = []
    at = prev = 0  # the end of what is copied; of the previous literal
    key: str | None = None
    for found in _LITERAL.finditer(text):
        start, end = found.span()
        before = text[prev:start].rstrip()[-1:]  # each gap read once: linear
        prev = end
        value: str = json_loads(found.group())
        if _COLON.match(text, end):
            new, key = mask(value, mark), value
        elif before == ":":
            new = _mask_value(value, mark, key)
        else:  # an array's item, or (nothing before it) the document itself
            new = _mask_value(value, mark, None if before else name)
        if new != value:
            out += [text[at:start], json.dumps(new, ensure_ascii=found.group().isascii())]
            at = end
    return "".join([*out, text[at:]]) if out else text


def _mask_value(value: str, mark: str, key: str | None) -> str:
    """``value`` with its credentials masked, read as assigned to ``key`` (so that
    ``{"client_secret": "..."}`` is masked as ``client_secret=...`` would be)."""
    if key is None:
        return mask(value, mark)
    head = f'"{key}": "'
    spans = [
        (max(s - len(head), 0), e - len(head))
        for s, e, _ in secret_spans(head + value)
        if e > len(head)
    ]
    out, at = [], 0
    for start, end in spans:  # in order of their starts, as mask() takes them
        if start >= at:
            out += [value[at:start], mark]
            at = end
        elif end > at:  # overlapping spans: extend the one masked
            at = end
    return "".join([*out, value[at:]]) if out else value


def mask_message(m: Message, mark: str = "[secret]") -> Message:
    """``m`` with every credential in every field the model sees replaced by ``mark``
    (``m`` itself when it holds none)."""
    return _walk(m, _masking(mark))


def _marks(m: Message) -> list[str]:
    """The ids of the ``[secret <id>]`` marks in every field of ``m``, in order."""
    found: list[str] = []

    def collect(value: str, field: Field) -> str:
        found.extend(SECRET_MARK.findall(value))
        return value

    _walk(m, collect)
    return found


def _root(store: VerbatimStore) -> VerbatimStore:
    """The store a session's namespace lies in (``store`` itself if none)."""
    while isinstance(store, NamespacedStore):
        store = store.store
    return store


def holds_redacted(store: VerbatimStore) -> bool:
    """Whether :func:`redact` ever stored an original in ``store`` (or in the store
    its namespace lies in): then what the store gives back may hold credentials."""
    return _root(store).get_many([REDACTING_KEY])[0] is not None


def redact(messages: Sequence[Message], store: VerbatimStore) -> tuple[list[Message], list[int]]:
    """``messages`` with their credentials masked, and the positions of those that
    changed; the originals of those are stored first, in one atomic batch, under ids
    keyed by the store's secret. The store is marked as holding redacted originals
    (:func:`holds_redacted`) before the first is written."""
    out: list[Message] = []
    changed: list[int] = []
    batch: Batch | None = None
    for k, m in enumerate(messages):
        if mask_message(m, "[secret]") is m:
            out.append(m)
            continue
        batch = batch or Batch(store, key=secret_key(store))
        original = batch.add_messages([m])[0]
        out.append(mask_message(m, f"[secret {original}]"))
        changed.append(k)
    if batch is not None:
        root = _root(store)
        if root is store:
            batch.entries[REDACTING_KEY] = b"1"  # in the same atomic write
        else:
            root.put_many({REDACTING_KEY: b"1"})
        batch.commit()
    return out, changed


def unredact(messages: Sequence[Message], store: VerbatimStore) -> tuple[list[Message], list[str]]:
    """``messages`` with each masked one replaced by its stored original, and the ids
    the store lacks. A mark whose original does not mask to the message as it is
    (text that only looks like a mark) is left as it is."""
    wanted = {k: found[0] for k, m in enumerate(messages) if (found := _marks(m))}
    if not wanted:
        return list(messages), []
    ids = list(dict.fromkeys(wanted.values()))
    read = load(store, ids)
    originals = dict(zip(ids, read.records, strict=True))
    out, missing = list(messages), []
    for k, entry in wanted.items():
        record = originals[entry]
        if record is None:
            missing.append(entry)
            continue
        original = message_from_record(record)
        if mask_message(original, f"[secret {entry}]").fingerprint == messages[k].fingerprint:
            out[k] = replace(original, metadata=messages[k].metadata)
    return out, list(dict.fromkeys(missing))
