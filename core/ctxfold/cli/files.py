"""Reading conversation files and writing the command's output: what can go wrong
there is a :class:`CliError` with its exit code."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, TextIO

from .._json import JSONLimitError
from .._json import loads as json_loads
from ..exceptions import InvalidMessageError
from ..formats import ANTHROPIC, OPENAI, MessageFormat, Request, read_messages
from ..messages import Message
from ..wire.anthropic import from_anthropic
from ..wire.claude_code import read_claude_code
from ..wire.openai import from_openai
from ..wire.shapes import Shape, shape_of_list

__all__ = [
    "CliError",
    "Conversation",
    "InputFormat",
    "OutputError",
    "emit",
    "load_file",
    "table",
    "write",
]


class CliError(Exception):
    """A one-line reason to print before exiting with ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


class InputFormat(Enum):
    """How ``--input-format`` reads a file: by the shape of its messages (``auto``),
    or as one client's format."""

    AUTO = "auto"
    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    CLAUDE_CODE = "claude-code"


@dataclass
class Conversation:
    """One conversation of a file: its ``label`` for messages, the surrounding
    ``record`` (``None`` for a bare list), its messages and the format they came in."""

    label: str
    record: dict[str, Any] | None
    messages: list[Message]
    given: MessageFormat = OPENAI


def _read_text(path: str) -> str:
    try:
        if path == "-":
            return sys.stdin.read()
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise CliError(f"cannot read {path}: {reason}") from None


def _parse(path: str, text: str) -> tuple[list[Any], bool]:
    """Return the JSON values in the file and whether it was JSONL."""
    try:
        return [json_loads(text)], False
    except JSONLimitError as exc:
        raise CliError(f"{path}: {exc}; ctxfold does not read such JSON") from None
    except json.JSONDecodeError as whole:
        values: list[Any] = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                values.append(json_loads(line))
            except JSONLimitError as exc:
                raise CliError(
                    f"{path}, line {n}: {exc}; ctxfold does not read such JSON"
                ) from None
            except json.JSONDecodeError as exc:
                err = whole if n == 1 else exc
                where = f"line {err.lineno if n == 1 else n}, column {err.colno}"
                raise CliError(f"{path} is not valid JSON or JSONL ({where}: {err.msg})") from None
        if not values:
            raise CliError(f"{path} is empty; expected a JSON list of messages or JSONL") from None
        return values, True


def load_file(
    path: str, input_format: InputFormat = InputFormat.AUTO
) -> tuple[list[Conversation], bool]:
    """Read conversations from a JSON or JSONL file (``-`` for stdin): OpenAI's or
    Anthropic's messages, told apart by their shape unless ``input_format`` says which
    (a list, a request object ``{"system": ..., "messages": [...]}``, or JSONL of
    them), or a coding assistant's session log (one conversation)."""
    text = _read_text(path)
    if input_format is InputFormat.CLAUDE_CODE or (
        input_format is InputFormat.AUTO and _session_log(text)
    ):
        return [_claude_code(path, text)], False
    values, jsonl = _parse(path, text)
    convs: list[Conversation] = []
    for n, value in enumerate(values):
        label = f"{path}:{n + 1}" if jsonl else path
        if isinstance(value, dict) and isinstance(value.get("messages"), list):
            label = str(value.get("id", label))
        elif not isinstance(value, list):
            raise CliError(
                f"{label}: expected a list of messages or an object with a 'messages' list"
            )
        try:
            convs.append(_conversation(label, value, input_format))
        except InvalidMessageError as exc:
            raise CliError(f"{label}: invalid message: {exc}") from None
    return convs, jsonl


def _session_log(text: str) -> bool:
    """Whether ``text`` is a coding assistant's session log: JSONL of events (each with
    a string ``type``; one of its first lines a ``uuid`` or ``sessionId``), neither
    messages nor records holding them."""
    events = []
    for line in [x for x in text.split("\n", 50)[:50] if x.strip()][:20]:
        try:
            value = json_loads(line)
        except ValueError:
            continue
        if not isinstance(value, dict) or "role" in value or "messages" in value:
            return False
        events.append(value)
    return any(isinstance(e.get("type"), str) and ("uuid" in e or "sessionId" in e) for e in events)


