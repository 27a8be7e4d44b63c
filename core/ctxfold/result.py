"""What a compression returns: the messages, stats and a per-message trace."""

from __future__ import annotations

import re
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from itertools import repeat
from typing import Any, Literal, overload

from .formats import CTXFOLD, MessageFormat
from .messages import Message
from .validity import SYSTEM_ROLES, system_block_end
from .wire.anthropic import to_anthropic
from .wire.openai import to_openai

__all__ = [
    "FOLDED",
    "NOTE_HEAD",
    "NOTE_KEY",
    "NOTE_MARK",
    "RECALL_END",
    "RECALL_HEAD",
    "RECALL_KEY",
    "Action",
    "CompressionResult",
    "CompressionStats",
    "Decision",
    "Trace",
    "flagged",
    "from_user",
    "insert_note",
    "is_note",
    "note_message",
    "note_role",
    "sources_of",
    "without_recall",
]

#: The ``metadata`` key of a message a strategy wrote (a note, a summary), holding what
#: it stands for, e.g. ``{"kind": "summary", "what": "12 earlier messages summarized"}``.
NOTE_KEY = "ctxfold"


def note_head(what: str) -> str:
    """The first line of a message a strategy writes in place of earlier ones."""
    return f"[ctxfold: {what}]"


def note_message(role: str, kind: str, what: str, body: str, **meta: Any) -> Message:
    """A message that stands for earlier ones (a note, a summary): its first line says
    what it stands for (``[ctxfold: 12 earlier messages summarized]``), the ``body``
    follows, and ``metadata["ctxfold"]`` holds ``kind``, ``what`` and ``meta``.
    A reversible round puts its id into that first line."""
    text = note_head(what) + (f"\n{body}" if body else "")
    return Message(role, text, metadata={NOTE_KEY: {"kind": kind, "what": what, **meta}})


#: What every note's first line begins with (a cheap test before :data:`NOTE_HEAD`).
NOTE_MARK = "[ctxfold"
#: The start of a note's first line, with or without a reversible round's id.
NOTE_HEAD = re.compile(re.escape(NOTE_MARK) + r"(?: round [0-9a-f]{10,64})?[:\]]")


def is_note(m: Message) -> bool:
    """Whether ``m`` stands for earlier messages: a note or summary a strategy wrote,
    known by its metadata or, in a history that went through OpenAI dicts, by its first
    line. Fed back in, it is history like any other, not a pinned system prompt."""
    meta = m.metadata.get(NOTE_KEY)
    if isinstance(meta, Mapping) and "what" in meta:
        return True
    return m.role != "user" and m.role != "tool" and bool(NOTE_HEAD.match(m.text))


def from_user(m: Message) -> bool:
    """Whether ``m`` is something the user said: a user message that is not a note
    (a note speaks as the user where strict chat APIs want a user turn)."""
    return m.role == "user" and not is_note(m)


#: The first line of a recall block (passages of the history a query recalled), and
#: the line that ends it when it opens a user message of the history; the ``metadata``
#: key of a message that carries one (the history messages it quotes).
RECALL_HEAD = "[ctxfold recall:"
RECALL_END = "[end of recall]"
RECALL_KEY = "ctxfold_recall"


def without_recall(messages: Sequence[Message]) -> list[Message]:
    """``messages`` without their recall blocks: a message that is only a block goes,
    a user message a block opens gets its own content back (known by its text, so a
    history that went through OpenAI dicts is read alike)."""
    out: list[Message] = []
    for m in messages:
        if m.role != "user" or not m.text.startswith(RECALL_HEAD):
            out.append(m)
            continue
        meta = {k: v for k, v in m.metadata.items() if k != RECALL_KEY}
        content = m.content
        if isinstance(content, tuple):
            rest = content[1:]
            if rest:
                out.append(replace(m, content=rest, metadata=meta))
            continue
        _, end, after = (content or "").partition(f"\n{RECALL_END}\n\n")
        if end:
            out.append(replace(m, content=after, metadata=meta))
    return out


def note_role(messages: Sequence[Message], at: int, preferred: str = "system") -> str:
    """The role of a note inserted at ``at`` (after the leading system block): a system
    note joins that block when a user message follows it; when an assistant message, a
    tool result or nothing would follow, it speaks as the user instead, so that the
    conversation after the instructions still opens with the user, as Anthropic, Gemini
    and most open-model chat templates require."""
    follows = messages[at].role if at < len(messages) else None
    return "user" if preferred in SYSTEM_ROLES and follows != "user" else preferred


def insert_note(messages: list[Message], note: Message, hole: int | None = None) -> int:
    """Insert ``note`` where strict chat APIs accept it; return where it went.

    ``hole`` is where the messages the note stands for were. When folding them left two
    user (or two assistant) messages side by side there, the note fills the gap in the
    other role, so turns still alternate; otherwise it goes after the leading system
    block, in the role :func:`note_role` gives it."""
    if hole is not None and 0 < hole < len(messages):
        before, after = messages[hole - 1].role, messages[hole].role
        if before == after and before in _TURN_ROLES:
            role = _TURN_ROLES[before]
            messages.insert(hole, replace(note, role=role))
            return hole
    at = system_block_end(messages)
    role = note_role(messages, at, note.role)
    messages.insert(at, note if role == note.role else replace(note, role=role))
    return at


