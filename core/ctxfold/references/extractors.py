"""Reference extractors: one per type (files, URLs, functions, classes, errors,
commands, snippets, decisions, other identifiers) turns a text into
``(value, kind, start)`` findings. Custom types join through
:func:`register_extractor` (a function or a regular expression) or the
``ctxfold.extractors`` entry-point group. Everything is regex-based, deterministic and
standard-library only; findings are memoized per text.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .._json import loads as json_loads
from .._registry import Registry
from .._state import on_clear
from ..exceptions import ConfigurationError
from ..messages import Message
from ..text.fences import FenceSyntax, fences
from ..text.primitives import (
    clipped,
    find_identifiers,
    json_strings,
    json_values,
    split_sentences,
)
from ..text.secrets import mask
from ..text.wordlists import ordered_word_list, word_list

__all__ = [
    "BUILTIN_TYPES",
    "REGISTRY",
    "Extractor",
    "Reference",
    "extract",
    "extractors",
    "reference_id",
    "register_extractor",
    "reset_extractors",
    "unregister_extractor",
]

#: A finding: the value, a sub-kind (``"github_issue"``, ``"definition"``, ...) and
#: where the value starts in the text (for its context).
Found = tuple[str, str, int]
#: An extractor: text in, findings out. Custom extractors may also yield plain strings
#: or ``(value, kind)`` pairs.
Extractor = Callable[[str], Iterable[Found | tuple[str, str] | str]]

_MAX_VALUE = 300  # characters of an error or decision kept as the value
_MAX_COMMAND = 160  # characters of a command kept as the value
_MAX_SNIPPET = 2000  # characters of a code snippet kept as the value
_CONTEXT = 60  # characters each side of a finding kept as its context


@lru_cache(maxsize=16)
def _identifiers(text: str) -> tuple[tuple[str, str, int, int], ...]:
    """One identifier scan per text, shared by the extractors that need it."""
    return tuple(find_identifiers(text))


def reference_id(type_: str, value: str) -> str:
    """The stable id of a reference: 12 hex digits of the SHA-256 of type and value
    (content-derived: no clock, no randomness)."""
    data = f"{type_}\x00{value}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:12]


@dataclass(frozen=True)
class Reference:
    """One thing the conversation mentions, deduplicated by ``(type, value)``.

    ``kind`` refines the type (a URL's ``github_issue``, a function's ``definition``,
    an error's ``frame``); ``context`` is the text around its first sighting;
    ``source`` is the index of the message it was first seen in, ``first_seen`` and
    ``last_seen`` the first and last such indexes, ``count`` how many times it was
    seen; ``relevance`` is set by :meth:`ReferenceIndex.score`.
    """

    id: str
    type: str
    value: str
    kind: str = ""
    context: str = ""
    source: int = 0
    first_seen: int = 0
    last_seen: int = 0
    count: int = 1
    relevance: float = 0.0


# ------------------------------------------------------------------------ extractors


def _trim_url(url: str) -> str:
    """Drop trailing punctuation and closing brackets that do not close one inside."""
    pairs = {")": "(", "]": "[", "}": "{", ">": "<"}
    while url:
        last = url[-1]
        if last in ".,;:!?'\"*_`" or (last in pairs and url.count(last) > url.count(pairs[last])):
            url = url[:-1]
        else:
            break
    return url


_URL = re.compile(r"\b(?:https?|ftp|file)://[^\s<>\"'`|\\^]+", re.IGNORECASE)
_GITHUB_ITEM = re.compile(r"github\.com/[^/]+/[^/]+/(issues|pull|discussions)/\d+", re.IGNORECASE)
_DOCS = re.compile(
    r"//(?:docs?|developer|devdocs|api|learn|reference)\.|readthedocs\.io|docs\.rs|"
    r"pkg\.go\.dev|/docs?/|/documentation/|/reference/|/api/|/manual/",
    re.IGNORECASE,
)


def _url_kind(url: str) -> str:
    m = _GITHUB_ITEM.search(url)
    if m:
        return {"issues": "github_issue", "pull": "github_pull"}.get(m.group(1), "github")
    low = url.lower()
    if "github.com/" in low or "gitlab.com/" in low:
        return "repository"
    if "stackoverflow.com/" in low or "stackexchange.com/" in low or "serverfault.com/" in low:
        return "stackoverflow"
    if _DOCS.search(url):
        return "documentation"
    return "web"


def extract_urls(text: str) -> Iterator[Found]:
    """URLs, trailing punctuation and unbalanced brackets trimmed; kind says what they
    point at: ``github_issue``, ``github_pull``, ``repository``, ``stackoverflow``,
    ``documentation`` or ``web``."""
    if "://" not in text:
        return
    for m in _URL.finditer(text):
        url = _trim_url(m.group())
        if len(url) > 10 and "://" in url and url.split("://", 1)[1]:
            yield url, _url_kind(url), m.start()


_QUOTED_PATH = re.compile(
    r"([\"'])((?:[A-Za-z]:[\\/]|\\\\|~?/|\.\.?[\\/])[^\"'\n]*?[^\s\"'\n])\1"
    r"|([\"'])([^\"'\n\\/]*(?:[\\/][^\"'\n\\/]+)+\.[A-Za-z0-9]{1,8})\3"
)
_LINE_SUFFIX = re.compile(r"(?::\d+){1,2}\Z")


def extract_files(text: str) -> Iterator[Found]:
    """File paths: Unix, Windows and relative, bare file names with a known extension,
    quoted paths with spaces; a ``:line`` (or ``:line:col``) suffix is dropped from the
    value and kept as the kind (``line 12``)."""
    quoted: list[tuple[int, int]] = []
    if "'" in text or '"' in text:
        for m in _QUOTED_PATH.finditer(text):
            value = m.group(2) or m.group(4)
            if " " in value:  # without a space the scan below finds it
                quoted.append((m.start(), m.end()))
                yield value, "quoted", m.start()
    for kind, value, start, _ in _identifiers(text):
        if kind != "path" or any(a <= start < b for a, b in quoted):
            continue  # not a path, or a piece of a quoted path with spaces
        line = _LINE_SUFFIX.search(value)
        if line:
            yield value[: line.start()], f"line {line.group()[1:]}", start
        else:
            yield value, "path", start


_WORDS_NOT_FUNCTIONS = word_list("not_functions")
# Each definition pattern runs only on texts holding one of its keywords.
_DEFINITIONS: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = (
    (("def ",), re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+([A-Za-z_]\w*)[ \t]*\(", re.M)),
    (("function",), re.compile(r"\bfunction[ \t]*+(?:\*[ \t]*+)?([A-Za-z_$][\w$]*+)[ \t]*+[<(]")),
    (
        ("=>", "function"),
        re.compile(
            r"\b(?:const|let|var)[ \t]+([A-Za-z_$][\w$]*)[ \t]*=[ \t]*(?:async[ \t]+)?"
            r"(?:function\b|\([^()\n]*\)[ \t]*(?::[^=\n]+)?=>|[A-Za-z_$][\w$]*[ \t]*=>)"
        ),
    ),
    (("func ",), re.compile(r"\bfunc[ \t]+(?:\([^()\n]*\)[ \t]*)?([A-Za-z_]\w*)[ \t]*[\[(]")),
    (("fn ",), re.compile(r"\bfn[ \t]+([A-Za-z_]\w*)[ \t]*[<(]")),
    (
        ("public ", "private ", "protected ", "internal ", "static ", "override ", "suspend "),
        re.compile(
            r"^[ \t]*(?:@\w+[ \t]+)*(?:(?:public|private|protected|internal|static|final|"
            r"abstract|synchronized|native|override|virtual|async|sealed|open|suspend)[ \t]+)+"
            r"(?:[\w<>\[\],.?]+[ \t]+)?([A-Za-z_]\w*)[ \t]*\(",
            re.M,
        ),
    ),
)
_CALL = re.compile(r"(?<![\w$.])([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)\(")


def _looks_like_function(name: str) -> bool:
    """A call target worth a reference: dotted, snake_case or camelCase, not a keyword
    or a builtin (``print(``, ``len(``); a plain word before a bracket is prose."""
    last = name.rsplit(".", 1)[-1]
    if last in _WORDS_NOT_FUNCTIONS or len(name) < 3 or ("." not in name and name[0].isupper()):
        return False  # a keyword, a builtin, or a class being built or raised
    return (
        "." in name
        or "_" in last.strip("_")
        or any(a.islower() and b.isupper() for a, b in itertools.pairwise(last))
    )


def extract_functions(text: str) -> Iterator[Found]:
    """Function and method names: definitions in Python, JS/TS, Go, Rust and Java/C#
    styles (kind ``definition``), and calls ``name(...)`` of dotted, snake_case or
    camelCase names (kind ``call``)."""
    if "(" not in text:
        return
    defined: set[int] = set()
    for keywords, pattern in _DEFINITIONS:
        if any(k in text for k in keywords):
            for m in pattern.finditer(text):
                name = m.group(1)
                defined.add(m.start(1))
                if len(name) > 1 and name not in _WORDS_NOT_FUNCTIONS:  # minified: n()
                    yield name, "definition", m.start()
    for m in _CALL.finditer(text):
        name = m.group(1)
        if m.start(1) not in defined and _looks_like_function(name):
            yield name, "call", m.start()


_CLASSES: tuple[tuple[tuple[str, ...], str, re.Pattern[str]], ...] = (
    (
        ("class", "interface", "enum", "struct", "trait", "record", "protocol", "object"),
        "definition",
        re.compile(
            r"^[ \t]*class[ \t]+([A-Za-z_]\w*)"  # Python, and any class at a line start
            r"|\b(?:class|interface|enum|struct|trait|record|protocol|object)[ \t]+([A-Z]\w*)",
            re.M,
        ),
    ),
    (("type ",), "definition", re.compile(r"\btype[ \t]+([A-Z]\w*)[ \t]*(?:<[^<>\n]*>)?[ \t]*=")),
    (
        ("type ",),
        "definition",
        re.compile(r"\btype[ \t]+([A-Za-z_]\w*)[ \t]+(?:struct|interface)\b"),
    ),
    (
        ("impl",),
        "definition",
        re.compile(r"\bimpl(?:<[^<>\n]*>)?[ \t]+(?:[\w:]+[ \t]+for[ \t]+)?([A-Z]\w*)"),
    ),
    (("new ",), "construction", re.compile(r"\bnew[ \t]+([A-Z]\w*)[ \t]*[(<]")),
)


def extract_classes(text: str) -> Iterator[Found]:
    """Class and type names: ``class``, ``interface``, ``enum``, ``struct``, ``trait``,
    TS ``type X =``, Go ``type X struct``, Rust ``impl X``, and ``new X(``."""
    for keywords, kind, pattern in _CLASSES:
        if any(k in text for k in keywords):
            for m in pattern.finditer(text):
                name = next(g for g in m.groups() if g)
                yield name, kind, m.start()


_EXCEPTION = re.compile(
    r"(?<![\w.])((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Fault|Failure|"
    r"Warning))\b(?:(:[ \t]+|\()([^\n]*))?"
)
_ERROR_LINE = re.compile(
    r"^[ \t]*(?:(?:panic|fatal error|FATAL|ERROR|Error|error(?:\[E\d+\])?|npm ERR!)"
    r"(?::|\s)[ \t]*[^\n]+"
    r"|thread '[^'\n]+' panicked at [^\n]+)",
    re.MULTILINE,
)
_FRAME = re.compile(
    r"File \"([^\"\n]+)\", line (\d+)(?:, in ([\w<>.]+))?"  # Python
    r"|^[ \t]+at (?:([\w$.<>\[\] ]+?) \()?((?:[A-Za-z]:)?[^\s():]+):(\d+)(?::\d+)?\)?$"  # JS
    r"|^[ \t]+at ([\w$.<>]+)\(([\w$.-]+):(\d+)\)"  # Java / Kotlin
    r"|^[ \t]+(/[^\s:]+\.go):(\d+)",  # Go
    re.MULTILINE,
)
_EXIT = re.compile(
    r"(?:exit(?:ed)?(?:[ \t]+with)?[ \t]+(?:code|status)|returned non-zero exit status|"
    r"exit code|exited with)[ \t:=]*(-?\d+)",
    re.IGNORECASE,
)


def _clip(text: str, limit: int = _MAX_VALUE) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def extract_errors(text: str) -> Iterator[Found]:
    """Errors: exception types with their message (Python, JS, Java, ...; kind
    ``exception``), error lines of compilers, Go panics, Rust panics and package
    managers (``error_line``), stack-trace frames (``frame``: ``path:line in name``) and
    non-zero exit codes (``exit_code``)."""
    low = text.lower()
    if "error" in low or "exception" in low or "panic" in low or "fail" in low or "warn" in low:
        for m in _EXCEPTION.finditer(text):
            message = (m.group(3) or "").strip()
            if m.group(2) == "(" and message.endswith(")"):  # raise ValueError("...")
                message = message[:-1]
            value = f"{m.group(1)}: {message}" if message else m.group(1)
            yield _clip(value), "exception", m.start(1)
        for m in _ERROR_LINE.finditer(text):
            yield _clip(m.group()), "error_line", m.start()
    if "line " in text or "at " in text or ".go:" in text:
        for m in _FRAME.finditer(text):
            g = m.groups()
            if g[0]:
                where, name = f"{g[0]}:{g[1]}", g[2]
            elif g[4]:
                where, name = f"{g[4]}:{g[5]}", g[3]
            elif g[6]:
                where, name = f"{g[7]}:{g[8]}", g[6]
            else:
                where, name = f"{g[9]}:{g[10]}", None
            yield (f"{where} in {name}" if name else where), "frame", m.start()
    if "exit" in low or "status" in low:
        for m in _EXIT.finditer(text):
            if m.group(1) != "0":
                yield f"exit code {m.group(1)}", "exit_code", m.start()


_SHELL_LANGS = word_list("shell_languages")
# A shell prompt: "$ ", "user@host:~/dir$ ", "root@box:/# " (a bare "#" is a comment),
# "(venv) $ ", PowerShell's "PS C:\\> " and cmd's "C:\\src> " (a bare ">" is a quote).
_PROMPT = re.compile(
    r"^[ \t]*(?:\(\S+\)[ \t]*)?(?:[\w.@~:/-]*\$|[\w.@~:/-]+[#%]|PS [^>\n]*>|"
    r"[A-Za-z]:\\[^>\n]*>)[ \t]+(\S[^\n]*)$",
    re.MULTILINE,
)
_CLI = ordered_word_list("cli_tools")
# Words that are also plain English: a line starting with them is a command only when
# an argument looks like one (an option, a path, a variable).
_AMBIGUOUS = word_list("ambiguous_commands")
_CLI_LINE = re.compile(
    r"^[ \t]*((?:sudo[ \t]+)?(" + "|".join(re.escape(c) for c in _CLI) + r")[ \t]+[^\n]+)$",
    re.MULTILINE,
)
_ARG_LIKE = re.compile(r"(?:^|\s)(?:-{1,2}\w|[./~$]|\w+/|\w+=)")
_COMMAND_KEYS = ("command", "cmd", "script", "bash", "shell", "commands")


def _command_lines(code: str) -> Iterator[str]:
    for line in code.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            m = _PROMPT.match(line)
            yield m.group(1) if m else line


def extract_commands(text: str) -> Iterator[Found]:
    """Shell commands: ``$``-prompted lines (kind ``prompt``), the lines of shell code
    blocks (``code_block``), lines starting with a known CLI (``cli``) and inline code
    that reads as a command (``inline``)."""
    for block in fences(text, FenceSyntax.INDENTED):
        if block.info.lower() in _SHELL_LANGS:
            for line in _command_lines(text[block.body_start : block.body_end]):
                yield _clip(line, _MAX_COMMAND), "code_block", block.body_start
    if "$" in text or ">" in text or "#" in text or "%" in text:
        for m in _PROMPT.finditer(text):
            yield _clip(m.group(1), _MAX_COMMAND), "prompt", m.start(1)
    for m in _CLI_LINE.finditer(text):
        line, cli = m.group(1), m.group(2)
        if cli in _AMBIGUOUS and not _ARG_LIKE.search(line[len(cli) :]):
            continue
        yield _clip(line, _MAX_COMMAND), "cli", m.start(1)
    if "`" in text:
        for kind, value, start, _ in _identifiers(text):
            if kind == "code":
                yield _clip(value, _MAX_COMMAND), "inline", start


def extract_snippets(text: str) -> Iterator[Found]:
    """Fenced code blocks other than shell sessions; the kind is their language."""
    for block in fences(text, FenceSyntax.INDENTED):
        lang = block.info.lower()
        code = text[block.body_start : block.body_end].strip("\n")
        if lang not in _SHELL_LANGS and code.strip():
            yield clipped(code, _MAX_SNIPPET), lang or "code", block.body_start


_DECISION = re.compile(
    r"\b(?:(?:we|i)(?:'ve| have)?[ \t]+decided|let's|let us|we(?:'ll|[ \t]+will)[ \t]+"
    r"(?:go with|use|keep|switch|move|stick with|drop|pin)|i(?:'ll|[ \t]+will)[ \t]+"
    r"(?:go with|use|keep|switch|now|instead)|(?:chose|choose|opted|settled on|going with)"
    r"\b|the (?:plan|decision|fix|solution|approach) (?:is|will be)|we agreed|"
    r"agreed to|decision:)",
    re.IGNORECASE,
)


def extract_decisions(text: str) -> Iterator[Found]:
    """Decisions: sentences saying what was decided or will be done ("we decided",
    "let's", "I'll use", "the fix is", ...)."""
    if not _DECISION.search(text):
        return
    pos = 0
    for sentence in split_sentences(text):
        if _DECISION.search(sentence) and len(sentence.strip()) >= 12:
            yield _clip(sentence.strip()), "decision", pos
        pos += len(sentence)


_NAME_KINDS = {"id": "id", "date": "date", "dotted": "name", "snake": "name", "camel": "name"}


def extract_identifiers(text: str) -> Iterator[Found]:
    """Other identifiers: ids of letters and digits (``HAT039``, ``ZFA04Y``, commit
    hashes; kind ``id``), dates (``date``), dotted, snake_case and camelCase names
    (``name``) such as ``sys.argv`` or ``pv_transform_time``, and the short code-like
    string values of a JSON document (``"PUNERT"``; kind ``value``)."""
    strings = json_strings(text) if text.lstrip()[:1] in ("{", "[") else text
    for kind, value, start, _ in _identifiers(strings):
        sub = _NAME_KINDS.get(kind)
        if sub is not None:  # in JSON, the values' names only: the keys are schema
            yield value, sub, start if strings is text else text.find(value)
    if strings is not text:  # JSON: short code-like values are ids too
        for _, value in json_values(text):
            yield value, "value", text.find(value)


#: The built-in reference types, in the order the reconstruction block lists them.
BUILTIN_TYPES: tuple[str, ...] = (
    "file",
    "url",
    "function",
    "class",
    "error",
    "command",
    "snippet",
    "decision",
    "identifier",
)
_BUILTIN: dict[str, Extractor] = {
    "file": extract_files,
    "url": extract_urls,
    "function": extract_functions,
    "class": extract_classes,
    "error": extract_errors,
    "command": extract_commands,
    "snippet": extract_snippets,
    "decision": extract_decisions,
    "identifier": extract_identifiers,
}


def _checked(type_: str, extractor: object) -> Extractor:
    """An extractor being registered: a function, or a pattern made into one."""
    if not type_.isidentifier():
        raise ConfigurationError(f"a reference type must be a name like 'ticket', got {type_!r}")
    if isinstance(extractor, (str, re.Pattern)):
        try:
            pattern = re.compile(extractor)
        except re.error as exc:
            raise ConfigurationError(f"extractor for {type_!r}: bad pattern: {exc}") from None
        return _regex_extractor(pattern)
    if not callable(extractor):
        raise ConfigurationError(
            f"extractor for {type_!r} must be a function text -> values or a regex pattern"
        )
    return extractor


#: The extractors by reference type; plug-ins register in ``ctxfold.extractors``.
REGISTRY: Registry[Extractor] = Registry(
    "reference type", _BUILTIN, group="ctxfold.extractors", check=_checked
)


def extractors() -> Mapping[str, Extractor]:
    """A read-only view of the registered extractors by reference type."""
    return REGISTRY.view()


def register_extractor(
    type_: str, extractor: Extractor | str | re.Pattern[str], *, replace: bool = False
) -> None:
    """Add an extractor for ``type_``: a function ``text -> findings`` (values, ``(value,
    kind)`` or ``(value, kind, start)``) or a regular expression (its first group, or
    the whole match, is the value). Raises :class:`ConfigurationError` if the type is
    taken, unless ``replace``."""
    REGISTRY.register(type_, extractor, replace=replace)


def unregister_extractor(type_: str) -> None:
    """Remove the extractor of ``type_`` (:func:`reset_extractors` brings the built-in
    ones back)."""
    REGISTRY.unregister(type_)


def reset_extractors() -> None:
    """Back to the built-in extractors only."""
    REGISTRY.reset()


def _regex_extractor(pattern: re.Pattern[str]) -> Extractor:
    def run(text: str) -> Iterator[Found]:
        for m in pattern.finditer(text):
            value = m.group(1) if pattern.groups else m.group()
            if value:
                yield value, "match", m.start(1 if pattern.groups else 0)

    return run


def _normalize(found: Any, type_: str) -> Found:
    if isinstance(found, str):
        return found, "", -1
    if isinstance(found, tuple) and found and isinstance(found[0], str):
        kind = str(found[1]) if len(found) > 1 and found[1] is not None else ""
        start = found[2] if len(found) > 2 and isinstance(found[2], int) else -1
        return found[0], kind, start
    raise ConfigurationError(
        f"the extractor for {type_!r} yielded {found!r}; yield a value, (value, kind) or "
        "(value, kind, start)"
    )


@lru_cache(maxsize=4096)
def _findings(text: str, version: int) -> tuple[tuple[str, str, str, str], ...]:
    """``(type, value, kind, context)`` for every finding in ``text``, cached by text."""
    del version  # part of the cache key only
    out: list[tuple[str, str, str, str]] = []
    for type_, extractor in extractors().items():
        for found in extractor(text):
            value, kind, start = _normalize(found, type_)
            value = value.strip()
            if not value:
                continue
            if start >= 0:
                lo, hi = max(start - _CONTEXT, 0), min(start + len(value) + _CONTEXT, len(text))
                context = " ".join(text[lo:hi].split())
            else:
                context = ""
            out.append((type_, value, kind, context))
    typed = {value for type_, value, _, _ in out if type_ != "identifier"}
    return tuple(f for f in out if f[0] != "identifier" or f[1] not in typed)


def _tool_call_findings(m: Message) -> Iterator[tuple[str, str, str, str]]:
    """Commands in tool-call arguments (``{"command": ...}``) and references in the
    argument text."""
    for call in m.tool_calls:
        args = call.arguments
        try:
            parsed = json_loads(args)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            for key in _COMMAND_KEYS:
                value = parsed.get(key)
                if isinstance(value, str) and value.strip():  # one command per call
                    lines = value.strip().splitlines()
                    shown = lines[0] + (" ..." if len(lines) > 1 else "")  # a heredoc's head
                    yield "command", _clip(shown, _MAX_COMMAND), "tool_call", f"{call.name}({key})"
        yield from _findings(json_strings(args), REGISTRY.version)  # escapes decoded
        for _, value in json_values(args, names=True):  # what the agent acted on
            yield "identifier", value, "argument", f"{call.name}({args[:_CONTEXT]})"


def extract(
    messages: Sequence[Message], *, start: int = 0
) -> Iterator[tuple[int, str, str, str, str]]:
    """``(message index, type, value, kind, context)`` for every finding in
    ``messages`` (their text and tool-call arguments), in order; indexes count from
    ``start``."""
    for i, m in enumerate(messages, start):
        text = m.text
        if text:
            for finding in _findings(text, REGISTRY.version):
                yield (i, *_masked(finding))
        if m.tool_calls:
            for finding in _tool_call_findings(m):
                yield (i, *_masked(finding))


def _masked(finding: tuple[str, str, str, str]) -> tuple[str, str, str, str]:
    """A finding with any credential in its value and context masked: the index never
    holds one (see :mod:`ctxfold.text.secrets`)."""
    type_, value, kind, context = finding
    return type_, mask(value), kind, mask(context)


on_clear(_findings.cache_clear)
on_clear(_identifiers.cache_clear)
