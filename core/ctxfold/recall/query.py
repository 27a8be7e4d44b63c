"""What a render recalls for: the query. By default the newest user message when it
is the last message and asks something (a chat's last turn that only says "Bye!"
recalls nothing: recall would take the room the rest of the history needs); in an
agent's run, the newest tool request and the errors its results report, so that
earlier output about the same files, symbols or error comes back."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..exceptions import ConfigurationError
from ..messages import Message
from ..result import from_user, without_recall
from ..text.scoring import has_error
from ..text.wordlists import word_list

__all__ = ["Query", "asks", "check_query", "default_query", "resolve_query"]

#: What ``query=`` takes: a text, ``None`` (or ``True``) for the default, ``False`` off.
Query = str | bool | None

_ERROR_LINES = 6  # of each newest tool result, the error lines the query holds at most


def default_query(messages: Sequence[Message]) -> str | None:
    """The query a history asks by itself, or ``None``: the newest user message's text
    when it is the last message and :func:`asks` something; an assistant's tool calls
    when they are last; after tool results, the calls they answer and the lines that
    report an error."""
    if not messages:
        return None
    last = without_recall(messages[-1:])
    if not last:
        return None
    if from_user(last[0]):
        text = last[0].text.strip()
        return text if asks(text) else None
    k = len(messages) - 1
    parts: list[str] = []
    while k >= 0 and messages[k].role == "tool":
        lines = messages[k].text.splitlines()
        parts += [ln.strip() for ln in lines if has_error(ln.lower())][:_ERROR_LINES]
        k -= 1
    if k >= 0 and messages[k].role == "assistant":
        parts = [f"{c.name} {c.arguments}" for c in messages[k].tool_calls] + parts
    return " ".join(parts).strip() or None


# A request for something said before, when it opens a message without a question mark.
_ASKING = word_list("asking_words")
_FIRST_WORD = re.compile(r"[A-Za-z']+")


def asks(text: str) -> bool:
    """Whether a user's message asks something: it holds a question mark, or opens
    with a question word or a request ("Remind me of the dates")."""
    if "?" in text:
        return True
    first = _FIRST_WORD.search(text)
    return first is not None and first.group(0).lower() in _ASKING


def check_query(query: object) -> Query:
    """``query`` when it is a ``query=`` value (a text, ``None``, ``True`` or
    ``False``); a :class:`ConfigurationError` otherwise, whether or not the history
    needs compressing."""
    if query is None or isinstance(query, (str, bool)):
        return query
    raise ConfigurationError(
        f"query must be a string, None (the newest user message when it is last) or "
        f"False (no recall), got {type(query).__name__}"
    )


def resolve_query(messages: Sequence[Message], query: Query) -> str | None:
    """The query to recall for (``None``: no recall)."""
    query = check_query(query)
    if query is False:
        return None
    if query is None or query is True:
        return default_query(messages)
    return query.strip() or None
