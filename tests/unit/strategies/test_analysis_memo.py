"""The analysis memos: an analysis read back from a memo is the one made, for the
layers and adapters it was made with, and a memo's entries are nothing the garbage
collector walks."""

from __future__ import annotations

import gc

import ctxfold
from ctxfold import Layers, Message, ToolCall
from ctxfold.strategies.auto import analysis
from ctxfold.strategies.auto.analysis import Analyzer
from ctxfold.strategies.auto.policy import POLICY
from ctxfold.text.adapters import Piece
from ctxfold.text.scoring import segment_features, segments_of

CALL = ToolCall("c1", "read_file", '{"path": "src/app.py", "lines": [10, 40]}')
MESSAGES = [
    Message("user", "Why does `make test` fail in src/app.py? See ERROR-4471."),
    Message("assistant", "Reading it.", tool_calls=(CALL,)),
    Message("tool", '{"ok": false, "error": "KeyError: user_id"}', tool_call_id="c1"),
    Message("assistant", "The handler reads user_id before login; I decided to guard it."),
]


def _note(lines: int) -> Message:
    body = "\n".join(
        f"user: order ORD-{k} went to /srv/orders/{k}.json on 2024-03-{k % 28 + 1:02d}"
        for k in range(lines)
    )
    return Message("assistant", f"[ctxfold: 9 earlier messages condensed]\n{body}")


def test_a_memoized_analysis_is_the_one_made_and_nothing_the_collector_walks() -> None:
    ctxfold.clear_caches()
    note = _note(900)
    tokens = [ctxfold.get_counter("o200k_base").count_message(m) for m in [*MESSAGES, note]]
    assert tokens[-1] >= POLICY.note_lines_from  # analysed line by line
    analyzer = Analyzer(Layers(), None)
    gc.collect()
    gc.disable()  # what follows is made in the youngest generation, as a session makes it
    try:
        made = [analyzer(m, t) for m, t in zip([*MESSAGES, note], tokens, strict=True)]
        again = [analyzer(m, t) for m, t in zip([*MESSAGES, note], tokens, strict=True)]
        assert again == made  # read back from the memo, equal in every field
        assert again[1].calls == made[1].calls
        assert again[1].call_features.features() == made[1].call_features.features()
        assert again[1].calls[0].name == "read_file"
        other = Analyzer(Layers(json=False), None)  # other layers: analysed again
        assert other(MESSAGES[2], tokens[2]).reasons != made[2].reasons
        # the note apart from the messages: it is read by the next compaction only
        assert len(analysis._NOTES) == 1 and len(analysis._ANALYSES) == len(MESSAGES) + 1
        tables = (analysis._ANALYSES, analysis._LINES, analysis._NOTES)
        entries = [e for t in tables for e in (*t._data.items(), *t._fresh.items())]
        assert len(entries) > 900  # the messages, the other layers' one, the note's lines
        # The collections of the two young generations untrack every entry: none
        # reaches the oldest generation, whose full collections are a session's pauses.
        gc.collect(0)
        gc.collect(1)
        assert not any(gc.is_tracked(k) or gc.is_tracked(v) for k, v in entries)
    finally:
        gc.enable()


def test_columns_give_back_the_features_they_were_made_of() -> None:
    analyzer = Analyzer(Layers(), None)
    text = "Ran pytest: 3 failed in tests/test_api.py. Alice asked Bob. ok\nERROR-4471 again"
    a = analyzer(Message("user", text), 40)
    made = [f for p in a.pieces for f in segment_features(segments_of(Piece(*p)), [])]
    assert len(a.features.sizes) == len(a.segments) == sum(a.counts) >= 3
    columns = analysis.Columns.of(made)
    assert columns.features() == made  # content words and names cut where they were
    twice = analysis.Columns.joined([columns, columns])
    assert twice.features() == made + made
    assert analysis.Columns.of([]).features() == []
