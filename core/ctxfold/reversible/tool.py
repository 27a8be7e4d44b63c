"""The expand tool: lets the model itself unfold what a reversible round folded.

A reversible output names its round in one line, ``[ctxfold round <id>: 12 earlier
messages condensed]``, and marks every shortened message with ``[expand <id>]``. Give
the model :func:`expand_tool` and it can read any of those originals in full, a page
at a time. The tool is framework-neutral: its ``to_openai()`` / ``to_anthropic()``
definitions go in a chat request, and :meth:`ExpandTool.answer` turns the model's tool
call into the tool-result message; ``langchain_ctx.expand_tool`` and
``llamaindex_ctx.expand_tool`` wrap it for those frameworks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from .._json import loads as json_loads
from ..contract import CounterSpec
from ..exceptions import ConfigurationError, ExpandError
from ..messages import Message, ToolCall, transcript
from ..storage.store import VerbatimStore, get_store
from ..text.secrets import mask
from ..tokens import get_counter
from .expand import holding, originals
from .redaction import holds_redacted, mask_message

__all__ = ["ExpandTool", "Search", "expand_tool"]

#: A search of one conversation's whole history: ``(query, max_tokens)`` to the text of
#: the passages found within ``max_tokens`` (empty when nothing matches), e.g. a
#: session's :meth:`~ctxfold.Session.search`.
Search = Callable[[str, int], str]

DESCRIPTION = (
    "Read in full what context compression folded away. The conversation may hold "
    "lines such as '[ctxfold round <id>: 12 earlier messages condensed]' and markers "
    "such as '[expand <id>]' on shortened messages: call this tool with that id to get "
    "the original messages back. Long results come in pages: pass page=2, 3, ... for "
    "the rest."
)
SEARCH_HINT = " No id? Pass query='some words' to search the whole conversation."
_MIN_PAGE = 64  # tokens: a smaller page would not hold a useful excerpt
_MAX_ID = 200  # characters: ids are 12-64 digits; "[expand <id>]" with room to spare
_ECHO = 12  # tokens: the most of a bad call an answer repeats (its advice must fit too)
_MAX_QUERY = 2000  # characters: a longer query is cut (never a flood to rank)


def _repr(value: object) -> str:
    try:
        return repr(value)
    except ValueError:  # an integer too long to write out
        return f"a {type(value).__name__} too long to show"


class ExpandTool:
    """A tool named ``expand`` that gives the model the originals behind an id.

    Calling it (``tool(id, page=1)``) returns text for the model: the original
    messages of a round (the ones it hid) or of one marked message, at most
    ``max_tokens`` per page, with a line saying how to get the next page. A wrong id or
    page comes back as a sentence that says what to pass instead, never as an
    exception (a model's bad call must not end the agent's loop); use
    :func:`ctxfold.expand` to get :class:`~ctxfold.ExpandError` instead.

    Args:
        store: where the rounds were stored (the compressor's ``store``; ``None`` is
            the process's memory store).
        max_tokens: the most one page may hold.
        counter: how tokens are counted (any :func:`ctxfold.get_counter` spec).
        name: the tool's name as the model sees it.
        redact: mask credentials in every answer (as ``redact=True`` masked them in
            the history), so the model never reads one back. ``None`` (the default):
            whenever the store holds originals that ``redact=True`` stored (it says so
            in the store, see :func:`ctxfold.reversible.redaction.holds_redacted`),
            checked at each call; ``False`` never masks, even then (only for a model
            that may read the credentials the history hid from it).
        search: a search of the conversation's whole history (:data:`Search`): the
            tool then also takes ``query`` instead of an id. One conversation's only:
            a store may hold other users' rounds, so a search is never of a store
            (:meth:`ctxfold.Session.expand_tool` and the wrappers' agents give their
            own conversation's).
    """

    def __init__(
        self,
        store: VerbatimStore | str | None = None,
        *,
        max_tokens: int = 4000,
        counter: CounterSpec = None,
        name: str = "expand",
        redact: bool | None = None,
        search: Search | None = None,
    ) -> None:
        if search is not None and not callable(search):
            raise ConfigurationError(
                f"search must be a callable (query, max_tokens), got {search!r}"
            )
        self._search = search
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise ConfigurationError(f"max_tokens must be an integer, got {max_tokens!r}")
        if max_tokens < _MIN_PAGE:
            raise ConfigurationError(f"max_tokens must be at least {_MIN_PAGE}, got {max_tokens}")
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"name must be a non-empty string, got {name!r}")
        if redact is not None and not isinstance(redact, bool):
            raise ConfigurationError(f"redact must be True, False or None, got {redact!r}")
        self.redact = redact
        self._holds_redacted = False  # once the store says so, it always will
        self.store = get_store(store)
        self.max_tokens = max_tokens
        self.counter = get_counter(counter)
        self.name = name
        self.description = DESCRIPTION + (SEARCH_HINT if self.searches else "")

    @property
    def searches(self) -> bool:
        """Whether the tool takes a ``query`` (it has a search of its conversation)."""
        return self._search is not None

    def found(self, query: str, max_tokens: int) -> str:
        """What a search of the conversation finds for ``query`` within
        ``max_tokens`` (empty: nothing, or no search)."""
        return self._search(query, max_tokens) if self._search is not None else ""

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments (``query`` too when the tool searches: then
        neither argument is required, one of them is)."""
        properties: dict[str, Any] = {
            "id": {
                "type": "string",
                "description": "the id from '[ctxfold round <id>...]' or '[expand <id>]'",
            },
            "page": {
                "type": "integer",
                "minimum": 1,
                "description": "which page of a long result (default 1)",
            },
        }
        if not self.searches:
            return {"type": "object", "properties": properties, "required": ["id"]}
        properties["query"] = {
            "type": "string",
            "description": "words to search the conversation for (instead of an id)",
        }
        return {"type": "object", "properties": properties}

    def to_openai(self) -> dict[str, Any]:
        """The tool definition for the OpenAI chat API (``tools=[...]``)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def to_anthropic(self) -> dict[str, Any]:
        """The tool definition for the Anthropic messages API (``tools=[...]``)."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.parameters,
        }

    def __call__(self, id: str = "", page: int = 1, query: str = "") -> str:
        """The originals behind ``id``, page ``page``, or (with no id, when the tool
        searches) the passages that match ``query``, as text for the model: always
        within ``max_tokens``, whatever it is given."""
        if self.searches and not (isinstance(id, str) and id.strip()) and query:
            return self._within(self._searched(query))
        return self._within(self._answer(id, page))

    def redacts(self, store: VerbatimStore | None = None) -> bool:
        """Whether answers read from ``store`` (default: the tool's) are masked now:
        ``redact`` if given, else whether the store holds originals that
        ``redact=True`` stored."""
        if self.redact is not None:
            return self.redact
        if store is not None and store is not self.store:
            return holds_redacted(store)
        self._holds_redacted = self._holds_redacted or holds_redacted(self.store)
        return self._holds_redacted

    def stores(self) -> list[VerbatimStore]:
        """The stores an id is looked up in, in order: the tool's ``store``. A tool
        over several (the sessions of an agent's thread, each in its own part of a
        store) gives them here; an id is read from the first that holds it."""
        return [self.store]

    def _searched(self, query: object) -> str:
        if not isinstance(query, str) or not query.strip():
            return f"query must be words to look for, not {self._echo(_repr(query))}."
        query = query.strip()[:_MAX_QUERY]
        text = self.found(query, self.max_tokens)
        if not text:
            return f"Nothing in the conversation matches {self._echo(query)}; try other words."
        return mask(text) if self.redacts() else text

    def _answer(self, id: str, page: int) -> str:
        if not isinstance(id, str) or not id.strip():
            where = "a '[ctxfold round <id>...]' line or an '[expand <id>]' marker"
            if self.searches:
                return f"Pass an id from {where}, or a query."
            return f"Pass the id from {where}."
        if isinstance(page, bool) or not isinstance(page, int) or page < 1:
            return f"page must be a whole number from 1 up, not {self._echo(_repr(page))}."
        if len(id) > _MAX_ID or not id.isascii():  # no id is: never echo or look up a flood
            return f"{self._echo(id.strip())} is no id; pass one from a marker or a round's tag."
        try:
            text = self._text(id.strip())
        except ExpandError as exc:
            return f"{exc}."
        shown = self._echo(id.strip())
        if not text:
            return f"{shown} hid no messages; expand the [expand <id>] markers instead."
        pages = self._pages(text)
        if page > len(pages):
            return f"{shown} has {len(pages)} page(s); ask for one from 1 to {len(pages)}."
        if len(pages) == 1:
            return pages[0]
        more = f"; call {self.name}(id, page={page + 1}) for more" if page < len(pages) else ""
        text = pages[page - 1]
        sep = "" if text.endswith("\n") else "\n"
        return f"{text}{sep}[page {page} of {len(pages)}{more}]"

    def _text(self, id: str) -> str:
        """The originals behind ``id`` as text; when redacting, masked field by field
        (a credential inside JSON's escapes too), then as text."""
        stores = self.stores()
        store = holding(stores, id) or (stores[0] if stores else self.store)
        found = originals(store, id)
        if not self.redacts(store):
            return transcript(found)
        return mask(transcript([mask_message(m) for m in found]))

    def _within(self, text: str, limit: int | None = None, end: str = " [cut]") -> str:
        """``text``, its head cut to ``limit`` tokens (default ``max_tokens``) with
        ``end`` if it is over, counted with the tool's counter: every answer leaves
        through here (a page always fits; an answer about a bad call echoes some of
        it)."""
        count = self.counter.count_text
        limit = self.max_tokens if limit is None else limit
        if count(text) <= limit:
            return text
        n = 4 * limit
        while n and count(f"{text[:n]}{end}") > limit:
            n = n * 3 // 4
        return f"{text[:n]}{end}"

    def _echo(self, text: str) -> str:
        """``text`` as an answer repeats it: at most a few tokens of it."""
        return self._within(text, _ECHO, "...")

    async def acall(self, id: str = "", page: int = 1, query: str = "") -> str:
        """:meth:`__call__` in a worker thread (the store may do I/O)."""
        return await asyncio.to_thread(self, id, page, query)

    def answer(self, call: ToolCall | Mapping[str, Any]) -> Message:
        """The tool-result message for the model's call (a :class:`ctxfold.ToolCall`
        or an OpenAI ``tool_calls`` entry): role ``tool``, answering its id (``None``
        when the call's id is not a string), its text within ``max_tokens``."""
        call_id: Any
        arguments: Any
        if isinstance(call, ToolCall):
            call_id, arguments = call.id, call.arguments
        else:
            function = call.get("function") if isinstance(call, Mapping) else None
            call_id = call.get("id") if isinstance(call, Mapping) else None
            arguments = function.get("arguments", "{}") if isinstance(function, Mapping) else None
        try:
            args = json_loads(arguments) if isinstance(arguments, str) else dict(arguments)
        except (ValueError, TypeError):
            args = None
        if not isinstance(args, dict):
            shown = self._echo(_repr(arguments))
            text = f'The arguments must be a JSON object like {{"id": "..."}}, not {shown}.'
        else:
            text = self(args.get("id", ""), args.get("page", 1), args.get("query", ""))
        tool_call_id = call_id if isinstance(call_id, str) else None
        return Message("tool", self._within(text), tool_call_id=tool_call_id)

    def _pages(self, text: str) -> list[str]:
        """``text`` cut at line ends into pages that fit ``max_tokens`` with their
        footer line (joined, they are ``text`` again)."""
        count = self.counter.count_text
        if count(text) <= self.max_tokens:
            return [text]
        footer = f"\n[page 99999 of 99999; call {self.name}(id, page=99999) for more]"
        limit = self.max_tokens - count(footer)
        pages: list[str] = []
        current: list[str] = []
        used = 0
        for line in _pieces(text, count, limit):
            cost = count(line)
            if current and used + cost > limit:
                pages.append("".join(current))
                current, used = [], 0
            current.append(line)
            used += cost
        if current:
            pages.append("".join(current))
        return pages

    def __repr__(self) -> str:
        return (
            f"ExpandTool(store={self.store!r}, max_tokens={self.max_tokens}, redact={self.redact})"
        )


def _pieces(text: str, count: Any, limit: int) -> list[str]:
    """Lines of ``text`` (with their ends), a line longer than ``limit`` cut in halves
    until every part fits."""
    out: list[str] = []
    todo = text.splitlines(keepends=True)[::-1]
    while todo:
        line = todo.pop()
        if len(line) < 2 or count(line) <= limit:
            out.append(line)
        else:
            half = len(line) // 2
            todo += [line[half:], line[:half]]
    return out


def expand_tool(
    store: VerbatimStore | str | None = None,
    *,
    max_tokens: int = 4000,
    counter: CounterSpec = None,
    name: str = "expand",
    redact: bool | None = None,
    search: Search | None = None,
) -> ExpandTool:
    """An :class:`ExpandTool` over ``store``: give it to the model beside a reversible
    history so that it can read any folded original in full (``redact``: with every
    credential masked; by default whenever the store holds originals ``redact=True``
    stored, ``False`` to opt out; ``search``: see :class:`ExpandTool`)."""
    return ExpandTool(
        store, max_tokens=max_tokens, counter=counter, name=name, redact=redact, search=search
    )
