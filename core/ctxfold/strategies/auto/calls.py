"""What one tool call does to the agent's work, read with no model: the files it
touches and how (an editor's sub-command, a reader's or writer's name, a shell
command's verbs and redirects), the command it runs, and the plan (to-do list) it
writes. Memoized by the call's name and arguments: a session's every compaction
reads its calls again. :mod:`.state` gathers these into the working state.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from ..._json import loads as json_loads
from ..._state import LRU, memo
from ...messages import Message, ToolCall
from ...text.primitives import clipped
from ...text.secrets import mask

__all__ = [
    "STATUS_WORDS",
    "Call",
    "Run",
    "Touch",
    "command_of",
    "has_plan",
    "plan_of",
    "shell_lines",
    "shell_touches",
    "touches",
]


class Touch(str, Enum):
    """What the agent last did to a file."""

    READ = "read"
    EDITED = "edited"
    CREATED = "created"
    RAN = "ran"
    REVERTED = "reverted"  # its changes undone (git checkout -- f, git restore f)
    DELETED = "deleted"


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
_COMMAND_CHARS = 100  # a command is shown up to this many characters


class Call(NamedTuple):
    """What the state reads of a tool call: the files it touches, its command, what
    it runs, whether it is a shell command and the plan it writes, if any."""

    touches: tuple[tuple[str, Touch], ...]
    command: str
    run: Run
    shell: bool
    plan: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, c: ToolCall) -> Call:
        """The call's facts, memoized by its name and arguments (a session's every
        compaction reads its calls again), kept as strings only, flat (a memo the
        collector stops walking: see ``_state``)."""
        flat, command, program, files, shell, steps = _CALLS.cached((c.name, c.arguments), _read, c)
        pairs = tuple((flat[k], Touch(flat[k + 1])) for k in range(0, len(flat), 2))
        plan = tuple((steps[k], steps[k + 1]) for k in range(0, len(steps), 2))
        return cls(pairs, command, Run(program, frozenset(files)), shell, plan)


_Facts = tuple[tuple[str, ...], str, str, tuple[str, ...], bool, tuple[str, ...]]


def _read(c: ToolCall) -> _Facts:
    command = command_of(c)
    run = Run.of(command)
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
    return any(Call.of(c).plan for i in indices for c in messages[i].tool_calls)


def _step(item: object) -> tuple[str, str] | None:
    """A plan's step from one item of a list: its status word and its text."""
    if not isinstance(item, Mapping) or not isinstance(status := item.get("status"), str):
        return None
    text = next((t for k in _STEP_KEYS if isinstance(t := item.get(k), str) and t.strip()), None)
    if text is None:
        return None
    text = mask(" ".join(text.split()))
    return _STATUS.get(status.lower().replace("-", "_"), "todo"), clipped(text, _STEP_CHARS)


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
STATUS_WORDS = frozenset(("done", "now", "todo"))
_PLAN_STEPS = 30  # a plan's first steps read, at most
_STEP_CHARS = 100


@dataclass(frozen=True)
class Run:
    """What a command runs: its program (the last step's words that are neither
    options nor files: ``python pytest``) and the files it names (none: all of them)."""

    program: str
    files: frozenset[str]

    @classmethod
    def of(cls, command: str) -> Run:
        words = _SEPARATORS.split(command)[-1].split()
        files = frozenset(w.split("::", 1)[0] for w in words if _pathlike(w))
        program = " ".join(w for w in words if not w.startswith("-") and not _pathlike(w))
        return cls(program, files)

    def covers(self, other: Run) -> bool:
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
    return clipped(" ".join(text.split()), _COMMAND_CHARS)


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
