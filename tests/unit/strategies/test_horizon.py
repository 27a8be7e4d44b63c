"""The horizon: a history far past its budget has its oldest messages glanced, not
analysed, and still keeps what they hold of value."""

from __future__ import annotations

import random

import ctxfold
from ctxfold import Message, get_counter
from ctxfold.strategies.auto.horizon import glance
from ctxfold.strategies.auto.policy import POLICY

COUNTER = get_counter("o200k_base")
GLANCED = "horizon:glanced"

_SYLLABLES = ("ka", "lo", "mi", "ra", "tu", "ve", "so", "ni", "pe", "du", "ga", "zo")
_WORDS = [a + b + "n" for a in _SYLLABLES for b in _SYLLABLES]  # 144 made-up words


def chat(n: int, seed: int = 7) -> list[Message]:
    """``n`` turns of small talk, user and assistant alternating, about 40 tokens each."""
    rng = random.Random(seed)
    out = [Message("system", "You are a friendly assistant.")]
    for k in range(n):
        words = " ".join(rng.choice(_WORDS) for _ in range(30))  # small talk
        out.append(Message(("user", "assistant")[k % 2], f"Talking about {words}. Nice day."))
    return out


def glanced(result: ctxfold.CompressionResult) -> list[int]:
    return [d.index for d in result.trace if GLANCED in d.flags]


def test_a_history_within_the_horizon_is_analysed_whole():
    msgs = chat(300)  # under POLICY.horizon_floor tokens
    assert COUNTER.count_messages(msgs) < POLICY.horizon_floor
    r = ctxfold.compress(msgs, budget=2_000, counter=COUNTER)
    assert r.stats.tokens_after <= 2_000
    assert glanced(r) == []


def test_far_messages_are_glanced_and_their_identifiers_still_counted():
    msgs = chat(2_600)
    # an order number the user repeats in the oldest tenth: worth listing in the note
    for k in range(2, 150, 10):
        msgs[k] = Message(msgs[k].role, msgs[k].text + " My order is ORD-77120-KX.")
    budget = 4_000
    assert COUNTER.count_messages(msgs) > POLICY.horizon_floor + budget
    r = ctxfold.compress(msgs, budget=budget, counter=COUNTER)
    assert r.stats.tokens_after <= budget
    far = glanced(r)
    assert len(far) > len(msgs) // 4  # the oldest part is past the horizon
    newer = sum(COUNTER.count_message(m) for m in msgs[max(far) + 1 :])
    assert newer >= POLICY.horizon_floor  # and it is the oldest part
    assert "ORD-77120-KX" in "\n".join(m.text for m in r.messages)
    assert list(ctxfold.expand(r).messages) == msgs  # the originals are all in the store


def test_a_valuable_far_message_is_raised_and_selected():
    msgs = chat(2_600)
    fact = "The deploy failed with error E4417 in /srv/billing/ledger.py at line 88."
    msgs[40] = Message("user", fact)
    r = ctxfold.compress(msgs, budget=4_000, counter=COUNTER)
    assert 40 not in glanced(r)  # its glance made it a candidate: analysed in full
    assert 41 in glanced(r)
    note = next(m for m in r.messages if m.metadata.get("ctxfold"))
    assert "E4417" in note.text and "/srv/billing/ledger.py" in note.text


def test_a_glance_finds_what_the_analysis_counts():
    m = Message("user", "See /etc/app/config.yaml and ticket ABC-1234; it fails at 10:42.")
    vocabulary: dict[str, str] = {}
    g = glance(m, vocabulary)
    assert ("path", "/etc/app/config.yaml") in g.identifiers
    assert ("id", "ABC-1234") in g.identifiers
    assert {"config", "ticket", "fails"} <= set(g.features.content)
    assert g.features.base > 1.5  # identifiers, a number, an error
    again = glance(Message("assistant", "The ticket is closed."), vocabulary)
    ticket = next(w for w in again.features.content if w == "ticket")
    assert ticket is next(w for w in g.features.content if w == "ticket")  # one string
    path = glance(Message("user", "Open /etc/app/config.yaml again."), vocabulary)
    assert path.identifiers[0][1] is g.identifiers[0][1]
