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
    made = [analyzer(m, t) for m, t in zip([*MESSAGES, note], tokens, strict=True)]
    again = [analyzer(m, t) for m, t in zip([*MESSAGES, note], tokens, strict=True)]
    assert again == made  # read back from the memo, equal in every field
    assert again[1].calls == made[1].calls and again[1].call_features == made[1].call_features
    assert again[1].calls[0].name == "read_file"
    other = Analyzer(Layers(json=False), None)  # other layers: analysed again
    assert other(MESSAGES[2], tokens[2]).reasons != made[2].reasons
    for _ in range(6):  # a level of nesting per full collection
        gc.collect()
    entries = [*analysis._ANALYSES._data.items(), *analysis._LINES._data.items()]
    assert len(entries) > 900  # the messages, the other layers' one, the note's lines
    assert not any(gc.is_tracked(k) or gc.is_tracked(v) for k, v in entries)
