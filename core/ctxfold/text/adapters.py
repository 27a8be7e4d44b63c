"""Format adapters: split a message's text into what to preserve and what to compress.

Pipeline: fenced code blocks are split out first and kept verbatim; each text chunk
between them goes to the first registered adapter whose ``detect`` accepts it; the
chunk's compressible pieces go to the summarizer; ``reconstruct`` puts it together. If
the result is not smaller than the original, the original is kept (the trace says
``adapter_reverted:<name>``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from .._json import loads as json_loads
from .._registry import Registry
from ..exceptions import ConfigurationError
from .fences import FenceSyntax, fences

__all__ = [
    "ERROR_LINE",
    "REGISTRY",
    "BaseAdapter",
    "CsvAdapter",
    "FormatAdapter",
    "JsonAdapter",
    "LogAdapter",
    "MarkdownAdapter",
    "Piece",
    "ProseAdapter",
    "ToolOutputAdapter",
    "XmlAdapter",
    "YamlAdapter",
    "adapters",
    "register_adapter",
    "registry_version",
    "split_message_text",
    "unregister_adapter",
]


@dataclass(frozen=True, slots=True)
class Piece:
    """A run of a message's text. ``keep`` pieces are preserved verbatim; the others are
    compressible, as ``prose`` (split into sentences) or ``lines``. ``weight`` scales the
    value of a compressible piece's content (errors high, noise low)."""

    text: str
    keep: bool
    mode: Literal["prose", "lines"] = "prose"
    weight: float = 1.0


@runtime_checkable
class FormatAdapter(Protocol):
    """Knows one text format. This is a Protocol: any object with these members works.

    ``extract_compressible(text)`` lists the compressible pieces in order;
    ``reconstruct(text, compressed)`` rebuilds the text with each compressible piece
    replaced by its compressed version (same order), keeping the preserved parts.
    """

    @property
    def name(self) -> str:
        """Short name used in traces (``adapter:<name>``)."""
        ...

    def detect(self, text: str) -> bool:
        """Whether this adapter handles ``text``."""
        ...

    def extract_preserved(self, text: str) -> list[str]:
        """The parts kept verbatim."""
        ...

    def extract_compressible(self, text: str) -> list[str]:
        """The parts a summarizer may shorten, in order."""
        ...

    def reconstruct(self, text: str, compressed: Sequence[str]) -> str:
        """``text`` with its compressible parts replaced by ``compressed``."""
        ...


class BaseAdapter:
    """Implements the protocol from one method, :meth:`split`, returning pieces whose
    concatenation is the (possibly normalized) text."""

    name = "base"

    def detect(self, text: str) -> bool:
        raise NotImplementedError

    def split(self, text: str) -> list[Piece]:
        raise NotImplementedError

    def extract_preserved(self, text: str) -> list[str]:
        return [p.text for p in self.split(text) if p.keep]

    def extract_compressible(self, text: str) -> list[str]:
        return [p.text for p in self.split(text) if not p.keep]

    def reconstruct(self, text: str, compressed: Sequence[str]) -> str:
        return join_pieces(self.split(text), compressed)


def join_pieces(pieces: Sequence[Piece], compressed: Sequence[str]) -> str:
    """Interleave preserved pieces with the compressed versions of the others."""
    it = iter(compressed)
    out = [p.text if p.keep else next(it, "") for p in pieces]
    return "".join(out)


# --------------------------------------------------------------------- line classes

