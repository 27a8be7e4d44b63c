"""The ledger (``ctxfold.pipeline.Ledger``): one account of a call's budget, what each
stage charges against it, and the one rule for a call's tries, which the driver owns:
a try counted exactly, each correction (shrunk by the measured overshoot, the optional
charges given up after a refusal) made at most once."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

import ctxfold
from ctxfold import Message
from ctxfold.exceptions import BudgetError
from ctxfold.pipeline import (
    MAX_TRIES,
    Attempt,
    Ledger,
    Outcome,
    Plan,
    Relief,
    Request,
    Reserve,
    View,
    made,
    refused,
    run,
)
from ctxfold.recall import RecallIndex
from ctxfold.storage import MemoryStore

COUNTER = ctxfold.TiktokenCounter("o200k_base")


def test_the_target_is_the_budget_less_what_is_charged_outside_the_compaction() -> None:
    ledger = Ledger(1000, fixed=100).charge(Reserve.RECALL, 200).charge(Reserve.WAITING, 50)
    ledger = ledger.charge(Reserve.ROUND, 20).charge(Reserve.REFERENCES, 30)
    assert ledger.target == 750  # what the compaction's output may take
    assert ledger.room == 700  # what the strategy compacts into
    assert ledger.charge(Reserve.RECALL, 100).target == 850  # a charge is set, not added
    assert ledger.charge(Reserve.RECALL, -5).charged(Reserve.RECALL) == 0
    assert "recall 200" in ledger.account() and "references 30" in ledger.account()


def test_a_shrunk_ledger_takes_the_measured_overshoot_from_the_room() -> None:
    ledger = Ledger(1000).charge(Reserve.ROUND, 10)
    shrunk = ledger.shrink(over=25, added=12)
    assert shrunk.target == ledger.target  # the output may still fill the target
    assert shrunk.room == ledger.room - 25 - 4  # the overshoot and a little slack
    # The round wrote more than the room was short by: at least that much is left.
    assert ledger.shrink(over=2, added=40).room == ledger.target - 40 - 4


def test_a_relief_gives_up_one_step_at_a_time() -> None:
    ledger = Ledger(1000).charge(Reserve.RECALL, 400).charge(Reserve.REFERENCES, 60)
    ledger = ledger.charge(Reserve.ROUND, 28).charge(Reserve.WAITING, 30)
    first = ledger.relief(needed=10)
    assert first is not None and first.relieved is Relief.OPTIONAL
    assert first.charged(Reserve.REFERENCES) == 0
    assert first.charged(Reserve.ROUND) == 0  # charged again by the round, bare
    assert first.charged(Reserve.RECALL) == 200  # at least half given up
    assert first.charged(Reserve.WAITING) == 30  # never given up
    # A refusal that needs more takes more of the query's room; unknown: all of it.
    assert ledger.relief(needed=360).charged(Reserve.RECALL) == 100  # type: ignore[union-attr]
    assert ledger.relief().charged(Reserve.RECALL) == 0  # type: ignore[union-attr]
    second = first.relief(needed=10)
    assert second is not None and second.relieved is Relief.QUERY
    assert second.charged(Reserve.RECALL) == 0
    assert second.relief(needed=10) is None  # nothing left to give up


def test_a_relief_gives_back_what_a_refusal_needs_of_a_measured_overshoot() -> None:
    ledger = Ledger(1312).shrink(over=16, added=16)  # a round over by its tag
    assert ledger.room == 1292
    relieved: Ledger | None = ledger
    while relieved is not None and relieved.relieved < Relief.OVERSHOOT:
        relieved = relieved.relief(needed=4)  # the strategy needs 4 tokens more
    assert relieved is not None and relieved.room == 1296


def test_a_target_below_what_must_be_kept_is_not_tried() -> None:
    ledger = Ledger(1000, fixed=300).charge(Reserve.RECALL, 800)
    assert ledger.floored().charged(Reserve.RECALL) == 400  # half of the query's room
    assert Ledger(1000, fixed=700).charge(Reserve.RECALL, 800).floored().target == 1000
    fine = Ledger(1000, fixed=100).charge(Reserve.RECALL, 800)
    assert fine.floored() is fine


def test_an_output_is_judged_against_the_target() -> None:
    ledger = Ledger(100)
    assert made(ledger, 100, 10, None, best_effort=False).outcome is Outcome.FITS
    over = made(ledger, 101, 10, None, best_effort=False)
    assert over.outcome is Outcome.OVER  # the round's tokens: a smaller room may fit
    assert over.error is not None and over.error.budget == 100
    assert made(ledger, 101, 0, None, best_effort=False).outcome is Outcome.KEPT_OVER
    assert made(ledger, 101, 10, None, best_effort=True).outcome is Outcome.KEPT_OVER


@dataclass
class _Scripted:
    """A source whose tries come out as scripted: the driver's rule seen alone."""

    outcomes: list[tuple[Outcome, int, int, int | None]]  # outcome, tokens, added, needed
    # (the last repeats)
    ledger: Ledger
    fits: bool = False
    tried: list[Ledger] = field(default_factory=list)
    kept: list[Ledger] = field(default_factory=list)
    history: Sequence[Message] = (Message("user", "hi"),)

    def size(self) -> tuple[int, int]:
        return 1, 5

    def recall_share(self, share: float | None) -> float:
        return 0.0

    def index(self) -> RecallIndex:
        raise AssertionError("no query")

    def plan(self, budget: int, query: str | None, share: float) -> Plan:
        return Plan(self.ledger, fits=self.fits)

    def charge(self, ledger: Ledger) -> Ledger:
        return ledger.charge(Reserve.ROUND, 10)  # the round's share, as a source charges it

    def attempt(self, ledger: Ledger) -> Attempt:
        self.tried.append(ledger)
        outcome, tokens, added, needed = self.outcomes[min(len(self.tried), len(self.outcomes)) - 1]
        if outcome is Outcome.REFUSED:
            error = BudgetError("no", required=ledger.room + (needed or 1), budget=ledger.room)
            return refused(ledger, error) if needed else Attempt(ledger, outcome, error=error)
        error = BudgetError("over", required=tokens, budget=ledger.budget)
        return Attempt(ledger, outcome, tokens, added, error)

    def keep(self, attempt: Attempt) -> None:
        self.kept.append(attempt.ledger)

    def view(self) -> View:
        return View(self.history, [], tokens=5)

    def closed(self, view: View) -> View:
        return view


