"""Stage 5, fit: select, assemble and count exactly until the budget holds (trim when
over, top up once when the estimates left room, fold the oldest verbatim unit when
trimming is not enough); then fill the room left with identifiers, counted exactly,
and let an LLM summarizer rewrite the note's condensed lines if one is set."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from ...contract import Conversation
from ...messages import Message, transcript, uses_tools
from ...models.summarizers import fit_summary, summarize
from ...result import FOLDED, NOTE_KEY, Decision, from_user, is_note
from ...text.scoring import ScoreContext
from ...text.shortening import head_of
from ...tokens import TokenCounter
from ...units import Unit
from ..base import keep_only, overflow
from ..newest import shown_newest
from .analysis import Analyzer
from .assemble import Assembled, Layout, Notes, assemble
from .calls import has_plan
from .horizon import candidates, glanced_plan, horizon
from .plan import (
    Carried,
    Plan,
    id_value,
    identifier_pool,
    lines_repeated_later,
    lookup,
    make_plan,
    mark_duplicates,
    opening,
    shown_text,
    task_of,
)
from .policy import POLICY, AutoOptions, Verbatim
from .select import Selection, items, select, trim
from .state import working_state

__all__ = ["Fitted", "fill", "fit", "summarize_note"]


class Fitted(NamedTuple):
    """What the fit loop settled on; ``plans`` holds every message that was folded or
    compressed (the older ones), ``note_at`` the note's position in ``messages``,
    ``pool`` the identifiers the note may list, ``verbatim`` the weights of the older
    messages' identifiers that a message kept verbatim shows (the pool lacks them)."""

    messages: list[Message]
    trace: Sequence[Decision]
    note_at: int | None
    others: str  # what the pinned messages and those shown in place show
    plans: dict[int, Plan]
    pool: list[tuple[str, float]]
    verbatim: Mapping[str, float]
    used: frozenset[str] = frozenset()  # identifiers the conversation used (see Pool)
    alike: frozenset[str] = frozenset()  # those only alike lines showed (see Pool)
    layout: Layout | None = None  # the note's head: a summarized note opens with it too


def carried_cost(conv: Conversation, free: list[Unit], notes: Notes) -> int:
    """Tokens the note needs beyond its head (``POLICY.note_overhead``) at least: the
    identifiers earlier notes among the older messages carried, but those only alike
    lines showed (the note lists the others all, uncapped), which no other message in
    view holds. A session folds its last note again, and what the next note drops is
    gone from every later render."""
    older = [i for u in free[:-1] for i in u.indices]
    carried = carried_weights(conv.messages, older)
    ids = list(dict.fromkeys(v for c in carried.values() for v in c.weights if v not in c.alike))
    if not ids:
        return 0
    shown = shown_text(conv.messages[i] for i in free[-1].indices)
    note = notes.write(len(older), [], ids, shown, conv.counter)
    return max(conv.counter.count_message(note) - POLICY.note_overhead, 0)


def _verbatim(
    conv: Conversation, free: list[Unit], avail: int, opts: AutoOptions, carried: int
) -> tuple[dict[int, Verbatim], int, Unit | None, dict[int, Message]]:
    """The newest unit (always: the agent's place; whole when it fits ``avail``, the
    room the pinned messages and the note's head leave, less what the note
    ``carried``, else cut in place: see :func:`shown_newest`), the task (the first
    user message; the fit loop folds it first when it does not fit beside them) and
    the newer units after it, kept verbatim; what they cost; the task's unit; the
    newest unit's messages cut."""
    tokens = conv.tokens
    verbatim: dict[int, Verbatim] = {}
    recent_share = opts.recent_share
    if recent_share is None:
        recent_share = POLICY.agent_recent if uses_tools(conv.messages) else POLICY.chat_recent
    newest = free[-1]
    room = avail + POLICY.note_overhead  # what the pinned messages leave
    cut = shown_newest(conv, free, room, POLICY.note_overhead, carried)
    for i in newest.indices:
        verbatim[i] = Verbatim.RECENT  # shown as ``cut`` holds it, where it is cut
    used = conv.cost(newest) - sum(
        tokens[i] - conv.counter.count_message(m) for i, m in cut.items()
    )
    users = (u for u in free if from_user(conv.messages[u.start]))
    first_user = None if carrier(conv.messages, free) >= 0 else next(users, None)
    if first_user is not None and first_user is not newest and len(first_user) == 1:
        cost = tokens[first_user.start]
        if cost <= opts.task_share * avail:
            verbatim[first_user.start] = Verbatim.TASK
            used += cost
    for u in reversed(free[:-1]):
        if u.start in verbatim:
            continue
        cost = conv.cost(u)
        if used + cost > recent_share * avail:
            break
        for i in u.indices:
            verbatim[i] = Verbatim.RECENT
        used += cost
    return verbatim, used, first_user, cut