#: A line that reports an error or a failure.
ERROR_LINE = re.compile(
    r"(?i)\b(?:error|exception|traceback|fail(?:ed|ure|s)?|fatal|panic|assert(?:ion)?\w*|"
    r"denied|refused|not found|no such|cannot|can't|undefined|segmentation fault|"
    r"timed? ?out|warning|deprecat\w*|exit (?:code|status) [1-9]\d*)\b"
)
_STATUS = re.compile(
    r"(?i)(?:\b\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|warnings?|tests?|"
    r"deselected)\b|\b(?:PASSED|FAILED|ERROR|SKIPPED|XFAIL|PASS|FAIL|OK)\b|^=+ .+ =+$|"
    r"^(?:ok|FAIL|---) |^test result:|^Ran \d+ tests?|collected \d+ items?)"
)
#: A line that opens with an exception's name (``KeyError: 'x'``, ``IOException``).
EXCEPTION = re.compile(r"^\w*(?:Error|Exception)\b")
#: A line that says where something happened: ``x.py:12:``, ``File "x.py", line 12``,
#: ``at f (x.js:3:9)``, ``--> src/a.rs:510:59`` (matched at the line's start).
LOCATION = re.compile(
    r"^\s*(?:[\w.@/\\~-]+\.\w+:\d+(?::\d+)?[:\s]|File \"[^\"]+\", line \d+|"
    r"at \S+ \(.*:\d+(?::\d+)?\)|--> \S+:\d+|\S+\.go:\d+)"
)
_LOGLINE = re.compile(
    r"^\s*\[?(?:\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}|\d{2}:\d{2}:\d{2})|"
    r"^\s*\[?(?:DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|CRITICAL|FATAL|TRACE)\b"
)
_DIGITS = re.compile(r"\d+")
_MAX_KEPT_LINES = 40


def _collapse_repeats(lines: list[str], *, numbers: bool = False) -> list[str]:
    """Collapse runs of 3+ repeated lines into one line plus a count; with ``numbers``
    (logs), lines that differ only in numbers (timestamps, counters) count as repeats."""
    out: list[str] = []
    i = 0

    def key_of(line: str) -> str:
        return (_DIGITS.sub("#", line) if numbers else line).strip()

    while i < len(lines):
        key = key_of(lines[i])
        j = i + 1
        while j < len(lines) and key and key_of(lines[j]) == key:
            j += 1
        if j - i > 2:
            line = lines[i].rstrip("\r\n")
            out.append(f"{line} [repeated {j - i}x]\n")
        else:
            out.extend(lines[i:j])
        i = j
    return out


def _line_pieces(lines: list[str], important: Callable[[str], object] | None) -> list[Piece]:
    """Important lines (up to a cap) are kept; the rest are compressible line runs."""
    pieces: list[Piece] = []
    kept = 0
    run: list[str] = []

    def flush() -> None:
        if run:
            pieces.append(Piece("".join(run), keep=False, mode="lines"))
            run.clear()

    for line in lines:
        is_important = bool(important and important(line)) or bool(ERROR_LINE.search(line))
        if is_important and kept < _MAX_KEPT_LINES:
            flush()
            pieces.append(Piece(line, keep=True))
            kept += 1
        elif is_important:
            flush()
            pieces.append(Piece(line, keep=False, mode="lines", weight=3.0))
        else:
            run.append(line)
    flush()
    return pieces


# ---------------------------------------------------------------------- built-ins


class ToolOutputAdapter(BaseAdapter):
    """Test runs, grep and compiler output: status lines and ``file:line:`` locations
    are kept, other lines are compressible."""

    name = "tool_output"

    @staticmethod
    def _important(line: str) -> bool:
        return bool(_STATUS.search(line) or LOCATION.match(line))

    def detect(self, text: str) -> bool:
        if text.count("\n") < 2:
            return False
        lines = text.splitlines()
        hits = sum(1 for ln in lines if _STATUS.search(ln) or LOCATION.match(ln))
        return hits >= 2 and hits * 10 >= len(lines)

    def split(self, text: str) -> list[Piece]:
        return _line_pieces(_collapse_repeats(text.splitlines(keepends=True)), self._important)