def _request(budget: int) -> Request:
    return Request(ctxfold.normalize("sliding_window"), budget, COUNTER)  # type: ignore[arg-type]


def test_a_try_that_fits_is_the_only_try() -> None:
    source = _Scripted([(Outcome.FITS, 90, 10, None)], Ledger(100))
    run(_request(100), source)
    assert len(source.tried) == 1 and source.kept == source.tried


def test_an_overshoot_is_corrected_once_by_what_it_measured() -> None:
    source = _Scripted([(Outcome.OVER, 112, 15, None), (Outcome.FITS, 99, 15, None)], Ledger(100))
    run(_request(100), source)
    first, second = source.tried
    assert second.room == first.room - 12 - 4  # over by 12, and a little slack
    assert source.kept == [second]


def test_a_call_that_never_fits_stops_after_the_tries_it_may_make() -> None:
    """A source whose every try is over (or refused) is tried at most ``MAX_TRIES``
    times, never twice in the same room, and the call raises the last try's error."""
    over = _Scripted([(Outcome.OVER, 120, 15, None)], Ledger(100).charge(Reserve.RECALL, 30))
    with pytest.raises(BudgetError, match="over"):
        run(_request(100), over)
    assert 1 < len(over.tried) <= MAX_TRIES and not over.kept
    rooms = [(t.target, t.room) for t in over.tried]
    assert len(set(rooms)) == len(rooms)  # never the same room twice
    assert over.tried[1].room < over.tried[0].room  # shrunk first
    assert over.tried[-1].charged(Reserve.RECALL) == 0  # no room left: given up
    refusing = _Scripted([(Outcome.REFUSED, 0, 0, 5)], Ledger(100).charge(Reserve.RECALL, 30))
    with pytest.raises(BudgetError):
        run(_request(100), refusing)
    steps = [t.relieved for t in refusing.tried]
    assert steps == [Relief.NONE, Relief.OPTIONAL, Relief.QUERY]  # then nothing to give
    assert [t.charged(Reserve.RECALL) for t in refusing.tried] == [30, 15, 0]


def test_a_refusal_after_a_shrink_gets_its_room_back() -> None:
    """Over by the round's tag, then refused in the room shrunk by it: the next try
    gives back of the overshoot what the refusal says it needs."""
    outcomes = [
        (Outcome.OVER, 116, 16, None),
        (Outcome.REFUSED, 0, 0, 4),
        (Outcome.FITS, 100, 16, None),
    ]
    source = _Scripted(outcomes, Ledger(100))
    run(_request(100), source)
    first, shrunk, last = source.tried
    assert shrunk.room < first.room and last.room == shrunk.room + 4
    assert source.kept == [last]


def test_a_compaction_that_may_not_happen_gives_up_nothing() -> None:
    """A render whose view fits already compacts only in the room it asked (a query's):
    refused there, it shows the view as it is, no optional charge given up."""
    source = _Scripted([(Outcome.REFUSED, 0, 0, 20)], Ledger(100).charge(Reserve.RECALL, 40))
    source.fits = True
    result = run(_request(100), source)
    assert len(source.tried) == 1 and not source.kept
    assert result.messages == tuple(source.history)