def fit(conv: Conversation, opts: AutoOptions, analyzer: Analyzer, notes: Notes) -> Fitted:
    """Select, assemble and check the exact count until the budget holds."""
    messages, tokens, budget = conv.messages, conv.tokens, conv.budget
    n = len(messages)
    pinned_list, free, pinned_cost = conv.pinned(opts.pin_roles)
    pinned = set(pinned_list)
    if pinned_cost > budget or not free:
        overflow(opts.overflow, required=pinned_cost, budget=budget, what="the pinned messages")
        out, trace, _ = keep_only(conv, pinned, pinned, opts.name)
        return Fitted(list(out), trace, None, "", {}, [], {})
    avail = budget - pinned_cost - POLICY.note_overhead
    carried = carried_cost(conv, free, notes)
    verbatim, used, first_user, cut = _verbatim(conv, free, avail, opts, carried)
    task = first_user.start if first_user else -1
    old_units = [u for u in free if u.start not in verbatim]
    old_idx = [i for u in old_units for i in u.indices]
    carried_task = _carried_task(conv, old_units, POLICY.task_opening * avail)
    plans, ctx = _plans(conv, old_idx, task, analyzer, carried_task)
    task_line = carried_task or _opening(plans, task, POLICY.task_opening * avail, conv.counter)
    if analyzer.layers.dedup:
        mark_duplicates(messages, plans)

    pool, said, alike = identifier_pool(plans, old_idx, task, carried_weights(messages, old_idx))
    in_verbatim = lookup(shown_text(messages[i] for i in verbatim), len(pool))
    shown = {v: w for v, w in pool if v in in_verbatim}
    pool = [(v, w) for v, w in pool if v not in shown]
    recency = POLICY.agent_recency if uses_tools(messages) else 0.0
    sel = items(plans, old_idx, task, n, pool, alike, recency)
    state = working_state(messages, old_idx)
    if state.plan and has_plan(messages, verbatim):  # a newer plan is shown
        state = replace(state, plan=())
    head = state.lines(POLICY.state_share * (avail - used), conv.counter, in_verbatim)
    head = [task_line, *head] if task_line else head
    room = avail - used - (conv.counter.count_text("\n".join(head)) + 1 if head else 0)
    select(sel, plans, room, opts.digest_share * room)
    layout = Layout(pinned, verbatim, old_units, plans, pool, cut, alike, state, head, task_line)
    loop = _Loop(free_room=budget - pinned_cost, id_share=opts.digest_share)
    done = _converge(conv, layout, sel, notes, opts.name, loop)
    while done is None and verbatim:
        # Still over: fold the oldest recent unit too (never the task, which the
        # selection cannot show again once it is planned, nor the newest unit, the
        # agent's place).
        oldest = min(
            (u for u in free[:-1] if verbatim.get(u.start) is Verbatim.RECENT),
            key=lambda u: u.start,
            default=None,
        )
        if oldest is None:
            break
        for i in oldest.indices:
            del verbatim[i]
            plans[i] = make_plan(
                analyzer(messages[i], tokens[i]), i, ctx, note=is_note(messages[i])
            )
        layout.old_units = sorted([*layout.old_units, oldest], key=lambda u: u.start)
        done = _converge(conv, layout, sel, notes, opts.name, loop)
    if done is not None:
        return Fitted(*done, plans, pool, shown, said, alike, layout)
    for i in [i for i, v in verbatim.items() if v is Verbatim.TASK]:  # folded too
        plans[i] = make_plan(analyzer(messages[i], tokens[i]), i, ctx)
    return _fold_all(conv, layout, notes, opts)