class LogAdapter(BaseAdapter):
    """Logs and stack traces: error lines, exceptions and frames are kept, repeated
    lines are collapsed with a count, other lines are compressible."""

    name = "logs"

    @staticmethod
    def _important(line: str) -> bool:
        return bool(LOCATION.match(line) or EXCEPTION.match(line))

    def detect(self, text: str) -> bool:
        if text.count("\n") < 2:
            return False
        lines = text.splitlines()
        if "Traceback (most recent call last)" in text or "panic:" in text:
            return True
        hits = sum(1 for ln in lines if _LOGLINE.match(ln) or LOCATION.match(ln))
        return hits >= 3 and hits * 3 >= len(lines)

    def split(self, text: str) -> list[Piece]:
        return _line_pieces(
            _collapse_repeats(text.splitlines(keepends=True), numbers=True), self._important
        )


class JsonAdapter(BaseAdapter):
    """JSON documents: compacted, keys and short values kept, long arrays elided with a
    count, long strings shortened (never inside an identifier)."""

    name = "json"

    def __init__(self, *, max_items: int = 8, keep_items: int = 3, max_string: int = 300):
        self.max_items = max_items
        self.keep_items = keep_items
        self.max_string = max_string

    def detect(self, text: str) -> bool:
        s = text.strip()
        if len(s) < 2 or s[0] not in "[{" or s[-1] not in "]}":
            return False
        try:
            json_loads(s)
        except ValueError:
            return False
        return True

    def _shrink(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self._shrink(v) for k, v in value.items()}
        if isinstance(value, list):
            items = [self._shrink(v) for v in value]
            if len(items) > self.max_items:
                rest = len(items) - self.keep_items
                return [*items[: self.keep_items], f"... {rest} more items"]
            return items
        if isinstance(value, str) and len(value) > self.max_string:
            from .primitives import protected_spans

            cut = self.max_string
            for s, e in protected_spans(value):
                if s < cut < e:
                    cut = e
            return value[:cut] + f"... ({len(value) - cut} more chars)"
        return value

    def split(self, text: str) -> list[Piece]:
        data = json_loads(text.strip())
        compact = json.dumps(self._shrink(data), ensure_ascii=False, separators=(",", ":"))
        return [Piece(compact, keep=True)]


class YamlAdapter(BaseAdapter):
    """YAML: keys and atomic values kept; long string values summarized into a comment."""

    name = "yaml"
    _kv = re.compile(r"^(\s*(?:- )?[\w.\"'/-]+:)(\s+)(.*)$")
    _long = 100

    def detect(self, text: str) -> bool:
        if text.count("\n") < 2 or ":" not in text:
            return False
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        if len(lines) < 3 or text.lstrip().startswith(("{", "[", "<")):
            return False
        hits = sum(1 for ln in lines if self._kv.match(ln) or ln.lstrip().startswith("- "))
        return hits * 10 >= len(lines) * 8

    def split(self, text: str) -> list[Piece]:
        pieces: list[Piece] = []
        for line in text.splitlines(keepends=True):
            m = self._kv.match(line.rstrip("\r\n"))
            if m and len(m.group(3)) > self._long and not m.group(3).startswith(("|", ">")):
                pieces.append(Piece(f"{m.group(1)} ...  # ", keep=True))
                pieces.append(Piece(m.group(3), keep=False))
                pieces.append(Piece("\n" if line.endswith("\n") else "", keep=True))
            else:
                pieces.append(Piece(line, keep=True))
        return pieces


