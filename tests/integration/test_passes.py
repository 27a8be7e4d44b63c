"""How many strategy passes a call makes: the driver's compaction and the layers under
it may try a room again, but on the shared conversations a ``compress`` call (at 25%,
10% and 3% of a conversation, with the question asked and without) and a session's
render (cache-stable or not, with a query or not) run ``auto``'s ``compact`` at most
twice."""

from __future__ import annotations

import json

import pytest

import ctxfold
from ctxfold import Message, TiktokenCounter
from ctxfold.contract import Compaction, Conversation
from ctxfold.strategies import AutoCompressor
from tests.conftest import DATA_DIR, SKIP_NO_DATA

COUNTER = TiktokenCounter("o200k_base")
MOST = 2


class Counting(AutoCompressor):
    """``auto``, counting its passes since the last reset."""

    passes = 0

    def compact(self, conversation: Conversation) -> Compaction:
        self.passes += 1
        return super().compact(conversation)


def _runs(name: str, limit: int) -> list[dict]:
    if DATA_DIR is None:
        pytest.skip(SKIP_NO_DATA)
    lines = (DATA_DIR / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines[:limit]]


@pytest.mark.parametrize(
    ("name", "limit"), [("mini_swe_agent", 3), ("tau_airline", 6), ("swe_agent", 3)]
)
def test_an_agents_calls_and_renders_make_at_most_two_passes(name: str, limit: int) -> None:
    for run in _runs(name, limit):
        msgs = ctxfold.from_openai(run["messages"])
        strategy = Counting()
        for share in (0.25, 0.10):
            strategy.passes = 0
            strategy.compress(msgs, budget=ctxfold.share_budget(msgs, share, COUNTER))
            assert strategy.passes <= MOST, (run["id"], share)
        for stable in (True, False):
            session = ctxfold.Session(budget=4000, strategy=strategy, cache_stable=stable)
            for k, m in enumerate(msgs):
                session.add(m)
                strategy.passes = 0
                session.render()
                assert strategy.passes <= MOST, (run["id"], stable, k)


def test_a_chats_questions_make_at_most_two_passes() -> None:
    (run,) = _runs("locomo", 1)
    msgs = ctxfold.from_openai(run["messages"])
    questions = [q["question"] for q in run["probes"]["questions"][:12]]
    strategy = Counting()
    for share in (0.25, 0.10, 0.03):
        budget = ctxfold.share_budget(msgs, share, COUNTER)
        for q in questions:
            strategy.passes = 0
            strategy.compress([*msgs, Message("user", q)], budget=budget)
            assert strategy.passes <= MOST, (share, q)
    for stable in (True, False):
        session = ctxfold.Session(budget=4000, strategy=strategy, cache_stable=stable)
        for m in msgs:
            session.add(m)
        for q in questions:
            strategy.passes = 0
            session.render(query=q)
            assert strategy.passes <= MOST, (stable, q)
