"""The numbers ``auto`` runs by, each with its reason, and the options its stages read.

They live in one frozen :class:`Policy` so that a change to one is a change to one
line, and so that a stage never carries an unnamed constant.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from ...contract import Overflow
from ...models.summarizers import Summarizer
from ...storage.cache import Cache

__all__ = ["POLICY", "AutoOptions", "Policy", "Verbatim"]


class Verbatim(Enum):
    """Why a message of the history stays as it is (its trace reason is the value)."""

    TASK = "task"  # the first user message, when it is short enough
    RECENT = "recent"  # one of the newest whole units


@dataclass(frozen=True)
class Policy:
    """The constants of the selection and of the fit loop."""

    # --- budget split
    note_overhead: int = 20  # the note's own message overhead and header: its minimum
    # (the newest unit is always shown: whole when it fits the room the pinned messages
    # and this leave, else cut in place; see ``strategies.newest.shown_newest``)
    agent_recent: float = 0.25  # recent_share with tool calls: the latest results are state
    chat_recent: float = 0.1  # and without: older turns are memory, selection serves better
    # --- analysis and plans
    preserved_weight: float = 2.0  # a piece an adapter marks as preserved counts this much more
    people_echo: float = 2.0  # an id a person or the agent writes counts this much (tool output 1)
    call_scan_chars: int = 1500  # a tool call's text is scored on its first this many chars
    horizon: float = 4.0  # budgets of the newest older messages analysed in full, and
    horizon_floor: int = 64_000  # at least this many tokens (conversations this size are
    # analysed whole); older messages are glanced (see ``horizon``)
    candidates: float = 2.0  # budgets of glanced messages, the best, analysed in full too,
    candidate_length: float = 0.75  # ranked by value / tokens ** this (less than 1: a long
    # message may hold one good sentence; tuned on the first two LoCoMo conversations)
    note_lines_from: int = 8_000  # tokens: an earlier note this long is analysed line by
    # line, each line memoized (a session's compaction then pays only for its note's new
    # lines); a shorter one whole, as any message (line by line cost mini-SWE-agent's
    # 4K sessions 0.3 points of memory: its adapters see single lines)
    pointer_score: float = 50.0  # a copy's pointer to the later message: chosen before all else
    # --- selection
    tag_cost: float = 3.0  # tokens a speaker tag and line break cost in the note
    redundancy: float = 0.6  # how much a sentence loses when its words are already covered
    min_cost: float = 10.0  # a shorter sentence is ranked as if it cost this many tokens
    task_boost: float = 2.5  # the task statement's sentences are worth this much more
    task_opening: float = 0.05  # and its opening opens every note, up to this share
    # of the room (a long task's title and first sentences say what is asked; the rest
    # competes by value, its identifiers listed: a quarter of the room cost
    # mini-SWE-agent 1.6 points of identifiers at 25%; carried in every note of a
    # session, next-action at 4K on its tune half: 0.03 0.873, 0.05 0.871, 0.07 0.866,
    # 0.1 0.863; 8K 0.938 at 0.05 and 0.1)
    task_id_boost: float = 3.0  # and its identifiers, in the note's list
    state_share: float = 0.08  # the most of the note's room its working state's lines
    # take (the files touched, the errors still open: see ``state``), newest first
    agent_recency: float = 0.2  # with tool calls, older messages weigh from 0.9 (the
    # oldest) to 1.1 (the newest): an agent's latest results are its state. Without, all
    # alike: a chat's older turns are memory, a fact said early asked about as often
    # (LoCoMo's tune half, answers kept: 72.0% -> 78.7% at 25%, 48.0% -> 56.0% at 10%)
    call_bonus: float = 1.0  # a tool call is worth this much more than its text's score
    id_scale: float = 0.5  # an identifier's value per token against a sentence's
    id_short: float = 4.0  # tokens under which an identifier's value is not discounted
    chars_per_id_token: float = 3.2  # for estimating an identifier's cost in the list
    # --- fit loop
    attempts: int = 6  # assemble-and-count tries before folding a verbatim unit too
    full_within: float = 0.03  # of the free room: a result this close to it is full
    top_up_room: float = 0.9  # of the room left: what one top-up may add (estimates err)
    trim_margin: float = 1.15  # excess tokens x this (+ trim_extra) are unselected
    trim_extra: float = 2.0
    # --- top-up fill and LLM summary
    min_fill: int = 3  # tokens: less room than this holds no identifier
    fill_misses: int = 20  # identifiers too long for the room before the fill gives up
    min_summary: int = 16  # tokens: an LLM summary shorter than this says nothing
    summary_tries: int = 4  # times an over-long LLM summary is shortened before giving up
    # --- in the note
    also: str = "Also mentioned: "  # the line that lists identifiers
    dedup_min_chars: int = 200  # a shorter message repeated later is not a copy worth noting
    repeat_min_chars: int = 20  # a shorter line repeated later is not a repetition


#: The policy ``auto`` uses.
POLICY = Policy()


class AutoOptions(Protocol):
    """The options of :class:`~ctxfold.strategies.AutoCompressor` its stages read."""

    @property
    def name(self) -> str: ...
    @property
    def recent_share(self) -> float | None: ...
    @property
    def task_share(self) -> float: ...
    @property
    def digest_share(self) -> float: ...
    @property
    def summarizer(self) -> Summarizer | None: ...
    @property
    def cache(self) -> Cache | None: ...
    @property
    def pin_roles(self) -> tuple[str, ...]: ...
    @property
    def overflow(self) -> Overflow: ...