class XmlAdapter(BaseAdapter):
    """XML and HTML: the tag skeleton and short text kept; long text nodes and comments
    summarized."""

    name = "xml"
    _tag_or_text = re.compile(r"<[^<>]++>|[^<]++")
    _closing = re.compile(r"</[\w:.-]+>")
    _long = 120

    def detect(self, text: str) -> bool:
        s = text.lstrip()
        return s.startswith("<") and len(self._closing.findall(text)) >= 2

    @classmethod
    def _tokens(cls, text: str) -> Iterator[str]:
        """The comments, tags and text runs of ``text`` in order: what the pattern
        ``<!--.*?-->|<[^<>]+>|[^<]+`` finds (a ``<`` that starts none of them is
        dropped), in linear time. The pattern scanned to the text's end for ``-->`` at
        every unclosed ``<!--``; here each search for it starts past the last one found,
        and a search that finds none is not repeated."""
        pos, close = 0, -2  # close: the last "-->" found (-1: none after, -2: not sought)
        while pos < len(text):
            if text.startswith("<!--", pos):
                if close == -2 or 0 <= close < pos + 4:
                    close = text.find("-->", pos + 4)
                if close >= 0:
                    yield text[pos : close + 3]
                    pos = close + 3
                    continue
            m = cls._tag_or_text.match(text, pos)
            if m:
                yield m.group()
                pos = m.end()
            else:
                pos += 1

    def split(self, text: str) -> list[Piece]:
        pieces: list[Piece] = []
        for tok in self._tokens(text):
            if tok.startswith("<!--"):
                if len(tok) > self._long:
                    pieces += [Piece("<!-- ", True), Piece(tok[4:-3], False), Piece(" -->", True)]
                else:
                    pieces.append(Piece(tok, keep=True))
            elif tok.startswith("<") or len(tok.strip()) <= self._long:
                pieces.append(Piece(tok, keep=True))
            else:
                pieces.append(Piece(tok, keep=False))
        return pieces


class MarkdownAdapter(BaseAdapter):
    """Markdown: headings and tables kept, prose summarized."""

    name = "markdown"
    _heading = re.compile(r"^#{1,6} \S")
    _table = re.compile(r"^\s*\|.*\|\s*$")

    def detect(self, text: str) -> bool:
        if "\n" not in text or ("#" not in text and "|" not in text):
            return False
        lines = text.splitlines()
        headings = sum(1 for ln in lines if self._heading.match(ln))
        tables = sum(1 for ln in lines if self._table.match(ln))
        return headings >= 2 or (headings >= 1 and tables >= 2) or tables >= 3

    def split(self, text: str) -> list[Piece]:
        pieces: list[Piece] = []
        prose: list[str] = []

        def flush() -> None:
            if prose:
                pieces.append(Piece("".join(prose), keep=False))
                prose.clear()

        for line in text.splitlines(keepends=True):
            if self._heading.match(line) or self._table.match(line) or not line.strip():
                flush()
                pieces.append(Piece(line, keep=True))
            else:
                prose.append(line)
        flush()
        return pieces


class CsvAdapter(BaseAdapter):
    """CSV/TSV and pipe tables: the header and first and last rows kept, the middle rows
    compressible."""

    name = "csv"

    def detect(self, text: str) -> bool:
        if text.count("\n") < 4:
            return False
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if len(lines) < 5:
            return False
        for sep in (",", "\t", ";"):
            counts = {ln.count(sep) for ln in lines}
            if len(counts) == 1 and counts.pop() >= 1:
                return True
        return False

    def split(self, text: str) -> list[Piece]:
        lines = text.splitlines(keepends=True)
        if len(lines) <= 5:
            return [Piece(text, keep=True)]
        return [
            Piece("".join(lines[:3]), keep=True),
            Piece("".join(lines[3:-1]), keep=False, mode="lines", weight=0.5),
            Piece(lines[-1], keep=True),
        ]


class ProseAdapter(BaseAdapter):
    """The fallback: multi-line non-prose (terminal output, file listings) is handled as
    lines, everything else as sentences."""

    name = "prose"

    def detect(self, text: str) -> bool:
        return True

    def split(self, text: str) -> list[Piece]:
        lines = text.splitlines() if text.count("\n") >= 3 else []
        if len(lines) >= 4:
            short = sum(
                1 for ln in lines if len(ln) < 100 and not ln.rstrip().endswith((".", "?", "!"))
            )
            if short * 10 >= len(lines) * 7:
                return _line_pieces(_collapse_repeats(text.splitlines(keepends=True)), None)
        return [Piece(text, keep=False)]


