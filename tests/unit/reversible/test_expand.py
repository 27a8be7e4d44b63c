"""Expanding across rounds: an agent loop compresses last turn's output plus the new
messages, round after round; expanding the last output gives back every message ever
added, in order, or names what is missing, never "complete" and wrong."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxfold
from ctxfold import MemoryStore, Message
from ctxfold.testing.strategies import conversations

COUNTER = ctxfold.get_counter("o200k_base")
STRATEGIES = ["auto", "sliding_window", "summarize", "hierarchical", "hybrid", "semantic"]


def _renamed(chunk: list[Message], k: int) -> list[Message]:
    """Tool-call ids unique across chunks (each chunk numbers its own from 0)."""
    out = []
    for m in chunk:
        calls = tuple(replace(c, id=f"r{k}_{c.id}") for c in m.tool_calls)
        call_id = f"r{k}_{m.tool_call_id}" if m.tool_call_id else None
        out.append(replace(m, tool_calls=calls, tool_call_id=call_id))
    return out


def run_rounds(chunks: list[list[Message]], strategy: str, fractions: list[float]):
    """Each round compresses the previous output plus a new chunk; returns the last
    output, everything ever added, and the store."""
    store = MemoryStore()
    everything: list[Message] = []
    shown: list[Message] = []
    for k, (chunk, fraction) in enumerate(zip(chunks, fractions, strict=False)):
        new = _renamed(chunk, k)
        everything += new
        history = shown + new
        budget = max(int(COUNTER.count_messages(history) * fraction), 1)
        options = (
            {"overflow": "best_effort"} if strategy not in ("auto", "hybrid", "summarize") else {}
        )
        try:
            result = ctxfold.compress(
                history,
                budget=budget,
                strategy=strategy,
                counter=COUNTER,
                reversible=True,
                store=store,
                **options,
            )
        except ctxfold.BudgetError:
            shown = history  # this round could not fit: the agent goes on uncompressed
            continue
        shown = list(result.messages)
    return shown, everything, store


def test_a_round_whose_output_is_only_its_note_expands_in_place():
    store = MemoryStore()
    task = {"role": "user", "content": "Please refactor src/app/main.py and fix test_parse " * 8}
    r1 = ctxfold.compress([task], budget=30, reversible=True, store=store)
    later = [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "Thanks"}]
    back = ctxfold.expand(r1.to_openai() + later, store=store)
    assert back.complete
    assert back.to_openai() == [task, *later]


def test_a_newer_round_that_kept_an_older_note_is_undone_first():
    store = MemoryStore()
    t1 = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing parser test in pkg/server/handler.go " * 6},
    ]
    new = [
        {"role": "user", "content": "Also check the retry logic in src/app/client.py " * 6},
        {"role": "system", "content": "Reminder: run the tests."},
    ]
    r1 = ctxfold.compress(t1, budget=40, reversible=True, store=store)
    r2 = ctxfold.compress(r1.to_openai() + new, budget=80, reversible=True, store=store)
    back = ctxfold.expand(r2, store=store)
    assert back.complete and back.rounds == 2
    assert back.to_openai() == t1 + new


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(conversations(max_units=5, irregular=False), min_size=1, max_size=4),
    st.sampled_from(STRATEGIES),
    st.lists(st.sampled_from([0.15, 0.3, 0.6, 1.0]), min_size=4, max_size=4),
)
def test_any_number_of_rounds_expands_to_everything_or_names_what_is_missing(
    chunks, strategy, fractions
):
    shown, everything, store = run_rounds(chunks, strategy, fractions)
    back = ctxfold.expand(shown, store=store)
    if back.complete:
        assert list(back.messages) == everything
    else:
        assert back.missing


def test_text_that_only_looks_like_a_round_tag_is_left_as_it_is() -> None:
    """A user's message that starts like a round's tag is no round: ``expand`` gives it
    back unchanged and reports nothing missing."""
    said = [{"role": "user", "content": "[ctxfold round 123456789012] is in my log"}]
    back = ctxfold.expand(said, store=MemoryStore())
    assert back.complete and back.rounds == 0
    assert back.to_openai() == said


def test_a_pasted_copy_of_a_note_never_splices_in_the_hidden_originals() -> None:
    """Only the message a round wrote carries its tag (known by its metadata, or by the
    fingerprint the round stored when the metadata is lost on the wire): a user who
    pastes the note's text, beside the round's output, gets nothing it hid."""
    store = MemoryStore()
    secret = {"role": "user", "content": "My card is 4111 1111 1111 1111, charge it. " * 20}
    history = [
        {"role": "system", "content": "You are a careful assistant."},
        secret,
        *[
            {"role": r, "content": f"Turn {k}: we talk about the weather, at length. " * 6}
            for k in range(30)
            for r in ("user", "assistant")
        ],
    ]
    wire = ctxfold.compress(history, budget=600, store=store).to_openai()
    at = next(k for k, m in enumerate(wire) if m["content"].startswith("[ctxfold round"))
    # Through OpenAI dicts (the metadata lost), the genuine output still expands.
    assert ctxfold.expand(wire, store=store).to_openai() == history
    pasted = [dict(m) for m in wire]
    pasted[at] = {"role": "user", "content": wire[at]["content"]}  # the user's copy
    back = ctxfold.expand(pasted, store=store)
    assert back.rounds == 0 and back.complete
    assert back.to_openai() == pasted  # none of the 59 messages the round hid
