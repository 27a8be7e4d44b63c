"""The auto strategy's selection: greedy by value per token, under the room and the
identifiers' cap, with sentences whose words are said already ranked lower."""

from __future__ import annotations

from ctxfold.messages import ToolCall
from ctxfold.strategies.auto.plan import Plan
from ctxfold.strategies.auto.select import Slot, items, select, trim
from ctxfold.text.adapters import Piece


def _plan(
    i: int, sentences: list[tuple[str, float, tuple[str, ...]]], calls: tuple[ToolCall, ...] = ()
) -> Plan:
    """One prose piece of ``sentences`` (text, score, content words), and ``calls``
    scored 0.3; a character a token."""
    segs = [s for s, _, _ in sentences]
    return Plan(
        index=i,
        tag="user",
        pieces=[Piece(" ".join(segs), keep=False)],
        segments=[segs],
        scores=[[sc for _, sc, _ in sentences]],
        words=[[w for _, _, w in sentences]],
        chosen=[[False] * len(segs)],
        calls=calls,
        call_scores=[0.3] * len(calls),
        call_chosen=[False] * len(calls),
        reasons=[],
        cpt=1.0,
    )


def _chosen(plans: dict[int, Plan]) -> dict[int, list[bool]]:
    return {i: p.chosen[0] for i, p in plans.items()}


def test_an_item_over_the_room_is_passed_over_and_cheaper_ones_still_fit() -> None:
    big = "x" * 60
    plans = {0: _plan(0, [(big, 9.0, ("alpha",)), ("y" * 20, 1.0, ("beta",)), ("z" * 20, 0.5, ())])}
    sel = items(plans, [0], -1, 1, [])
    select(sel, plans, room=50.0, id_cap=0.0)  # 20 + 20 + the tag's 3 fit; 60 does not
    assert _chosen(plans) == {0: [False, True, True]}


def test_filler_is_never_offered() -> None:
    plans = {0: _plan(0, [("hi there", 0.05, ()), ("the build failed", 2.0, ("build",))])}
    sel = items(plans, [0], -1, 1, [])
    assert [(it.piece, it.seg) for it in sel.items] == [(0, 1)]
    select(sel, plans, room=1000.0, id_cap=0.0)
    assert _chosen(plans) == {0: [False, True]}


def test_identifiers_stop_at_their_cap_and_sentences_take_the_rest() -> None:
    plans = {0: _plan(0, [("a" * 30, 0.5, ())])}
    pool = [("src/app/models.py", 3.0), ("src/app/views.py", 3.0), ("build_index", 2.0)]
    capped = {v for v, _ in pool}  # all shown only on lines like the others
    sel = items(plans, [0], -1, 1, pool, capped=capped)
    select(sel, plans, room=1000.0, id_cap=6.0)
    assert sum(sel.chosen_ids) == 1  # one path's estimate fits the cap of 6
    assert _chosen(plans) == {0: [True]}
    # identifiers on lines that stand out are not capped (a list at all: a cap above 0)
    plans = {0: _plan(0, [("a" * 30, 0.5, ())])}
    sel = items(plans, [0], -1, 1, pool, capped={"build_index"})
    select(sel, plans, room=1000.0, id_cap=2.0)  # under build_index's estimate
    assert sel.chosen_ids == [True, True, False]


def test_a_sentence_whose_words_are_said_yields_to_a_new_one() -> None:
    said = ("deploy", "friday", "staging")
    plans = {
        0: _plan(0, [("a" * 20, 3.5, said)]),
        1: _plan(1, [("b" * 20, 2.9, said), ("c" * 20, 2.0, ("invoice", "march"))]),
    }
    sel = items(plans, [0, 1], -1, 2, [])
    select(sel, plans, room=47.0, id_cap=0.0)  # room for two of the three, and the tags
    assert _chosen(plans) == {0: [True], 1: [False, True]}


def test_top_up_counts_what_is_chosen_as_said_and_trim_gives_back_the_least() -> None:
    call = ToolCall("c1", "ls", "{}")
    plans = {0: _plan(0, [("a" * 20, 3.0, ("x",)), ("b" * 20, 1.0, ("y",))], (call,))}
    sel = items(plans, [0], -1, 1, [])
    select(sel, plans, room=24.0, id_cap=0.0)
    assert _chosen(plans) == {0: [True, False]} and plans[0].call_chosen == [False]
    select(sel, plans, room=100.0, id_cap=0.0, top_up=True)  # no second tag to pay
    assert _chosen(plans) == {0: [True, True]} and plans[0].call_chosen == [True]
    assert trim(sel, plans, excess=15.0)  # the least worth a token go first: the call,
    assert _chosen(plans) == {0: [True, False]}  # then the second sentence
    assert plans[0].call_chosen == [False]
    assert [it.piece for it in sel.items].count(Slot.CALL) == 1
