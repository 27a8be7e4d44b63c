"""The agent's working state, read from its tool calls with no model: its latest plan
(a to-do list it wrote with a tool), the files it touched (read, edited, created, ran:
the last action on each), the errors its commands met that no later run of the same
command followed with a success, and the other shell commands it ran.

A note shows them first, in lines of their own (``Plan: ...``, ``Files: ...``,
``Unresolved: ...``, ``Ran: ...``),
within a share of its room (see :func:`.fit.fit`); its selected lines and its list
follow. A note folded again hands its state on in its metadata, so a session's notes
keep what every earlier round saw. Each line names what it comes from: a file by its
path, an error by the command that met it.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from ..._json import loads as json_loads
from ..._state import LRU, memo
from ...messages import Message, ToolCall
from ...result import NOTE_KEY
from ...text.scoring import severe
from ...text.secrets import is_secret, mask
from ...tokens import TokenCounter

__all__ = [
    "FILES",
    "PLAN",
    "RAN",
    "STATE_HEADS",
    "UNRESOLVED",
    "OpenError",
    "Touch",
    "WorkingState",
    "command_of",
    "failure",
    "has_plan",
    "plan_of",
    "shell_lines",
    "shell_touches",
    "touches",
    "working_state",
]


#: What the state's lines begin with (a note folded again offers neither: the next
#: note writes its own, from the state its metadata hands on).
FILES = "Files: "
UNRESOLVED = "Unresolved: "
RAN = "Ran: "
PLAN = "Plan: "
STATE_HEADS = (PLAN, FILES, UNRESOLVED, RAN)


class Touch(str, Enum):
    """What the agent last did to a file."""

    READ = "read"
    EDITED = "edited"
    CREATED = "created"
    RAN = "ran"
    REVERTED = "reverted"  # its changes undone (git checkout -- f, git restore f)
    DELETED = "deleted"


@dataclass(frozen=True)
class OpenError:
    """An error a command met (its result's last error line) that no later run of
    the same command followed with a success."""

    command: str
    error: str


#: Arguments that name the file a call acts on (editors, readers, notebooks).
_PATH_KEYS = ("path", "file_path", "filename", "file", "notebook_path")
#: An editor's sub-command (SWE-agent's ``str_replace_editor``, Anthropic's text editor).
_EDITOR = {
    "view": Touch.READ,
    "create": Touch.CREATED,
    "str_replace": Touch.EDITED,
    "insert": Touch.EDITED,
    "undo_edit": Touch.EDITED,
    "edit": Touch.EDITED,
    "write": Touch.CREATED,
}
#: A tool's name says what it does to the file its arguments name.
_BY_NAME = (
    (("write", "create"), Touch.CREATED),
    (("edit", "replace", "patch", "insert"), Touch.EDITED),
    (("read", "view", "open", "cat"), Touch.READ),
)
#: Shell verbs that read the files they name, and those that run them.
_READERS = frozenset(
    [
        "cat",
        "head",
        "tail",
        "less",
        "more",
        "nl",
        "bat",
        "wc",
        "diff",
        "grep",
        "egrep",
        "rg",
        "awk",
        "sed",
    ]
)
_RUNNERS = frozenset(["python", "python3", "pytest", "node", "bash", "sh", "ruby", "go", "deno"])
_SCRIPTED = frozenset(["grep", "egrep", "rg", "sed", "awk", "perl"])  # a pattern or script first
#: git's sub-commands that change files, as the verbs of other shell commands.
_GIT = {"rm": "rm", "checkout": "revert", "restore": "revert"}
_SEPARATORS = re.compile(r"&&|\|\||[;|]")
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")
_NOT_IN_PATHS = frozenset("$`*?{}()=<>|&;,'\"")
_EXIT = re.compile(
    r"<returncode>\s*(-?\d+)\s*</returncode>"
    r"|\bexit(?:ed)?(?: with)?(?: code| status)?[:= ]+(-?\d+)",
    re.IGNORECASE,
)
_TAGS = re.compile(r"</?(?:returncode|output)>")  # mini-SWE-agent's result frame
#: A line that reports an error, not prose or code that names one: an exception at the
#: line's start (``KeyError: 'rule'``, pytest's ``E   AssertionError``), a line opening
#: with error or fatal (``Error: reservation not found``), a compiler's ``x.c:3:5:
#: error:``, an upper-case ERROR, FAILED or FATAL that is no attribute (not
#: ``logging.ERROR``); else a count of failures (``1 failed, 3 passed``). Not
#: ``except KeyError as error:`` in a file's listing.
_REPORT = re.compile(
    r"^[ \t]*(?:E[ \t]+)?[A-Z]\w*(?:Error|Exception)\b(?::|$)"
    r"|^[ \t]*(?:[Ee]rror|[Ff]atal|panic)\b"
    r"|:\d+(?::\d+)?:[ \t]?(?:fatal )?error\b"
    r"|(?<![.\w])(?:ERROR|FAILED|FATAL)\b(?!\.)",
    re.MULTILINE,
)
_FAILURES = re.compile(r"\b[1-9]\d* (?:failed|errors?)\b")  # a summary's count of them
#: What each result read reported, by its length and hash (not the text itself: the
#: memo must not keep a thousand long results alive after their messages are gone).
_FAILURES_SEEN: LRU[str | None] = memo(8_192)
_ERROR_CHARS = 160  # an error line is shown up to this many characters
_COMMAND_CHARS = 100  # and the command that met it
_TAIL_CHARS = 4_096  # a result's end, where its error most often is, read first


@dataclass(frozen=True)
class WorkingState:
    """The files touched (each path's last action, in the order of their last touch),
    the errors still open (in the order they were met) and the shell commands that
    met none (each once, in the order of their last run)."""

    files: tuple[tuple[str, Touch], ...] = ()
    errors: tuple[OpenError, ...] = ()
    commands: tuple[str, ...] = ()
    plan: tuple[tuple[str, str], ...] = ()  # (done, now or todo; the step)

    def __bool__(self) -> bool:
        return bool(self.files or self.errors or self.commands or self.plan)

    def lines(
        self, max_tokens: float, counter: TokenCounter, elsewhere: Container[str] = ()
    ) -> list[str]:
        """The state's lines within ``max_tokens``: the open errors, newest first,
        then the plan (every step, or none), then the files, those changed (edited,
        created) first, then those run, then those read (but those named
        ``elsewhere``, in the output beside the note), each the last touched first,
        then the commands run, newest first (but those shown ``elsewhere``); what does
        not fit is left out."""
        out: list[str] = []
        used = 0.0
        for e in reversed(self.errors):
            line = f"{UNRESOLVED}`{e.command}` -> {e.error}"
            cost = counter.count_text(line) + 1
            if used + cost > max_tokens:
                break
            out.append(line)
            used += cost
        plan = self._plan_line(max_tokens - used, counter)
        used += counter.count_text(plan) + 1 if plan else 0
        shown: list[str] = []
        for path, touch in sorted(reversed(self.files), key=lambda f: _FIRST[f[1]]):
            if touch is Touch.READ and path in elsewhere:
                continue  # the output names it: reading it again is no news
            entry = f"{path} ({touch.value})"
            cost = counter.count_text(", " + entry) + (0 if shown else 3)
            if used + cost > max_tokens:
                break
            shown.append(entry)
            used += cost
        ran = _listed(
            (f"`{c}`" for c in reversed(self.commands) if c not in elsewhere),
            "; ",
            max_tokens - used,
            counter,
        )
        files = [FILES + ", ".join(shown)] if shown else []
        return ([plan] if plan else []) + files + out + ([RAN + ran] if ran else [])

    def _plan_line(self, max_tokens: float, counter: TokenCounter) -> str:
        """The plan within ``max_tokens``: every step, else how many are done and as
        many of the others as fit; "" when none does."""
        steps = [f"[{status}] {step}" for status, step in self.plan]
        line = PLAN + "; ".join(steps)
        if not steps or counter.count_text(line) + 1 <= max_tokens:
            return line if steps else ""
        done = f"{sum(status == 'done' for status, _ in self.plan)} done; "
        room = max_tokens - counter.count_text(PLAN + done)
        rest = _listed((s for s in steps if not s.startswith("[done]")), "; ", room, counter)
        return PLAN + done + rest if rest else ""

    def meta(self) -> dict[str, list[list[str]] | list[str]]:
        """The state as a note's metadata keeps it (JSON: lists of strings)."""
        return {
            "files": [[p, t.value] for p, t in self.files],
            "errors": [[e.command, e.error] for e in self.errors],
            "commands": list(self.commands),
            "plan": [list(step) for step in self.plan],
        }

    @classmethod
    def from_meta(cls, meta: object) -> WorkingState:
        """The state an earlier note kept in its metadata; an empty one for anything
        else (a note without one, or metadata edited into another shape)."""
        if not isinstance(meta, Mapping):
            return cls()
        files = [
            (f[0], Touch(f[1]))
            for f in _rows(meta.get("files"))
            if isinstance(f, list) and len(f) == 2 and f[1] in _TOUCHES and isinstance(f[0], str)
        ]
        errors = [
            OpenError(e[0], e[1])
            for e in _rows(meta.get("errors"))
            if isinstance(e, list) and len(e) == 2 and all(isinstance(x, str) for x in e)
        ]
        commands = [c for c in _rows(meta.get("commands")) if isinstance(c, str)]
        plan = [
            (p[0], p[1])
            for p in _rows(meta.get("plan"))
            if isinstance(p, list) and len(p) == 2 and p[0] in _STATUS_WORDS
            and isinstance(p[1], str)
        ]  # fmt: skip
        return cls(tuple(files), tuple(errors), tuple(commands), tuple(plan))


_TOUCHES = frozenset(t.value for t in Touch)
#: Which files a short state names first: what the agent changed is its work.
_FIRST = {
    Touch.EDITED: 0,
    Touch.CREATED: 0,
    Touch.REVERTED: 0,
    Touch.DELETED: 0,
    Touch.RAN: 1,
    Touch.READ: 2,
}


def _listed(entries: Iterable[str], sep: str, max_tokens: float, counter: TokenCounter) -> str:
    """As many of ``entries`` as fit ``max_tokens`` (with ``sep`` between them and a
    line's head), in order; none cut."""
    shown: list[str] = []
    used = 3.0  # the line's head and its break
    for entry in entries:
        used += counter.count_text(sep + entry)
        if used > max_tokens:
            break
        shown.append(entry)
    return sep.join(shown)


def _rows(value: object) -> list[object]:
    """A metadata field's rows: a list's items, nothing for anything else."""
    return value if isinstance(value, list) else []


def working_state(messages: Sequence[Message], indices: Iterable[int]) -> WorkingState:
    """The working state the messages at ``indices`` (in order) show: an earlier
    note's state (from its metadata) carried on, then each tool call's touches and
    each result's outcome."""
    files: dict[str, Touch] = {}
    errors: dict[_Run, OpenError] = {}
    commands: dict[str, None] = {}  # shell commands that met no error, by last run
    plan: tuple[tuple[str, str], ...] = ()
    calls: dict[str, _Call] = {}
    for i in indices:
        m = messages[i]
        meta = m.metadata.get(NOTE_KEY)
        if isinstance(meta, Mapping) and "state" in meta:
            before = WorkingState.from_meta(meta["state"])
            for path, touch in before.files:
                files.pop(path, None)
                files[path] = touch
            errors.update((_Run.of(e.command), e) for e in before.errors)
            for ran in before.commands:
                commands.pop(ran, None)
                commands[ran] = None
            plan = before.plan or plan
            continue
        for c in m.tool_calls:
            calls[c.id] = call = _Call.of(c)
            plan = call.plan or plan  # each to-do list replaces the one before
            for path, touch in call.touches:
                if not is_secret(path):  # a credential is never one of the state's names
                    files.pop(path, None)
                    files[path] = touch
        if m.role == "tool" and m.tool_call_id in calls:
            call = calls[m.tool_call_id]
            error, run = failure(m.text), call.run
            errors.pop(run, None)  # met again: as it ends now
            command = mask(call.command)  # shown and stored with credentials masked
            commands.pop(command, None)
            if error is not None:
                errors[run] = OpenError(command, mask(error))
            else:  # a success resolves every failed run it covers
                errors = {r: e for r, e in errors.items() if not run.covers(r)}
                if call.shell:
                    commands[command] = None
    return WorkingState(tuple(files.items()), tuple(errors.values()), tuple(commands), plan)


class _Call(NamedTuple):
    """What the state reads of a tool call: the files it touches, its command, what
    it runs, whether it is a shell command and the plan it writes, if any."""

    touches: tuple[tuple[str, Touch], ...]
    command: str
    run: _Run
    shell: bool
    plan: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, c: ToolCall) -> _Call:
        """The call's facts, memoized by its name and arguments (a session's every
        compaction reads its calls again), kept as strings only, flat (a memo the
        collector stops walking: see ``_state``)."""
        flat, command, program, files, shell, steps = _CALLS.cached((c.name, c.arguments), _read, c)
        pairs = tuple((flat[k], Touch(flat[k + 1])) for k in range(0, len(flat), 2))
        plan = tuple((steps[k], steps[k + 1]) for k in range(0, len(steps), 2))
        return cls(pairs, command, _Run(program, frozenset(files)), shell, plan)


_Facts = tuple[tuple[str, ...], str, str, tuple[str, ...], bool, tuple[str, ...]]


def _read(c: ToolCall) -> _Facts:
    command = command_of(c)
    run = _Run.of(command)
    flat = tuple(x for path, touch in touches(c) for x in (path, touch.value))
    steps = tuple(x for step in plan_of(c) for x in step)
    return flat, command, run.program, tuple(sorted(run.files)), _shell(c) is not None, steps


_CALLS: LRU[_Facts] = memo(8_192)


def plan_of(c: ToolCall) -> tuple[tuple[str, str], ...]:
    """The to-do list a call writes (Claude Code's ``TodoWrite``: ``todos`` of
    ``content`` and ``status``; Codex's ``update_plan``: ``plan`` of ``step`` and
    ``status``; any list of objects with a text and a status): each step's status
    (done, now, todo) and text, credentials masked, shortened; none for other calls."""
    for value in _arguments(c).values():
        if not isinstance(value, list) or not value:
            continue
        steps = [_step(item) for item in value[:_PLAN_STEPS]]
        if all(step is not None for step in steps):
            return tuple(step for step in steps if step is not None)
    return ()


def has_plan(messages: Sequence[Message], indices: Iterable[int]) -> bool:
    """Whether a call of the messages at ``indices`` writes a plan (a newer one than
    the state's, when they are the messages kept beside the note)."""
    return any(_Call.of(c).plan for i in indices for c in messages[i].tool_calls)


def _step(item: object) -> tuple[str, str] | None:
    """A plan's step from one item of a list: its status word and its text."""
    if not isinstance(item, Mapping) or not isinstance(status := item.get("status"), str):
        return None
    text = next((t for k in _STEP_KEYS if isinstance(t := item.get(k), str) and t.strip()), None)
    if text is None:
        return None
    text = mask(" ".join(text.split()))
    short = text if len(text) <= _STEP_CHARS else text[: _STEP_CHARS - 3] + "..."
    return _STATUS.get(status.lower().replace("-", "_"), "todo"), short


#: Where a step's text is, and what its status says.
_STEP_KEYS = ("content", "step", "title", "task", "description", "text")
_STATUS = {
    "completed": "done",
    "complete": "done",
    "done": "done",
    "in_progress": "now",
    "active": "now",
    "doing": "now",
}
_STATUS_WORDS = frozenset(("done", "now", "todo"))
_PLAN_STEPS = 30  # a plan's first steps read, at most
_STEP_CHARS = 100


@dataclass(frozen=True)
class _Run:
    """What a command runs: its program (the last step's words that are neither
    options nor files: ``python pytest``) and the files it names (none: all of them)."""

    program: str
    files: frozenset[str]

    @classmethod
    def of(cls, command: str) -> _Run:
        words = _SEPARATORS.split(command)[-1].split()
        files = frozenset(w.split("::", 1)[0] for w in words if _pathlike(w))
        program = " ".join(w for w in words if not w.startswith("-") and not _pathlike(w))
        return cls(program, files)

    def covers(self, other: _Run) -> bool:
        """Whether this run, succeeding, shows ``other``'s failure is over: the same
        program on all files, or on every file ``other`` named (``pytest -q`` covers
        ``pytest tests/a.py``; ``python b.py`` covers nothing of ``python a.py``)."""
        if self.program != other.program:
            return False
        return not self.files or (bool(other.files) and other.files <= self.files)


def _arguments(c: ToolCall) -> dict[str, object]:
    """A call's arguments as an object; none when they are no JSON object (or JSON
    past the limits ctxfold reads: see :mod:`ctxfold._json`)."""
    try:
        args = json_loads(c.arguments) if c.arguments else {}
    except ValueError:
        return {}
    return args if isinstance(args, dict) else {}


def _shell(c: ToolCall) -> str | None:
    """The shell command a call runs (its ``command`` argument, no editor's
    sub-command), if it runs one."""
    command = _arguments(c).get("command")
    if isinstance(command, str) and command.strip() and command not in _EDITOR:
        return command
    return None


def command_of(c: ToolCall) -> str:
    """A call as its open error names it: a shell command's lines (not a
    here-document's body), else the call with its arguments; shortened."""
    command = _shell(c)
    text = f"{c.name}({c.arguments})" if command is None else "; ".join(shell_lines(command))
    text = " ".join(text.split())
    return text if len(text) <= _COMMAND_CHARS else text[: _COMMAND_CHARS - 3] + "..."


def touches(c: ToolCall) -> list[tuple[str, Touch]]:
    """The files a tool call acts on and how: an editor's path by its sub-command, a
    reader's or writer's by its name, a shell command's by its verbs and redirects."""
    args = _arguments(c)
    path = next((v for k in _PATH_KEYS if isinstance(v := args.get(k), str) and v), None)
    command = args.get("command")
    if path is not None:
        if isinstance(command, str) and command in _EDITOR:
            return [(path, _EDITOR[command])]
        name = c.name.lower()
        for words, touch in _BY_NAME:
            if any(w in name for w in words):
                return [(path, touch)]
        return []
    if isinstance(command, str):
        return list(dict.fromkeys(shell_touches(command)))
    return []


def shell_lines(command: str) -> list[str]:
    """A shell command's lines without the bodies of its here-documents (the code a
    ``cat > x.py << 'EOF'`` writes is no command)."""
    out: list[str] = []
    end: str | None = None
    for raw in command.strip().splitlines():
        line = raw.strip()
        if end is not None:
            if line == end:
                end = None
            continue
        if line:
            out.append(line)
            found = _HEREDOC.search(line)
            end = found.group(1) if found else None
    return out


def shell_touches(command: str) -> Iterator[tuple[str, Touch]]:
    """The files a shell command reads, writes (``>``, ``tee``, ``sed -i``) or runs
    (``python x.py``, ``pytest tests/x.py``); a here-document's body is not looked at,
    nor a search's pattern or an editor's script."""
    for part in (p for line in shell_lines(command) for p in _SEPARATORS.split(line)):
        words = [w.strip("'\"") for w in part.split()]
        while words and ("=" in words[0] or words[0] in ("sudo", "env", "time", "timeout")):
            words = words[1:]  # an assignment or a wrapper
            if words and words[0].isdigit():
                words = words[1:]  # timeout's seconds
        if not words or words[0] == "cd":
            continue
        written = dict(_redirects(words))
        yield from written.items()
        verb = words[0].rsplit("/", 1)[-1]
        if verb == "git" and len(words) > 1 and words[1] in _GIT:
            verb, words = _GIT[words[1]], words[1:]  # git's sub-command, as a verb
        operands = [w for w in words[1:] if not w.startswith(("-", ">", "<"))]
        if verb in _SCRIPTED:
            operands = operands[1:]  # the pattern or the script, then the files
        named = [w.split("::", 1)[0] for w in operands if w not in written and _pathlike(w)]
        if verb in ("sed", "perl") and any(w.startswith("-i") or w == "-pi" for w in words):
            yield from ((w, Touch.EDITED) for w in named)
        elif verb == "tee":
            touch = Touch.EDITED if "-a" in words else Touch.CREATED
            yield from ((w, touch) for w in named)
        elif verb == "touch":
            yield from ((w, Touch.CREATED) for w in named)
        elif verb in ("rm", "unlink"):
            yield from ((w, Touch.DELETED) for w in named)
        elif verb == "revert":
            yield from ((w, Touch.REVERTED) for w in _reverted(words, named))
        elif verb in _READERS:
            yield from ((w, Touch.READ) for w in named if not w.endswith("/"))
        elif verb in _RUNNERS or verb.startswith("python"):
            yield from ((w, Touch.RAN) for w in named[:1])


def _reverted(words: list[str], named: list[str]) -> list[str]:
    """The files ``git restore`` or ``git checkout`` (``words`` from its sub-command
    on) puts back: checkout's after ``--``, else those with an extension (a branch
    may hold a slash: ``git checkout feature/x`` reverts nothing, nor ``-b``)."""
    if words[0] == "restore":
        return named
    if "-b" in words or "-B" in words or "--orphan" in words:
        return []
    if "--" in words:
        after = set(words[words.index("--") + 1 :])
        return [w for w in named if w in after]
    return [w for w in named if "." in w.rsplit("/", 1)[-1]]


def _redirects(words: list[str]) -> Iterator[tuple[str, Touch]]:
    """The files ``>`` and ``>>`` write (``> f``, ``>f``, ``>> f``)."""
    for k, w in enumerate(words):
        if not w.startswith(">") or w.startswith(">&"):
            continue
        target = w.lstrip(">") or (words[k + 1] if k + 1 < len(words) else "")
        if target and target != "/dev/null" and _pathlike(target):
            yield target, Touch.EDITED if w.startswith(">>") else Touch.CREATED


def _pathlike(word: str) -> bool:
    """Whether a command's word names a file: a path with a slash, or a name with an
    extension (``x.py``, ``tests/test_x.py::test_y``); no URL, option or glob."""
    word = word.split("::", 1)[0]
    if not word or len(word) > 300 or "://" in word or not _NOT_IN_PATHS.isdisjoint(word):
        return False
    stem, _, ext = word.rpartition(".")
    named = bool(stem.strip(".")) and 0 < len(ext) <= 8 and ext[0].isalpha() and ext.isalnum()
    return "/" in word or named


def failure(result: str) -> str | None:
    """The error a tool result reports, or ``None`` for a success: with an exit
    status, a non-zero one (its last line reporting an error, else naming one, else
    its last line); without, its last line reporting an error (a traceback ends on
    the exception). Memoized: a session's every compaction reads its results again."""
    return _FAILURES_SEEN.cached((len(result), hash(result)), _failure, result)


def _failure(result: str) -> str | None:
    found = _EXIT.search(result[:200]) or _EXIT.search(result[-200:])
    status = int(found.group(1) or found.group(2)) if found else None
    if status == 0:
        return None
    low = result.lower()  # every line either pattern finds holds one of these words
    reports = any(w in low for w in ("error", "exception", "fatal", "panic", "failed"))
    line = (_last_line(_REPORT, result) or _last_line(_FAILURES, result)) if reports else None
    if status is not None:
        if line is None:  # nothing reports it: a line naming one, else the last line
            lines = [x for x in map(_clean, result.splitlines()) if x]
            named = [x for x in lines if severe(x.lower())] or lines
            line = named[-1] if named else None
        line = f"exit {status}: {line}" if line else f"exit {status}"
    if line is None:
        return None
    return line if len(line) <= _ERROR_CHARS else line[: _ERROR_CHARS - 3] + "..."


def _last_line(pattern: re.Pattern[str], text: str) -> str | None:
    """The last line of ``text`` that ``pattern`` finds something on (one scan of
    the text's last lines, then of the rest if they hold none: a match never spans
    lines), without the result's frame."""
    split = text.rfind("\n", 0, max(len(text) - _TAIL_CHARS, 0)) + 1  # a line's start
    found = deque(pattern.finditer(text, split), maxlen=1)
    if not found and split:
        found = deque(pattern.finditer(text, 0, split), maxlen=1)
    if not found:
        return None
    last = found[0]
    start = text.rfind("\n", 0, last.start()) + 1
    end = text.find("\n", last.end())
    return _clean(text[start : end if end >= 0 else len(text)]) or None


def _clean(line: str) -> str:
    """A result's line without mini-SWE-agent's frame (``<returncode>``, ``<output>``)."""
    return _TAGS.sub("", _EXIT.sub("", line)).strip()
