"""Hypothesis strategies that generate chat histories, tool calls included.

Needs hypothesis (``pip install 'ctxfold[dev]'``).
"""

from __future__ import annotations

import json
from typing import Any

from ..exceptions import MissingDependencyError

try:
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - exercised only without the dev extra
    raise MissingDependencyError("ctxfold.testing.strategies", "hypothesis", "dev") from None

from ..messages import ContentPart, Message, ToolCall

__all__ = ["conversations", "texts"]

_ALPHABET = st.characters(
    codec="utf-8", categories=("L", "N", "P", "S", "Zs"), include_characters="\n\t"
)


def texts(max_size: int = 300) -> st.SearchStrategy[str]:
    """Message text: prose-like runs, identifiers, paths, JSON, unicode."""
    word = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,12}", fullmatch=True)
    path = st.builds(lambda *p: "/".join(p) + ".py", word, word)
    prose = st.lists(st.one_of(word, path, st.text(_ALPHABET, max_size=20)), max_size=40).map(
        " ".join
    )
    return st.one_of(prose, st.text(_ALPHABET, max_size=max_size)).map(lambda t: t[:max_size])


@st.composite
def _tool_exchange(draw: Any, n: int) -> list[Message]:
    calls = [
        ToolCall(
            id=f"call_{n}_{k}",
            name=draw(st.sampled_from(["bash", "read_file", "search", "get_user"])),
            arguments=json.dumps({"arg": draw(texts(60))}),
        )
        for k in range(draw(st.integers(1, 3)))
    ]
    text = draw(st.one_of(st.none(), texts(80)))
    out = [Message("assistant", text, tool_calls=tuple(calls))]
    results = [Message("tool", draw(texts()), tool_call_id=c.id) for c in calls]
    out += draw(st.permutations(results))
    return out


@st.composite
def conversations(
    draw: Any, *, max_units: int = 14, tool_calls: bool = True, irregular: bool = True
) -> list[Message]:
    """A chat history: an optional system prompt, then user turns, assistant turns and
    tool exchanges; with ``irregular``, sometimes a result whose call is missing at
    the start and a call without a result at the end, as real histories have."""
    msgs: list[Message] = []
    if draw(st.booleans()):
        msgs.append(Message("system", draw(texts(200))))
    if irregular and tool_calls and draw(st.integers(0, 9)) == 0:
        msgs.append(Message("tool", draw(texts()), tool_call_id="call_lost"))
    kinds = ["user", "assistant", "multipart"] + (["tools", "tools"] if tool_calls else [])
    for n in range(draw(st.integers(1, max_units))):
        kind = draw(st.sampled_from(kinds))
        if kind == "tools":
            msgs.extend(draw(_tool_exchange(n)))
        elif kind == "multipart":
            parts = (
                ContentPart("text", draw(texts(120))),
                ContentPart("image_url", extra='{"image_url":{"url":"https://example.com/a.png"}}'),
            )
            msgs.append(Message("user", parts))
        else:
            msgs.append(Message(kind, draw(texts()), name=draw(st.none() | st.just("bob"))))
    if irregular and tool_calls and draw(st.integers(0, 4)) == 0:
        msgs.append(Message("assistant", None, tool_calls=(ToolCall("call_open", "bash", "{}"),)))
    return msgs