def _plans(
    conv: Conversation, old_idx: list[int], task: int, analyzer: Analyzer, task_line: str
) -> tuple[dict[int, Plan], ScoreContext]:
    """Each older message's plan, scored in this conversation: analysed in full below
    the horizon, and past it when its glance makes it a candidate; each message
    analysed once in this call, however small the process's memo (an earlier note
    offers nothing the ``task_line`` the note opens with says)."""
    messages, tokens = conv.messages, conv.tokens
    users = [i for i in range(len(messages)) if from_user(messages[i])]
    said = [messages[i].text for i in sorted({users[0], users[-1]})] if users else []
    if conv.task and conv.task not in said:  # a session's part: the task is in its note
        said = [conv.task, said[-1]] if said else [conv.task]
    goal = " ".join(said)
    keep = frozenset([task, *(i for i in old_idx if is_note(messages[i]))])
    hz = horizon(messages, tokens, old_idx, conv.budget, keep, analyzer.cut)
    analyses = {i: analyzer(messages[i], tokens[i]) for i in hz.near}
    words = [analyses[i].words if i in analyses else hz.far[i].features.content for i in old_idx]
    ctx = ScoreContext.from_words(words, goal, conv.rarity)
    later = lines_repeated_later(messages, old_idx)
    for i in candidates(hz.far, tokens, ctx, conv.budget):
        analyses[i] = analyzer(messages[i], tokens[i])
    plans = {
        i: make_plan(
            analyses[i],
            i,
            ctx,
            note=is_note(messages[i]),
            later=later.get(i),
            task=task_line,
        )
        if i in analyses
        else glanced_plan(messages[i], i, hz.far[i])
        for i in old_idx
    }
    return plans, ctx


def carrier(messages: Sequence[Message], units: Sequence[Unit]) -> int:
    """The earlier note among ``units`` that carries the task's opening (a session's
    task, folded in an earlier round: no later user message is the task then), or -1."""
    return next((u.start for u in units if task_of(messages[u.start])), -1)


def _carried_task(conv: Conversation, old_units: Sequence[Unit], room: float) -> str:
    """The task's opening an earlier note among the older units carries, which this
    note opens with too; none when it is over twice the ``room`` an opening gets
    (a render at a much smaller budget than the note's: its lines compete then)."""
    at = carrier(conv.messages, old_units)
    line = task_of(conv.messages[at]) if at >= 0 else ""
    return line if line and conv.counter.count_text(line) <= 2 * room else ""


def _opening(plans: dict[int, Plan], task: int, room: float, counter: TokenCounter) -> str:
    """The task's opening (see :func:`.plan.opening`) as the note's first line, when
    the task is folded; its plan then offers the rest only (``plans`` is changed). A
    first segment over the room alone (a long block) gives its head."""
    p = plans.get(task)
    if p is None:
        return ""
    places = list(opening(p, room))
    if not places:
        first = next(opening(p, math.inf), None)
        text = p.segments[first[0]][first[1]].strip() if first else ""
        head = head_of(text, int(room), counter) if text else ""
        return f"{p.tag}: {head}" if head else ""
    scores = [list(row) for row in p.scores]
    for pi, si in places:
        scores[pi][si] = 0.0
    plans[task] = replace(p, scores=scores)
    return f"{p.tag}: " + "".join(p.segments[pi][si] for pi, si in places).strip()


def carried_weights(messages: Sequence[Message], old_idx: list[int]) -> dict[int, Carried]:
    """The weights earlier notes among the older messages gave what they listed, which
    of those the conversation had used and which only alike lines had shown."""
    out: dict[int, Carried] = {}
    for i in old_idx:
        meta = messages[i].metadata.get(NOTE_KEY)
        if not isinstance(meta, Mapping):
            continue
        weights = meta.get("weights")
        if isinstance(weights, Mapping):
            used, alike = meta.get("used"), meta.get("alike")
            out[i] = Carried(
                {str(v): float(w) for v, w in weights.items()},
                frozenset(map(str, used)) if isinstance(used, list) else frozenset(),
                frozenset(map(str, alike)) if isinstance(alike, list) else frozenset(),
            )
    return out