def _claude_code(path: str, text: str) -> Conversation:
    """A session log as one conversation, given back as an Anthropic request; each line
    it could not read is named on stderr, and reading goes on."""
    try:
        log = read_claude_code(text)
    except InvalidMessageError as exc:
        raise CliError(f"{path}: {exc}") from None
    for problem in log.problems:
        print(f"ctxfold: {path}, {problem}", file=sys.stderr)
    if not log.messages:
        raise CliError(f"{path}: the session log holds no messages to read")
    record: dict[str, Any] = {"messages": log.messages}
    if log.system is not None:
        record["system"] = log.system
    try:
        messages = from_anthropic(log.messages, system=log.system)
    except InvalidMessageError as exc:
        raise CliError(f"{path}: invalid message: {exc}") from None
    return Conversation(path, record, messages, Request(Shape.ANTHROPIC, record))


def _conversation(label: str, value: Any, fmt: InputFormat) -> Conversation:
    """One file value (a list of messages, or a record holding them) read as ``fmt``."""
    record = value if isinstance(value, dict) else None
    raw = value["messages"] if record is not None else value
    shape = shape_of_list(raw) if isinstance(raw, list) else Shape.EITHER
    if fmt is InputFormat.OPENAI:
        if shape is Shape.ANTHROPIC:
            raise InvalidMessageError(
                "these are Anthropic messages (tool_use, tool_result or thinking blocks); "
                "use --input-format anthropic, or auto"
            )
        given = Request(Shape.OPENAI, record) if record is not None else OPENAI
        return Conversation(label, record, from_openai(raw), given)
    if fmt is InputFormat.ANTHROPIC and shape is Shape.OPENAI:
        raise InvalidMessageError(
            "these are OpenAI messages (tool calls or 'tool' messages); use "
            "--input-format openai, or auto"
        )
    if fmt is InputFormat.ANTHROPIC:
        system = record.get("system") if record is not None else None
        given = Request(Shape.ANTHROPIC, record) if record is not None else ANTHROPIC
        return Conversation(label, record, from_anthropic(raw, system=system), given)
    messages, given = read_messages(value)
    return Conversation(label, record, messages, given)


def _render_text(messages: Sequence[Message]) -> str:
    lines: list[str] = []
    for m in messages:
        head = m.role + (f" ({m.name})" if m.name else "")
        if m.tool_call_id:
            head += f" -> {m.tool_call_id}"
        lines.append(f"[{head}]")
        if m.text:
            lines.append(m.text)
        lines.extend(f"  call {c.id}: {c.name}({c.arguments})" for c in m.tool_calls)
        lines.append("")
    return "\n".join(lines)


def table(rows: list[list[str]], out: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        cells = [
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells).rstrip(), file=out)
        if n == 0:
            print("  ".join("-" * w for w in widths), file=out)


def write(conv: Conversation, messages: Sequence[Message], jsonl: bool, fmt: str) -> None:
    """One conversation's messages to stdout: as it was read (``json``), as OpenAI's
    or Anthropic's messages (``openai``, ``anthropic``; in the record they came in), or
    as a readable transcript (``text``)."""
    if fmt == "text":
        emit(_render_text(messages) + "\n", escape=True)
        return
    payload: Any
    if fmt == "json":
        payload = conv.given.write(messages)
    else:
        kind = Shape.ANTHROPIC if fmt == "anthropic" else Shape.OPENAI
        payload = Request(kind, conv.record or {}).write(messages)
        if conv.record is None and set(payload) == {"messages"}:
            payload = payload["messages"]  # a list came in: a list goes out
    indent = None if jsonl else 2
    text = json.dumps(payload, ensure_ascii=False, indent=indent)
    if not _encodable(text):  # a lone surrogate (valid JSON escapes, no UTF-8 form)
        text = json.dumps(payload, ensure_ascii=True, indent=indent)
    emit(text + "\n")


def _encodable(text: str) -> bool:
    try:
        text.encode(getattr(sys.stdout, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def emit(text: str, *, escape: bool = False) -> None:
    """Write to stdout; what the output cannot hold is escaped (``escape``), and a
    stdout that is closed or fails is an :class:`OutputError`."""
    out = sys.stdout
    if out is None:
        raise OutputError("there is no standard output to write to")
    if escape and not _encodable(text):
        encoding = getattr(out, "encoding", None) or "utf-8"
        text = text.encode(encoding, "backslashreplace").decode(encoding)
    try:
        out.write(text)
    except ValueError as exc:  # a closed stream
        raise OutputError(f"cannot write the output: {exc}") from None


class OutputError(CliError):
    """The output cannot be written: exit code 3."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code=3)