# ------------------------------------------------------------------------ registry


def _checked(name: str, adapter: object) -> FormatAdapter:
    if not isinstance(adapter, FormatAdapter):
        raise ConfigurationError(
            "an adapter needs name, detect, extract_preserved, extract_compressible and "
            "reconstruct (see ctxfold.text.FormatAdapter)"
        )
    return adapter


_BUILTIN: list[FormatAdapter] = [
    JsonAdapter(),
    XmlAdapter(),
    ToolOutputAdapter(),
    LogAdapter(),
    MarkdownAdapter(),
    CsvAdapter(),
    YamlAdapter(),
]
#: The format adapters by name, in the order they are tried; plug-ins register in
#: ``ctxfold.adapters``.
REGISTRY: Registry[FormatAdapter] = Registry(
    "format adapter", {a.name: a for a in _BUILTIN}, group="ctxfold.adapters", check=_checked
)
_FALLBACK = ProseAdapter()


def registry_version() -> int:
    """Changes whenever the registry does (cached analyses key on it)."""
    return REGISTRY.version


def adapters() -> tuple[FormatAdapter, ...]:
    """The registered adapters, in the order they are tried (the prose fallback last)."""
    return (*REGISTRY.view().values(), _FALLBACK)


def register_adapter(adapter: FormatAdapter, *, first: bool = True) -> None:
    """Add an adapter; by default it is tried before the built-ins. Replaces an adapter
    of the same name."""
    REGISTRY.register(_checked("", adapter).name, adapter, replace=True, first=first)


def unregister_adapter(name: str) -> None:
    """Remove a registered adapter by name (the built-ins included)."""
    REGISTRY.unregister(name, missing_ok=True)


def split_message_text(
    text: str, chain: Sequence[FormatAdapter] | None = None
) -> tuple[list[Piece], list[str]]:
    """Split ``text`` into pieces and name the adapters used.

    Fenced code blocks are preserved verbatim first (adapter ``code``); each chunk
    between them goes to the first adapter in ``chain`` that detects it.
    """
    chain = adapters() if chain is None else chain
    pieces: list[Piece] = []
    used: list[str] = []
    pos = 0
    chunks: list[tuple[str, bool]] = []
    for block in fences(text, FenceSyntax.COLUMN_ZERO):
        if block.start > pos:
            chunks.append((text[pos : block.start], False))
        chunks.append((text[block.start : block.end], True))
        pos = block.end
    if pos < len(text):
        chunks.append((text[pos:], False))
    if any(is_code for _, is_code in chunks):
        used.append("code")
    for chunk, is_code in chunks:
        if is_code:
            pieces.append(Piece(chunk, keep=True))
            continue
        adapter = next((a for a in chain if a.detect(chunk)), _FALLBACK)
        if adapter.name != "prose" or not used:
            used.append(adapter.name)
        if isinstance(adapter, BaseAdapter):
            pieces.extend(adapter.split(chunk))
        else:  # a protocol-only adapter: reconstruct with markers we can find again
            pieces.extend(_pieces_from_protocol(adapter, chunk))
    return pieces, used


def _pieces_from_protocol(adapter: FormatAdapter, text: str) -> list[Piece]:
    compressible = adapter.extract_compressible(text)
    markers = [f"\x00{k}\x00" for k in range(len(compressible))]
    skeleton = adapter.reconstruct(text, markers)
    pieces: list[Piece] = []
    pos = 0
    for marker, original in zip(markers, compressible, strict=True):
        at = skeleton.find(marker, pos)
        if at < 0:  # the adapter does not place its pieces: keep the text as it is
            return [Piece(text, keep=True)]
        if at > pos:
            pieces.append(Piece(skeleton[pos:at], keep=True))
        pieces.append(Piece(original, keep=False))
        pos = at + len(marker)
    if pos < len(skeleton):
        pieces.append(Piece(skeleton[pos:], keep=True))
    return pieces
