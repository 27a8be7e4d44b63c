"""A coding assistant's session log (Claude Code's JSONL transcripts, kept under
``~/.claude/projects/<project>/<session>.jsonl``) read into Anthropic Messages-API
messages, so that a user can compress, report on and inspect their own agent sessions.

Each line of a log is one JSON object: a ``type`` (``"user"``, ``"assistant"``, and
bookkeeping: ``"summary"``, ``"system"``, ``"file-history-snapshot"``,
``"queue-operation"``, ``"attachment"``, ...), a ``uuid``, a ``parentUuid``,
``isSidechain``, ``isMeta``, ``sessionId``, ``timestamp``, and for the conversation's
lines a ``message`` in the Messages API's shape. How the log is read:

- **One API message, several lines.** The assistant's reply is written one content
  block a line (thinking, text, each ``tool_use``), the lines sharing ``message.id``;
  they are merged in order into one assistant message, each block as written (a
  thinking block with its signature). Lines of that id still join it when tool results
  or bookkeeping lines were written between them (a tool run while the reply streamed).
- **Turns alternate.** Consecutive user lines (the results of parallel calls, written
  one a line; an interruption notice) make one user turn, and consecutive assistant
  messages one assistant turn, as Claude Code merges them before a request. In a user
  turn after calls, the ``tool_result`` blocks come first, in the order of the calls.
- **Left out:** side chains (``isSidechain``: a sub-agent's transcript; pass
  ``sidechains=True`` to read an ``agent-<id>.jsonl`` file of its own), meta lines
  (``isMeta``: slash-command caveats, hook notices; ``isVisibleInTranscriptOnly``),
  Claude Code's own error notices (``isApiErrorMessage``: "API Error: 529 ...", never a
  model's reply), every other ``type``, and a line whose ``uuid`` was read already (a
  log resumed, or reopened by an editor, can write history again).
- **Compactions.** ``/compact`` (or the automatic one) writes a ``compact_boundary``
  system line, then a user line marked ``isCompactSummary`` holding a model's summary
  of everything before it. The lines before the boundary stay in the file, so the
  summary repeats what :attr:`ClaudeCodeLog.messages` holds already: it is left out
  and listed in :attr:`ClaudeCodeLog.compactions`. When the log holds nothing before
  it (a file that starts at the boundary), the summary is all there is of that
  history, and it is read as the user turn it was sent as.
- **Problems** are reported by line number and reading goes on: a line that is not
  JSON (a last line cut short by a crash, :attr:`ProblemKind.TRUNCATED`), not an
  object, or not in the Messages API's shape is skipped; a result whose call is not
  in the assistant message before it, or a second result or call with one id, is
  left out (a request holding it is refused); a call with no result is kept.

Claude Code does not write its system prompt to the log: :attr:`ClaudeCodeLog.system`
is ``None`` for its logs. The lines are read in the order they were written (a
conversation rewound to an earlier prompt keeps its abandoned branch in the file, and
here).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from .._json import loads as json_loads
from ..exceptions import InvalidMessageError

__all__ = [
    "ClaudeCodeLog",
    "Compaction",
    "LineProblem",
    "ProblemKind",
    "read_claude_code",
    "read_claude_code_file",
]

_CONVERSATION = ("user", "assistant")


class ProblemKind(Enum):
    """What was wrong with a line of a log (the line is skipped unless said)."""

    CORRUPT_JSON = "corrupt JSON"  # not JSON, not UTF-8, or past the JSON limits
    TRUNCATED = "truncated"  # the last line, cut short: a crash or a log still written
    NOT_AN_OBJECT = "not an object"  # JSON, but no object (a list, a number)
    UNKNOWN_SHAPE = "unknown shape"  # a user or assistant line not in the API's shape
    ORPHAN_RESULT = "orphan result"  # its call is not in the assistant message before
    DUPLICATE_RESULT = "duplicate result"  # a second result for one call
    DUPLICATE_CALL = "duplicate call"  # a tool_use id used already
    UNANSWERED_CALL = "unanswered call"  # kept: its result is not in the log
    CUT_OFF = "cut off"  # kept: the log ends with the call waiting for its result


@dataclass(frozen=True)
class LineProblem:
    """A problem found on line ``line`` (1-based) of a log, ``reason`` in words."""

    line: int
    kind: ProblemKind
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


@dataclass(frozen=True)
class Compaction:
    """A compaction Claude Code made: its summary on line ``line``, written when
    ``messages[:at]`` had been read; ``kept`` when the summary is one of the messages
    (the log held nothing before it), else it is left out for the messages it
    summarizes."""

    line: int
    at: int
    summary: str
    kept: bool


@dataclass(frozen=True)
class ClaudeCodeLog:
    """A session log read: ``messages``, Anthropic Messages-API dicts in conversation
    order (``{"role": "user" | "assistant", "content": str | [blocks]}``, turns
    alternating); ``system``, the system prompt when the log carries one; the
    ``problems`` found, by line; and the ``compactions`` Claude Code made."""

    messages: list[dict[str, Any]]
    system: str | None = None
    problems: tuple[LineProblem, ...] = ()
    compactions: tuple[Compaction, ...] = ()


def read_claude_code(
    lines: Iterable[str | bytes] | str | bytes, *, sidechains: bool = False
) -> ClaudeCodeLog:
    """Read a Claude Code session log from its lines (an open file, a list of lines, or
    the whole text, split at ``"\\n"`` only: JSON may hold U+2028 unescaped, where
    ``str.splitlines`` would cut a line). ``sidechains=True`` reads a sub-agent's lines
    (its own ``agent-<id>.jsonl``) instead of the main conversation's.

    Raises :class:`~ctxfold.exceptions.InvalidMessageError` when no line is an entry of
    such a log (another file given); a log that is one in part is read, its problems
    listed in :attr:`ClaudeCodeLog.problems`.
    """
    if isinstance(lines, str):
        lines = lines.split("\n")
    elif isinstance(lines, bytes):
        lines = lines.split(b"\n")
    reader = _Reader(sidechains=sidechains)
    for number, line in enumerate(lines, start=1):
        reader.feed(number, line)
    return reader.finish()


def read_claude_code_file(
    path: str | os.PathLike[str], *, sidechains: bool = False
) -> ClaudeCodeLog:
    """Read the Claude Code session log at ``path`` (see :func:`read_claude_code`); a
    line that is not UTF-8 is reported, not fatal."""
    with open(path, "rb") as f:
        return read_claude_code(f, sidechains=sidechains)


class _Reader:
    """The state of one log's reading: the turns so far and what their calls wait for."""

    def __init__(self, *, sidechains: bool) -> None:
        self.sidechains = sidechains
        self.messages: list[dict[str, Any]] = []
        self.problems: list[LineProblem] = []
        self.compactions: list[Compaction] = []
        self.seen_uuids: set[str] = set()
        self.entries = 0  # lines that are objects with a string "type"
        self.nonblank = 0
        self.unparsed: tuple[int, str] | None = None  # the last line not read as JSON
        self.open_id: str | None = None  # message.id of the newest assistant turn
        self.open_index = -1  # that turn's index in messages
        self.open_calls: set[str] = set()  # the calls it makes
        self.turn_calls: dict[int, list[str]] = {}  # assistant turn -> its calls, in order
        self.call_lines: dict[str, int] = {}
        self.answered: set[str] = set()

    def problem(self, line: int, kind: ProblemKind, reason: str) -> None:
        self.problems.append(LineProblem(line, kind, reason))

    def feed(self, number: int, raw: str | bytes) -> None:
        """Read one line (its number 1-based)."""
        if not raw.strip():
            return
        self.nonblank += 1
        if self.unparsed is not None:  # not the last line: corrupt, not cut short
            self.problem(self.unparsed[0], ProblemKind.CORRUPT_JSON, self.unparsed[1])
            self.unparsed = None
        try:
            entry = json_loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
        except UnicodeDecodeError as exc:
            self.unparsed = (number, f"not UTF-8 ({exc.reason} at byte {exc.start})")
            return
        except ValueError as exc:
            self.unparsed = (number, f"not JSON ({exc})")
            return
        if not isinstance(entry, dict):
            self.problem(
                number,
                ProblemKind.NOT_AN_OBJECT,
                f"a log line is a JSON object, this one is a {type(entry).__name__}",
            )
            return
        if isinstance(entry.get("type"), str):
            self.entries += 1
        if entry.get("type") in _CONVERSATION and self._wanted(entry):
            self._conversation(number, entry)

    def _wanted(self, entry: Mapping[str, Any]) -> bool:
        """Whether a user or assistant line is part of the conversation read."""
        uuid = entry.get("uuid")
        if isinstance(uuid, str):
            if uuid in self.seen_uuids:
                return False
            self.seen_uuids.add(uuid)
        side = entry.get("isSidechain") is True
        return side == self.sidechains and entry.get("isApiErrorMessage") is not True

    def _conversation(self, number: int, entry: Mapping[str, Any]) -> None:
        kind = entry["type"]
        message = entry.get("message")
        content, why = _content(message, kind)
        if content is None:
            self.problem(number, ProblemKind.UNKNOWN_SHAPE, why)
            return
        if kind == "user" and entry.get("isCompactSummary") is True:
            self._compaction(number, content)
            return
        if entry.get("isMeta") is True or entry.get("isVisibleInTranscriptOnly") is True:
            return
        if kind == "assistant":
            assert isinstance(message, Mapping)  # _content checked it
            mid = message.get("id")
            self._assistant(number, content, mid if isinstance(mid, str) else None)
        else:
            self._user(number, content)

    def _compaction(self, number: int, content: str | list[Any]) -> None:
        if isinstance(content, str):
            summary = content
        else:
            summary = "\n".join(b["text"] for b in content if isinstance(b.get("text"), str))
        kept = not self.messages
        self.compactions.append(Compaction(number, len(self.messages), summary, kept))
        if kept:
            self._user(number, content)

    def _assistant(self, number: int, content: str | list[Any], mid: str | None) -> None:
        blocks: list[Any] = []
        for block in [content] if isinstance(content, str) else content:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                call = block["id"]
                if call in self.call_lines:
                    self.problem(
                        number,
                        ProblemKind.DUPLICATE_CALL,
                        f"tool call {call!r} was made on line {self.call_lines[call]} "
                        "already (a request refuses two calls with one id): left out",
                    )
                    continue
                self.call_lines[call] = number
            blocks.append(block)
        if not blocks:
            return
        if mid is None or mid != self.open_id:
            if not self.messages or self.messages[-1]["role"] != "assistant":
                self.messages.append({"role": "assistant", "content": []})
                self.open_calls = set()
            self.open_index = len(self.messages) - 1
            self.open_id = mid
        turn = self.messages[self.open_index]
        for block in blocks:
            _add(turn, block)
            if isinstance(block, dict) and block.get("type") == "tool_use":
                self.open_calls.add(block["id"])
                self.turn_calls.setdefault(self.open_index, []).append(block["id"])

    def _user(self, number: int, content: str | list[Any]) -> None:
        if isinstance(content, str):
            pieces: list[Any] = [content]
        else:
            pieces = [
                b for b in content if b.get("type") != "tool_result" or self._answers(number, b)
            ]
            if not pieces:
                return
        if not self.messages or self.messages[-1]["role"] != "user":
            if isinstance(content, str):
                self.messages.append({"role": "user", "content": content})
                return
            self.messages.append({"role": "user", "content": []})
        for piece in pieces:
            _add(self.messages[-1], piece)

    def _answers(self, number: int, block: Mapping[str, Any]) -> bool:
        """Whether a tool result answers a call still open (else it is reported)."""
        call = block["tool_use_id"]
        if call in self.answered:
            self.problem(
                number,
                ProblemKind.DUPLICATE_RESULT,
                f"a second result for tool call {call!r}: left out",
            )
            return False
        if call not in self.open_calls:
            where = (
                f"made on line {self.call_lines[call]}, not in the assistant message just before"
                if call in self.call_lines
                else "not in the log read (on a line skipped, or before the log starts)"
            )
            self.problem(
                number,
                ProblemKind.ORPHAN_RESULT,
                f"the result of tool call {call!r}, {where}: left out",
            )
            return False
        self.answered.add(call)
        return True

    def finish(self) -> ClaudeCodeLog:
        """The log read: results in the order of their calls, calls left without a
        result reported, problems by line."""
        if self.unparsed is not None:
            line, why = self.unparsed
            self.problem(line, ProblemKind.TRUNCATED, f"the last line is cut short: {why}")
        if not self.entries and self.nonblank:
            first = f" ({min(self.problems, key=lambda p: p.line)})" if self.problems else ""
            raise InvalidMessageError(
                "no line is an entry of a Claude Code session log, a JSON object with a "
                f"string 'type'{first}; give the session's .jsonl file, as found under "
                "~/.claude/projects/<project>/"
            )
        for index, calls in self.turn_calls.items():
            self._pair(index, calls)
        self.problems.sort(key=lambda p: p.line)
        return ClaudeCodeLog(
            messages=self.messages,
            problems=tuple(self.problems),
            compactions=tuple(self.compactions),
        )

    def _pair(self, index: int, calls: list[str]) -> None:
        """Put the results after assistant turn ``index`` first, in the order of its
        ``calls``, and report the calls with no result there."""
        after = self.messages[index + 1]["content"] if index + 1 < len(self.messages) else []
        results: set[str] = set()
        if isinstance(after, list):
            order = {call: k for k, call in enumerate(calls)}
            after.sort(
                key=lambda b: (
                    (0, order[b["tool_use_id"]]) if b.get("type") == "tool_result" else (1, 0)
                )
            )
            results = {b["tool_use_id"] for b in after if b.get("type") == "tool_result"}
        for call in calls:
            if call in results:
                continue
            if index + 1 < len(self.messages):
                self.problem(
                    self.call_lines[call],
                    ProblemKind.UNANSWERED_CALL,
                    f"tool call {call!r} has no result in the log (kept)",
                )
            else:
                self.problem(
                    self.call_lines[call],
                    ProblemKind.CUT_OFF,
                    f"the log ends with tool call {call!r} waiting for its result "
                    "(kept: the session was cut off while the tool ran)",
                )


