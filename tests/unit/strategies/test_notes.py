"""An earlier note folded again: a long one analysed line by line, so a compaction pays
only for the lines new since the last one, and read as one text with its lines intact;
a short one whole, as any message."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

import ctxfold
from ctxfold import Message, get_counter
from ctxfold.result import is_note
from ctxfold.strategies.auto import analysis
from ctxfold.strategies.auto.analysis import Analyzer
from ctxfold.strategies.auto.assemble import condensed
from ctxfold.strategies.auto.plan import Plan
from ctxfold.strategies.auto.policy import POLICY
from ctxfold.text.adapters import Piece
from ctxfold.text.layers import Layers
from tests.conftest import example_conversations

COUNTER = get_counter("o200k_base")


def _note() -> Message:
    _, msgs = example_conversations()[1]  # an agent's run: code, logs, tool calls
    result = ctxfold.compress(msgs, budget=3_000, counter=COUNTER)
    (note,) = [m for m in result.messages if is_note(m)]
    return note


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts ``Analyzer._analyse`` is asked to analyse from here on (caches cleared)."""
    texts: list[str] = []
    analyse = Analyzer._analyse

    def spy(self: Analyzer, m: Message, tok: int) -> Any:
        texts.append(m.text)
        return analyse(self, m, tok)

    monkeypatch.setattr(Analyzer, "_analyse", spy)
    ctxfold.clear_caches()
    return texts


@pytest.fixture
def analysed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """:func:`_spy`, with every note counted as long (the examples' notes are short)."""
    monkeypatch.setattr(analysis, "POLICY", replace(POLICY, note_lines_from=0))
    return _spy(monkeypatch)


def test_a_note_is_analysed_as_one_text_with_its_lines_intact(analysed: list[str]) -> None:
    note = _note()
    head, body = note.text.split("\n", 1)
    note = Message(note.role, f"{head}\n\n   \n{body}", metadata=note.metadata)  # blank lines
    a = Analyzer(Layers(), None)(note, COUNTER.count_message(note))
    assert "".join(piece[0] for piece in a.pieces) == note.text
    assert "".join(a.segments) == note.text
    # every line ends a segment: the plan finds the note's head and speaker tags there
    assert sum(s.endswith("\n") for s in a.segments) == note.text.count("\n")
    assert len(a.features.sizes) == len(a.segments) == sum(a.counts)
    assert len(a.counts) == len(a.pieces)
    assert note.text not in analysed  # never the whole note at once
    assert len(a.pieces) < note.text.count("\n") // 4  # lines alike joined in pieces


def test_the_next_note_costs_only_its_new_lines(analysed: list[str]) -> None:
    note = _note()
    analyzer = Analyzer(Layers(), None)
    analyzer(note, COUNTER.count_message(note))
    first = len(analysed)
    assert first >= note.text.count("\n")  # each line once
    lines = note.text.split("\n")
    new = "user: The retry budget is now 7 attempts for job JOB-4471."
    nxt = Message(note.role, "\n".join([*lines[:-1], new, lines[-1]]), metadata=note.metadata)
    a = analyzer(nxt, COUNTER.count_message(nxt))
    assert analysed[first:] == [new]  # the line new to it, nothing else
    assert ("id", "JOB-4471") in a.identifiers


def test_a_short_note_is_analysed_whole_as_any_message(monkeypatch: pytest.MonkeyPatch) -> None:
    note = _note()
    tok = COUNTER.count_message(note)
    assert tok < POLICY.note_lines_from
    texts = _spy(monkeypatch)
    Analyzer(Layers(), None)(note, tok)
    assert texts == [note.text]


def test_a_note_read_line_by_line_finds_what_its_lines_hold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The note's identifiers, words, reasons and savings are its lines' together,
    the same whether the lines are analysed now or read back from the memo."""
    monkeypatch.setattr(analysis, "POLICY", replace(POLICY, note_lines_from=0))
    note = _note()
    tok = COUNTER.count_message(note)
    ctxfold.clear_caches()
    made = Analyzer(Layers(), None)(note, tok)
    analysis._ANALYSES.clear()  # the note again, its lines from the memo
    read = Analyzer(Layers(), None)(note, tok)
    assert read == made
    plain = Analyzer(Layers(whitespace=False, json=False), None)
    lines = [plain._line_alone(line, note.role) for line in note.text.splitlines(keepends=True)]
    assert made.identifiers == tuple(x for a in lines for x in a.identifiers)
    assert set(made.words) == set().union(*(a.words for a in lines))
    assert set(made.reasons) == {r for a in lines for r in a.reasons}
    chars: dict[str, int] = {}
    for a in lines:
        for kind, n in a.savings.items():
            chars[kind] = chars.get(kind, 0) + n
    cpt = max(len(note.text) / (tok - 3), 1.0)
    assert made.savings == {kind: round(n / cpt) for kind, n in chars.items()}
    assert made.identifiers and made.words


def test_a_note_folded_again_keeps_each_chosen_lines_speaker() -> None:
    """A line whose first segment (its speaker's tag) is left out keeps the tag; a
    line that shows its first segment shows the tag already; lines with nothing
    chosen, and pieces with nothing chosen, are left out."""
    segs = [
        [
            "user: Hello there. ",
            "The build failed on CI.\n",
            "assistant: Fixed it. ",
            "Tests pass.",
        ],
        ["user: Thanks!\n"],
        ["tool result (bash): exit 0\n", "assistant: Next, the docs. ", "Done by Friday."],
    ]
    chosen = [[False, True, True, False], [False], [False, False, True]]
    plan = Plan(
        index=0,
        tag="user",
        pieces=[Piece("".join(s), keep=False) for s in segs],
        segments=segs,
        scores=[[1.0] * len(s) for s in segs],
        words=[[()] * len(s) for s in segs],
        chosen=chosen,
        calls=(),
        call_scores=[],
        call_chosen=[],
        reasons=[],
        cpt=4.0,
        note=True,
    )
    assert condensed(plan).split("\n") == [
        "user: The build failed on CI.",
        "assistant: Fixed it.",
        "assistant: Done by Friday.",
    ]