def test_a_reversible_round_stores_only_the_try_kept() -> None:
    """A history whose round overshoots its first room (``auto``'s note, the round's
    markers added) is tried again; the store holds one round, the one the result
    names, nothing of the try not kept, and the result expands to the original."""
    msgs = [Message("system", "Be brief.")]
    for k in range(30):
        msgs.append(Message("user", f"Note {k}: the parcel {k} went to depot {k * 7}."))
        msgs.append(Message("assistant", f"Noted parcel {k} " + "and its route " * 12))
    from ctxfold.pipeline import given

    original = given.Given.attempt
    tries: list[Attempt] = []

    def spy(self: given.Given, ledger: Ledger) -> Attempt:
        tries.append(original(self, ledger))
        return tries[-1]

    given.Given.attempt = spy  # type: ignore[method-assign]
    try:
        for budget in range(500, 900, 7):
            tries.clear()
            store = MemoryStore()
            result = ctxfold.compress(msgs, budget=budget, counter=COUNTER, store=store)
            if len(tries) > 1:
                break
    finally:
        given.Given.attempt = original  # type: ignore[method-assign]
    assert [t.outcome for t in tries] == [Outcome.OVER, Outcome.FITS]
    assert result.stats.tokens_after <= budget
    tags = [k for k in store._data if k.startswith("tag:")]  # one per round stored
    assert tags == [f"tag:{result.round_id}"]
    assert ctxfold.expand(result.messages, store=store).messages == tuple(msgs)


_WORDS = [
    "parcel",
    "depot",
    "route",
    "invoice",
    "ticket",
    "error",
    "file",
    "src/app.py",
    "https://x.io/a",
    "build",
    "failed",
    "retry",
    "token",
    "budget",
    "alpha",
    "beta",
    "gamma",
    "delta",
]


def _tight_cases(seed: int, upto: int) -> dict[int, tuple[list[Message], int, dict[str, Any]]]:
    """Random chats at tight budgets (a review's probe, seeded): case -> (messages,
    budget, compress options)."""
    rng = random.Random(seed)

    def words(n: int) -> str:
        return " ".join(rng.choice(_WORDS) for _ in range(n))

    cases = {}
    for case in range(upto + 1):
        n, sysp = rng.randint(3, 25), rng.choice([2, 20, 80])
        msgs = [Message("system", words(sysp))]
        for k in range(n):
            msgs.append(Message("user", f"Q{k}: " + words(rng.randint(3, 40))))
            msgs.append(Message("assistant", f"A{k}: " + words(rng.randint(3, 80))))
        total = COUNTER.count_messages(msgs)
        budget = max(20, int(total * rng.choice([0.05, 0.1, 0.2, 0.3, 0.5, 0.8])))
        options: dict[str, Any] = {
            "strategy": rng.choice(["auto", "sliding_window", "hierarchical", "semantic"]),
            "reversible": rng.choice([True, False]),
            "query": rng.choice([None, None, "parcel depot error"]),
        }
        if rng.random() < 0.3:
            options["overflow"] = "best_effort"
        cases[case] = (msgs, budget, options)
    return cases


@pytest.mark.parametrize(
    ("seed", "case"),
    [(2, 12), (2, 26), (2, 46), (2, 52), (2, 65), (1, 63), (3, 4), (3, 63), (5, 2)],
)
def test_a_tight_budget_that_fits_is_not_refused(seed: int, case: int) -> None:
    """Histories that fit their budget with a round's bare tag, the strategy given the
    whole target, or the query's room all given up: each was refused by a ledger that
    stopped after two corrections (the round's own loop had fit them)."""
    msgs, budget, options = _tight_cases(seed, case)[case]
    result = ctxfold.compress(msgs, budget=budget, counter=COUNTER, store=MemoryStore(), **options)
    assert result.stats.tokens_after <= budget


def test_a_result_kept_over_the_budget_is_said_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``overflow="best_effort"``: a reversible result whose pinned messages leave no
    room for the round's tag comes back over budget, with a warning in the log (as
    docs/reversible.md says), never silently."""
    msgs = [Message("system", "Keep every rule here. " * 30)]
    msgs += [Message("user" if k % 2 == 0 else "assistant", f"turn {k} " * 20) for k in range(8)]
    with caplog.at_level("WARNING", logger="ctxfold"):
        result = ctxfold.compress(
            msgs,
            budget=150,
            strategy="sliding_window",
            overflow="best_effort",
            reversible=True,
            store=MemoryStore(),
            counter=COUNTER,
        )
    assert result.stats.tokens_after > 150 and result.round_id is not None
    said = [r.getMessage() for r in caplog.records]
    assert any("reversible result" in m and "budget of 150" in m for m in said), said