def with_weights(out: list[Message], fitted: Fitted) -> list[Message]:
    """The note with, in its metadata, the weight of each identifier the output lists
    or shows (in the note, in place, or in a message kept verbatim), for a later round
    that folds it again (see :func:`identifier_pool`): an identifier of the task keeps
    the task's weight when the message that showed it is folded later."""
    at, pool = fitted.note_at, fitted.pool
    if at is None:
        return out
    note = out[at]
    meta = dict(note.metadata[NOTE_KEY])
    listed = set(meta.get("listed", ()))
    seen = lookup(note.text + "\n" + fitted.others, len(pool))
    weights = {v: w for v, w in pool if v in listed or v in seen} | dict(fitted.verbatim)
    meta["weights"] = {v: round(w, 4) for v, w in weights.items()}
    meta["used"] = sorted(v for v in weights if v in fitted.used)
    meta["alike"] = sorted(v for v in weights if v in fitted.alike)
    return [*out[:at], replace(note, metadata={NOTE_KEY: meta}), *out[at + 1 :]]


@dataclass
class _Loop:
    """The fit loop's state across its tries: the free room (a result within
    ``POLICY.full_within`` of it is full enough), the share of a top-up's room the
    note's list may take, whether the one top-up happened, and the last fitting
    result before it."""

    free_room: int
    id_share: float
    topped_up: bool = False
    best: Assembled | None = None


def _converge(
    conv: Conversation, layout: Layout, sel: Selection, notes: Notes, step: str, loop: _Loop
) -> Assembled | None:
    """Assemble, count, and trim (or top up once) until the output fits and is full
    enough; ``None`` when trimming cannot make it fit."""
    budget, counter, plans = conv.budget, conv.counter, layout.plans
    for attempt in range(POLICY.attempts):
        done = assemble(conv, layout, sel.chosen_ids, notes, step)
        total = counter.count_messages(done.messages)
        full = budget - total <= POLICY.full_within * loop.free_room
        if total <= budget and (loop.topped_up or full):
            return done
        if total <= budget:  # estimates ran low: fill the room left, once
            loop.topped_up = True
            loop.best = done
            room = (budget - total) * POLICY.top_up_room
            select(sel, plans, room, room * loop.id_share, top_up=True)
            continue
        excess = (total - budget) * POLICY.trim_margin + POLICY.trim_extra
        if loop.topped_up:  # the top-up overshot: give back the least valuable picks
            if attempt == POLICY.attempts - 1 or not trim(sel, plans, excess):
                return loop.best  # or let the fitting result stand
            continue
        if not trim(sel, plans, excess):
            return None
    return None


def _fold_all(conv: Conversation, layout: Layout, notes: Notes, opts: AutoOptions) -> Fitted:
    """Nothing selected fits: every older message folded into the shortest note. When
    even that is over the budget, the overflow policy decides: the pinned messages
    alone would be no request at all (strict chat APIs need a turn after the system
    block), so it is a :class:`ctxfold.BudgetError`, or the note over budget."""
    newest: dict[int, Verbatim] = {
        i: v for i, v in layout.verbatim.items() if v is not Verbatim.TASK
    }
    bare = Layout(layout.pinned, newest, layout.old_units, layout.plans, [], layout.shortened)
    bare.state, bare.task = layout.state, layout.task  # the shortest note hands them on
    out, trace, note_at, others = assemble(conv, bare, [], notes, opts.name, force_fold=True)
    required = conv.counter.count_messages(out)
    if required > conv.budget:
        overflow(
            opts.overflow,
            required=required,
            budget=conv.budget,
            what="the pinned messages, the newest unit and the shortest note on the rest",
        )
    return Fitted(out, trace, note_at, others, layout.plans, [], {})