_TURN_ROLES = {"user": "assistant", "assistant": "user"}  # a turn's role -> the other's


def earlier(count: int) -> str:
    """``"1 earlier message"``, ``"12 earlier messages"``."""
    return f"{count} earlier message{'' if count == 1 else 's'}"


#: What happened to one input message.
Action = Literal["kept", "compressed", "summarized", "dropped", "deduplicated", "reverted"]


#: The reason of a message a strategy folded into its note.
FOLDED = "folded:note"


@dataclass(frozen=True, slots=True)
class Decision:
    """One trace entry: what a strategy did with input message ``index`` and why.

    ``reason`` says why, short and machine-readable (``pinned:system``, ``recent``,
    ``window``, ``outside_window``, ``fits_budget``, ``folded:note``,
    ``merged_into:3``); ``flags`` what else happened to the message on the way (the
    layers and adapters that reshaped it, ``layer:json``, ``adapter:yaml``, or
    ``dedup:repeated_later``); ``step`` names the strategy (or, in a chain, the step)
    that decided. :attr:`label` is the one-line form the trace prints.
    """

    index: int
    action: Action
    reason: str
    tokens_before: int
    tokens_after: int
    step: str
    flags: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``reason`` and ``flags``, comma-joined: ``folded:note,adapter:logs``."""
        return ",".join((self.reason, *self.flags))


_Kind = tuple[Action, str, str, tuple[str, ...]]  # a decision but its index and tokens


class Trace(Sequence[Decision]):
    """A trace kept as columns, as a session keeps its history's: for each message a
    code for what was decided (each distinct action, reason, step and flags is stored
    once) and its tokens before and after. A trace of 100,000 messages is three arrays,
    not 100,000 objects for the garbage collector to walk on every full collection
    (about 2 µs each in a long session); reading an entry makes its :class:`Decision`.
    ``trace[i]`` is the decision about message ``i``. A trace equals any sequence of
    the same decisions (a tuple of them included)."""

    __slots__ = ("_after", "_before", "_codes", "_kinds", "_of")

    def __init__(self) -> None:
        self._kinds: list[_Kind] = []  # shared by copies, only ever appended to
        self._of: dict[_Kind, int] = {}
        self._codes = array("I")
        self._before = array("q")
        self._after = array("q")

    def _code(self, kind: _Kind) -> int:
        code = self._of.get(kind)
        if code is None:
            code = self._of[kind] = len(self._kinds)
            self._kinds.append(kind)
        return code

    def add(self, action: Action, reason: str, step: str, tokens: Sequence[int]) -> None:
        """Append one decision per entry of ``tokens``, each a message of that many
        tokens that ``step`` left as it was (``action`` for ``reason``)."""
        self._codes.extend(repeat(self._code((action, reason, step, ())), len(tokens)))
        self._before.extend(tokens)
        self._after.extend(tokens)

    def __setitem__(self, i: int, d: Decision) -> None:
        if d.index != i:
            raise ValueError(f"the decision about message {d.index} cannot stand at {i}")
        self._codes[i] = self._code((d.action, d.reason, d.step, d.flags))
        self._before[i], self._after[i] = d.tokens_before, d.tokens_after

    def action(self, i: int) -> Action:
        """The action of entry ``i`` (without making its decision)."""
        return self._kinds[self._codes[i]][0]

    def __len__(self) -> int:
        return len(self._codes)

    @overload
    def __getitem__(self, i: int) -> Decision: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[Decision, ...]: ...

    def __getitem__(self, i: int | slice) -> Decision | tuple[Decision, ...]:
        if isinstance(i, slice):
            return tuple(self[k] for k in range(*i.indices(len(self))))
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"decision {i} of a trace of {len(self)}")
        action, reason, step, flags = self._kinds[self._codes[i]]
        return Decision(i, action, reason, self._before[i], self._after[i], step, flags)

    def __iter__(self) -> Iterator[Decision]:
        kinds, before, after = self._kinds, self._before, self._after
        for i, code in enumerate(self._codes):
            action, reason, step, flags = kinds[code]
            yield Decision(i, action, reason, before[i], after[i], step, flags)

    def copy(self) -> Trace:
        """A trace that later changes to this one do not reach."""
        out = Trace.__new__(Trace)
        out._kinds, out._of = self._kinds, self._of
        out._codes, out._before, out._after = self._codes[:], self._before[:], self._after[:]
        return out

    def flagged(self, indices: Iterable[int], flag: str) -> Trace:
        """A copy with ``flag`` among the flags of the decisions about ``indices``."""
        out = self.copy()
        for i in set(indices):
            action, reason, step, flags = self._kinds[self._codes[i]]
            out._codes[i] = out._code((action, reason, step, (*flags, flag)))
        return out

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Trace) and other._kinds is self._kinds:
            return (self._codes, self._before, self._after) == (
                other._codes,
                other._before,
                other._after,
            )
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Trace({list(self)!r})"


def sources_of(
    inputs: Sequence[Message],
    out: Sequence[Message],
    trace: Sequence[Decision],
    round_id: str | None = None,
) -> list[int | None]:
    """For each message of ``out``, a compaction of ``inputs`` with ``trace``, the index
    of the input it shows (whole or rewritten), or ``None`` for a message the compaction
    wrote (its note, a bridging note, a reference or recall block). The one rule every layer
    matches outputs to inputs by: an input itself is that input; a new message with
    note metadata of this compaction (its ``round`` is ``round_id`` or none yet) was
    written; any other stands for the next input the trace shows (a decision that
    left it tokens), in order. Each output that shows an input uses up one such
    decision."""
    at = {id(m): k for k, m in enumerate(inputs)}
    shown = iter([d.index for d in trace if d.tokens_after > 0])
    result: list[int | None] = []
    for m in out:
        k = at.get(id(m))
        if k is not None:
            result.append(k)
            next(shown, None)
            continue
        meta = m.metadata.get(NOTE_KEY)
        if RECALL_KEY in m.metadata or (
            isinstance(meta, Mapping) and meta.get("round") in (round_id, None)
        ):
            result.append(None)
            continue
        result.append(next(shown, None))
    return result


def flagged(trace: Sequence[Decision], indices: Sequence[int], flag: str) -> Sequence[Decision]:
    """``trace`` with ``flag`` among the flags of the decisions about ``indices``."""
    if isinstance(trace, Trace):
        return trace.flagged(indices, flag)
    marked = set(indices)
    if not marked:
        return list(trace)
    return [replace(d, flags=(*d.flags, flag)) if d.index in marked else d for d in trace]


@dataclass(frozen=True)
class CompressionStats:
    """Token and message counts before and after, and the time it took."""

    strategy: str
    counter: str
    budget: int
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    elapsed_ms: float
    savings: Mapping[str, int] = field(default_factory=dict)
    """Tokens each layer or step saved (estimated), e.g. ``{"json": 120, "truncate": 800}``."""
    usage: Mapping[str, int] = field(default_factory=dict)
    """What the run cost besides tokens: ``summarizer_calls``, ``summarizer_tokens`` (sent
    to the summarizer), ``embedder_calls``, ``embedder_texts``, ``cache_hits``,
    ``cache_misses`` (only the non-zero ones)."""

    @property
    def ratio(self) -> float:
        """``tokens_before / tokens_after`` (1.0 when nothing changed)."""
        return self.tokens_before / self.tokens_after if self.tokens_after else float("inf")

    @property
    def reduction_pct(self) -> float:
        """Share of tokens removed, in percent."""
        if not self.tokens_before:
            return 0.0
        return 100.0 * (self.tokens_before - self.tokens_after) / self.tokens_before

    @property
    def fits(self) -> bool:
        """Whether the output is within the budget."""
        return self.tokens_after <= self.budget

    def as_dict(self) -> dict[str, Any]:
        """All fields plus ``ratio``, ``reduction_pct`` and ``fits``, for logs and JSON."""
        out = asdict(self)
        out["savings"] = dict(self.savings)
        out["usage"] = dict(self.usage)
        out.update(ratio=self.ratio, reduction_pct=self.reduction_pct, fits=self.fits)
        return out


@dataclass(frozen=True)
class CompressionResult:
    """The compressed messages with their stats and trace.

    ``trace`` has one :class:`Decision` per input message, in input order (a tuple,
    or from a session a :class:`Trace`: its decisions kept as columns).
    ``warnings`` notes irregularities carried through from the input (a tool call
    without a result, a result without its call) and a reversible compression that
    found no room for its block. ``round_id`` is the id of the round in the verbatim
    store when the result is reversible (:func:`ctxfold.expand` gives the input back).
    ``store`` is the verbatim store its rounds were written to (a session's own part
    of its store), where :func:`ctxfold.expand` reads them when given no other.
    """

    messages: tuple[Message, ...]
    stats: CompressionStats
    trace: Sequence[Decision]
    strategy: str
    warnings: tuple[str, ...] = ()
    round_id: str | None = None
    given: MessageFormat = field(default=CTXFOLD, compare=False, repr=False)
    store: Any = field(default=None, compare=False, repr=False)

    def as_given(self) -> Any:
        """The compressed messages in the kind the input came in: ctxfold messages,
        OpenAI or Anthropic dicts (a list, or the request object given, its messages
        and system replaced), or a framework's messages (LangChain's, LlamaIndex's)
        when its ctxfold extra is installed."""
        return self.given.write(self.messages)

    def to_openai(self) -> list[dict[str, Any]]:
        """The compressed messages as OpenAI chat dicts."""
        return to_openai(self.messages)

    def to_anthropic(self) -> tuple[Any, list[dict[str, Any]]]:
        """The compressed messages as Anthropic ``(system, messages)``."""
        return to_anthropic(self.messages)

    def decision_counts(self) -> dict[str, int]:
        """How many input messages got each action, e.g. ``{"kept": 12, "dropped": 30}``."""
        return dict(Counter(d.action for d in self.trace))
