"""Secrets masked where the model would see them, reversibly: with ``redact=True``
every credential-shaped value (:mod:`ctxfold.text.secrets`) in a message's text or
its tool calls' arguments becomes ``[secret <id>]``, ``<id>`` naming the original
message in the verbatim store. Compression then works on the masked messages, and
:func:`ctxfold.expand` puts the originals back (checked: masking the original must
give the message it replaces)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ..messages import ContentPart, Message
from ..storage.store import VerbatimStore
from ..text.secrets import mask
from .records import Batch, load, message_from_record

__all__ = ["REDACTED", "SECRET_MARK", "redact", "unredact"]

#: The trace flag of a message whose credentials were masked.
REDACTED = "redacted"

#: The mark of a masked value: the id of the original message in the store.
SECRET_MARK = re.compile(r"\[secret (\d{12,64})\]")


def _masked(m: Message, mark: str) -> Message:
    """``m`` with every credential in its text and arguments replaced by ``mark``."""
    content = m.content
    if isinstance(content, str):
        content = mask(content, mark)
    elif isinstance(content, tuple):
        content = tuple(
            replace(p, text=mask(p.text, mark)) if isinstance(p, ContentPart) and p.text else p
            for p in content
        )
    calls = tuple(replace(c, arguments=mask(c.arguments, mark)) for c in m.tool_calls)
    if content == m.content and calls == m.tool_calls:
        return m
    return replace(m, content=content, tool_calls=calls)


def redact(messages: Sequence[Message], store: VerbatimStore) -> tuple[list[Message], list[int]]:
    """``messages`` with their credentials masked, and the positions of those that
    changed; the originals of those are stored first, in one atomic batch."""
    out: list[Message] = []
    changed: list[int] = []
    batch: Batch | None = None
    for k, m in enumerate(messages):
        if _masked(m, "[secret]") is m:
            out.append(m)
            continue
        batch = batch or Batch(store)
        original = batch.add_messages([m])[0]
        out.append(_masked(m, f"[secret {original}]"))
        changed.append(k)
    if batch is not None:
        batch.commit()
    return out, changed


def unredact(messages: Sequence[Message], store: VerbatimStore) -> tuple[list[Message], list[str]]:
    """``messages`` with each masked one replaced by its stored original, and the ids
    the store lacks. A mark whose original does not mask to the message as it is
    (text that only looks like a mark) is left as it is."""
    marked = {
        k: SECRET_MARK.search(m.text + "".join(c.arguments for c in m.tool_calls))
        for k, m in enumerate(messages)
    }
    wanted = {k: found.group(1) for k, found in marked.items() if found}
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
        if _masked(original, f"[secret {entry}]").fingerprint == messages[k].fingerprint:
            out[k] = replace(original, metadata=messages[k].metadata)
    return out, list(dict.fromkeys(missing))