def _add(turn: dict[str, Any], piece: Any) -> None:
    """Add a string or a block to a turn (a string content becomes a text block)."""
    content = turn["content"]
    if isinstance(content, str):
        content = turn["content"] = [{"type": "text", "text": content}]
    content.append({"type": "text", "text": piece} if isinstance(piece, str) else piece)


def _content(message: Any, role: str) -> tuple[str | list[Any] | None, str]:
    """A line's message content if it is in the Messages API's shape, else ``None`` and
    why not."""
    if not isinstance(message, Mapping):
        return None, f"a {role} line needs a 'message' object"
    if message.get("role") != role:
        return None, f"a {role} line's message has role {message.get('role')!r}"
    content = message.get("content")
    if isinstance(content, str):
        return (content, "") if content else (None, "the message has no content")
    if not isinstance(content, list) or not content:
        return None, "the message's content is neither text nor a list of blocks"
    for block in content:
        why = _block_problem(block, role)
        if why:
            return None, why
    return content, ""


def _block_problem(block: Any, role: str) -> str:
    """Why a content block is not one the Messages API takes in a ``role`` message
    (empty when it is)."""
    if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
        return "a content block is not an object with a string 'type'"
    kind = block["type"]
    if "text" in block and not isinstance(block["text"], str):
        return f"a {kind!r} block's 'text' is not a string"
    if kind == "tool_use":
        if role != "assistant":
            return "a 'tool_use' block in a user message"
        if not _ident(block.get("id")) or not isinstance(block.get("name"), str):
            return "a 'tool_use' block without a string 'id' and 'name'"
    elif kind == "tool_result":
        if role != "user":
            return "a 'tool_result' block in an assistant message"
        if not _ident(block.get("tool_use_id")):
            return "a 'tool_result' block without a string 'tool_use_id'"
        inner = block.get("content")
        if inner is not None and not isinstance(inner, str):
            if not isinstance(inner, list):
                return "a 'tool_result' block's content is neither text nor blocks"
            for part in inner:
                why = _block_problem(part, role)
                if why:
                    return why
    return ""


def _ident(value: Any) -> bool:
    return isinstance(value, str) and bool(value)