def fill(fitted: Fitted, budget: int, counter: TokenCounter, share: float) -> Fitted:
    """Room the selection's estimates left: the next identifiers of the pool that fit,
    counted exactly, added to the note's list; those only alike lines showed while the
    list holds at most ``share`` of the note (room no sentence can take stays free: the
    output is the cheaper)."""
    out, at = fitted.messages, fitted.note_at
    if at is None or not fitted.pool:
        return fitted
    note = out[at]
    meta = dict(note.metadata[NOTE_KEY])
    room = budget - counter.count_messages(out)
    if room < POLICY.min_fill or "codebook" in meta or not isinstance(note.content, str):
        return fitted  # a codebook note is decoded as a whole: leave it be
    text = note.content
    last = text.rsplit("\n", 1)[-1]
    listed_now = counter.count_text(last) if last.startswith(POLICY.also) else 0
    alike_room = room
    if share < 1.0:  # the list after, x tokens more: listed_now + x <= share * (note + x)
        grown = (share * counter.count_message(note) - listed_now) / (1.0 - share)
        alike_room = min(room, int(grown))
    seen = lookup(fitted.others, len(fitted.pool))  # none of the pool is shown verbatim
    also = POLICY.also
    listing = text.rsplit("\n", 1)[-1].startswith(also)
    added: list[str] = []
    misses = 0
    chosen = set(meta.get("listed", ()))  # the note shows these, or they are shown
    ranked = sorted(fitted.pool, key=lambda vw: -id_value(*vw))  # as the selection does
    for value, _ in ranked:
        if room < POLICY.min_fill or misses > POLICY.fill_misses:
            break
        if value in chosen or value in seen or value in text:  # or inside a listed one
            continue
        piece = (", " if listing else f"\n{also}") + value
        cost = counter.count_text(piece)
        capped = value in fitted.alike
        if cost > room or (capped and cost > alike_room):
            misses += 1
            continue
        text += piece
        listing = True
        room -= cost
        alike_room -= cost if capped else 0
        added.append(value)
    listed = list(meta.get("listed", ()))
    while added:  # pieces counted alone may merge differently: check the whole
        meta["listed"] = [*listed, *added]
        filled = [
            *out[:at],
            replace(note, content=text, metadata={NOTE_KEY: meta}),
            *out[at + 1 :],
        ]
        if counter.count_messages(filled) <= budget:
            return fitted._replace(messages=filled)
        text = text[: text.rindex(added.pop())].removesuffix(", ").removesuffix(f"\n{also}")
    return fitted


def summarize_note(
    conv: Conversation, fitted: Fitted, opts: AutoOptions, notes: Notes
) -> list[Message]:
    """Replace the note's extractive lines by the summarizer's summary of the folded
    messages, in at most the tokens those lines took (one call, cached); its head (the
    task's opening, the working state) stays, and is handed on as the note hands it."""
    out, at, counter = fitted.messages, fitted.note_at, conv.counter
    folded = [d.index for d in fitted.trace if d.reason == FOLDED]
    summarizer = opts.summarizer
    if at is None or not folded or summarizer is None:
        return out
    note = out[at]
    listed = list(note.metadata[NOTE_KEY].get("listed", ()))
    others = fitted.others  # the pool holds nothing a message kept verbatim shows
    room = counter.count_message(note)
    layout = fitted.layout
    head, state, task = (layout.head, layout.state, layout.task) if layout else ([], None, "")

    def write(text: str) -> Message:  # the note, as the extractive one is written
        lines = [*head, text]
        shown = others + "\n" + "\n".join(lines)
        return notes.write(len(folded), lines, listed, shown, counter, state, task, summarized=True)

    bare = counter.count_message(write("."))
    allowance = room - bare
    if allowance < POLICY.min_summary:
        return out
    text = summarize(
        summarizer,
        transcript([conv.messages[i] for i in folded]),
        max_tokens=allowance,
        cache=opts.cache,
        count=counter.count_text,
    )
    for _ in range(POLICY.summary_tries):
        new = replace(write(text), role=note.role)  # the role insert_note gave it
        over = counter.count_message(new) - room
        if over <= 0:
            return [*out[:at], new, *out[at + 1 :]]
        text = fit_summary(text, counter.count_text(text) - over - 2, counter)
        if not text:
            break
    return out  # the summary cannot be made to fit: the extractive note stands
