"""The agent's working state, gathered with no model from what its tool calls did
(:mod:`.calls`) and what their results reported (:mod:`.outcomes`): its latest plan
(a to-do list it wrote with a tool), the files it touched (the last action on each),
the errors its commands met that no later run of the same command followed with a
success, and the other shell commands it ran.

A note shows them after the task's line, in lines of their own (``Plan: ...``,
``Files: ...``, ``Unresolved: ...``, ``Ran: ...``), within a share of its room (see
:func:`.fit.fit`); its selected lines and its list follow. A note folded again hands
its state on in its metadata, so a session's notes keep what every earlier round saw.
Each line names what it comes from: a file by its path, an error by the command that
met it.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ...messages import Message
from ...result import NOTE_KEY
from ...text.secrets import is_secret, mask
from ...tokens import TokenCounter
from .calls import STATUS_WORDS, Call, Run, Touch
from .outcomes import failure

__all__ = [
    "FILES",
    "PLAN",
    "RAN",
    "STATE_HEADS",
    "UNRESOLVED",
    "OpenError",
    "WorkingState",
    "working_state",
]

_K = TypeVar("_K")
_V = TypeVar("_V")

#: What the state's lines begin with (a note folded again offers neither: the next
#: note writes its own, from the state its metadata hands on).
FILES = "Files: "
UNRESOLVED = "Unresolved: "
RAN = "Ran: "
PLAN = "Plan: "
STATE_HEADS = (PLAN, FILES, UNRESOLVED, RAN)


@dataclass(frozen=True)
class OpenError:
    """An error a command met (its result's last error line) that no later run of
    the same command followed with a success."""

    command: str
    error: str


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
        files, files_cost = _listed(
            (  # the output names a file read: reading it again is no news
                f"{path} ({touch.value})"
                for path, touch in sorted(reversed(self.files), key=lambda f: _FIRST[f[1]])
                if touch is not Touch.READ or path not in elsewhere
            ),
            ", ",
            max_tokens - used,
            counter,
        )
        used += files_cost
        ran, _ = _listed(
            (f"`{c}`" for c in reversed(self.commands) if c not in elsewhere),
            "; ",
            max_tokens - used,
            counter,
        )
        files_line = [FILES + files] if files else []
        return ([plan] if plan else []) + files_line + out + ([RAN + ran] if ran else [])

    def _plan_line(self, max_tokens: float, counter: TokenCounter) -> str:
        """The plan within ``max_tokens``: every step, else how many are done and as
        many of the others as fit; "" when none does."""
        steps = [f"[{status}] {step}" for status, step in self.plan]
        line = PLAN + "; ".join(steps)
        if not steps or counter.count_text(line) + 1 <= max_tokens:
            return line if steps else ""
        done = f"{sum(status == 'done' for status, _ in self.plan)} done; "
        room = max_tokens - counter.count_text(PLAN + done)
        rest, _ = _listed((s for s in steps if not s.startswith("[done]")), "; ", room, counter)
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
            if isinstance(p, list) and len(p) == 2 and p[0] in STATUS_WORDS
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


def _listed(
    entries: Iterable[str], sep: str, max_tokens: float, counter: TokenCounter
) -> tuple[str, float]:
    """As many of ``entries`` as fit ``max_tokens`` (with ``sep`` between them and a
    line's head), in order, none cut; and the tokens they take (0 for none)."""
    shown: list[str] = []
    used = 3.0  # the line's head and its break
    for entry in entries:
        cost = counter.count_text(sep + entry)
        if used + cost > max_tokens:
            break
        shown.append(entry)
        used += cost
    return sep.join(shown), used if shown else 0.0


def _last(order: dict[_K, _V], key: _K, value: _V) -> None:
    """``key`` with ``value`` at the end of ``order`` (a dict kept in the order of each
    key's last time), wherever it was."""
    order.pop(key, None)
    order[key] = value


def _rows(value: object) -> list[object]:
    """A metadata field's rows: a list's items, nothing for anything else."""
    return value if isinstance(value, list) else []


def working_state(messages: Sequence[Message], indices: Iterable[int]) -> WorkingState:
    """The working state the messages at ``indices`` (in order) show: an earlier
    note's state (from its metadata) carried on, then each tool call's touches and
    each result's outcome."""
    files: dict[str, Touch] = {}
    errors: dict[Run, OpenError] = {}
    commands: dict[str, None] = {}  # shell commands that met no error, by last run
    plan: tuple[tuple[str, str], ...] = ()
    calls: dict[str, Call] = {}
    for i in indices:
        m = messages[i]
        meta = m.metadata.get(NOTE_KEY)
        if isinstance(meta, Mapping) and "state" in meta:
            before = WorkingState.from_meta(meta["state"])
            for path, touch in before.files:
                _last(files, path, touch)
            errors.update((Run.of(e.command), e) for e in before.errors)
            for ran in before.commands:
                _last(commands, ran, None)
            plan = before.plan or plan
            continue
        for c in m.tool_calls:
            calls[c.id] = call = Call.of(c)
            plan = call.plan or plan  # each to-do list replaces the one before
            for path, touch in call.touches:
                if not is_secret(path):  # a credential is never one of the state's names
                    _last(files, path, touch)
        if m.role == "tool" and m.tool_call_id in calls:
            call = calls[m.tool_call_id]
            error, run = failure(m.text), call.run
            errors.pop(run, None)  # met again: as it ends now
            command = mask(call.command)  # shown and stored with credentials masked
            commands.pop(command, None)  # met again: as it ends now
            if error is not None:
                errors[run] = OpenError(command, mask(error))
            else:  # a success resolves every failed run it covers
                errors = {r: e for r, e in errors.items() if not run.covers(r)}
                if call.shell:
                    _last(commands, command, None)
    return WorkingState(tuple(files.items()), tuple(errors.values()), tuple(commands), plan)
