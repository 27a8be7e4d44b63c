"""A long history's ranking: the same passages in the same order as a full sort, made
only as far as it is read; the same scores whether a query's postings are summed in a
loop or in arrays; passages read the same whether as a turn is indexed or later."""

from __future__ import annotations

import gc

import pytest

from ctxfold import Message, get_counter
from ctxfold._column import BLOCK
from ctxfold.recall import index as index_module
from ctxfold.recall.index import RecallIndex
from ctxfold.recall.select import (
    CARRIES,
    FLOOR,
    NEXT_SHARE,
    PREVIOUS_SHARE,
    Fused,
    Ranked,
    fit,
    plain,
    rank,
)

SAID = [
    "The order ORD-{k} for the blue kettle shipped from the Leeds depot on day {k}.",
    "Noted, thanks.",
    "My kettle broke again, model KX-{k}; the depot said {k} days.",
    "Call the depot about the kettle, please.",
    "We talked about the weather and the garden for a while.",
]


EXTRA = ("as I said before about the matter in question and more " * 9).split()


def _history(n: int) -> list[Message]:
    """Messages of a few kinds, each a different length (so scores differ)."""
    return [
        Message(
            ("user", "assistant")[k % 2],
            " ".join([SAID[k % len(SAID)].format(k=k), *EXTRA[: k * 7 % 97]]),
        )
        for k in range(n)
    ]


def _full_sort(index: RecallIndex, scores: dict[int, float], last: int) -> list[tuple[int, float]]:
    """The ranking's definition, every value made before one sort."""
    top = max(scores.values())
    value: dict[int, float] = {}
    for pid, s in scores.items():
        if s < FLOOR * top:
            continue
        s /= top
        own = s * (1.0 + CARRIES * min(index.carries(pid), 6.0))
        value[pid] = max(value.get(pid, 0.0), own)
        for near, share in ((pid + 1, NEXT_SHARE), (pid - 1, PREVIOUS_SHARE)):
            if 0 <= near < last:
                value[near] = max(value.get(near, 0.0), s * share)
    return sorted(value.items(), key=lambda pv: (-pv[1], pv[0]))


@pytest.mark.parametrize("query", ["kettle depot", "blue kettle ORD-777", "garden weather"])
def test_a_ranking_is_the_full_sort_made_only_as_far_as_it_is_read(query: str) -> None:
    msgs = _history(3000)
    index = RecallIndex(msgs)
    until = 2900
    scores = index.search(index_module.terms(query), before=until)
    last = index.of_message(until - 1).stop
    valued = Ranked(index, scores, last)
    first = [item for _, item in zip(range(20), valued, strict=False)]
    carried = len(index._carries)  # what it took to make the best 20
    expected = _full_sort(index, scores, last)
    assert first == expected[:20]
    found = len(index._carries)  # each passage scoring above the floor
    assert found > 500 and carried < found * 2 // 3  # not all of them
    assert list(valued) == expected  # read to its end: all of it, in order
    assert list(valued) == expected  # and again
    # What a query recalls reads it in turn with BM25 + neighbours' order.
    index = RecallIndex(msgs)
    fused = rank(index, query, until).found
    first = [pid for _, (pid, _) in zip(range(20), fused, strict=False)]
    assert len(index._carries) < found * 2 // 3  # made as far as it is read, still
    ours = [pid for pid, _ in expected]
    theirs = list(plain(index, scores, last))
    assert first == _in_turn(ours, theirs)[:20]
    assert [pid for pid, _ in fused] == _in_turn(ours, theirs)


def _in_turn(*rankings: list[int]) -> list[int]:
    """The rankings read a rank of each at a time, each passage where first read."""
    out: list[int] = []
    for k in range(max(map(len, rankings))):
        for r in rankings:
            if k < len(r) and r[k] not in out:
                out.append(r[k])
    return out


def test_the_plain_order_takes_whole_messages_with_the_ones_beside_them() -> None:
    index = RecallIndex(
        [Message("user", t) for t in ("hello", "the kettle", "fine", "kettle kettle", "bye")]
    )
    scores = index.search(["kettle"], before=5)
    assert sorted(scores) == [1, 3] and scores[3] > scores[1]
    assert list(plain(index, scores, last=5)) == [3, 4, 2, 1, 0]  # each: after, before
    assert list(plain(index, scores, last=4)) == [3, 2, 1, 0]  # none at or past 4
    fused = list(Fused([2, 9], [3, 2, 7, 8]))  # in turn; 2 where first read
    assert fused == [(2, 1.0), (3, 0.5), (9, 1 / 3), (7, 0.25), (8, 0.2)]


def test_search_sums_the_same_scores_in_a_loop_or_in_arrays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index = RecallIndex(_history(3000))
    for query in (["kettle"], ["kettle", "depot", "ord-17"], ["garden", "kx-12", "nothing"]):
        for before in (1, 700, 3000):
            monkeypatch.setattr(index_module, "SCAN_IN_ARRAYS", 10**9)
            looped = index.search(query, before=before)
            monkeypatch.setattr(index_module, "SCAN_IN_ARRAYS", 0)
            summed = index.search(query, before=before)
            assert summed == looped  # the same floats, not only close ones
            assert all(index.passages[p].message < before for p in summed)
    assert index.search(["kettle"], before=3000)  # a common term: in arrays by default


def _said(index: RecallIndex) -> list[tuple[str, str, tuple[str, ...], float]]:
    return [
        (index.shown(p), index.shown(p, full=True), index.leaves_out(p), index.carries(p))
        for p in range(len(index.passages))
    ]


def test_a_turn_is_read_as_it_is_indexed_a_long_history_as_queries_reach_it() -> None:
    msgs = [
        Message("user", "Wow, Mel! My locker code is 4471. See you at 5pm.", name="Ana"),
        Message("assistant", "Thanks, Ana! Noted the code.", name="Mel"),
        *_history(200),
    ]
    at_once = RecallIndex(msgs)
    assert not at_once._carries  # 202 messages: read as queries reach them
    by_turns = RecallIndex()
    for k in range(0, len(msgs), 2):
        by_turns.extend(msgs[k : k + 2])
        assert len(by_turns._carries) == len(by_turns.passages)  # read as indexed
    assert _said(by_turns) == _said(at_once)  # the same reading, whenever it is done


def test_a_new_speaker_name_is_read_again_in_what_was_read_ahead() -> None:
    said = "Wow, Mel! My locker code is 4471."
    index = RecallIndex([Message("user", said, name="Ana")])
    assert index.shown(0) == said  # "Wow, Mel!" names someone new: it says something
    index.extend([Message("assistant", "Noted.", name="Mel")])
    assert index.shown(0) == "... My locker code is 4471."  # now only a greeting
    assert index.leaves_out(0) == ("mel",)
    assert index.shown(0, full=True) == said


def test_a_long_index_keeps_nothing_the_collector_walks_per_passage() -> None:
    index = RecallIndex(_history(3000))  # thousands of terms, passages, messages
    for query in ("kettle depot", "blue kettle ORD-777", "garden weather"):
        ranking = rank(index, query, 3000)
        fit(index, ranking, room=4000, counter=get_counter("o200k_base"), shown="")
    assert len(index._postings) > BLOCK and len(index._carries) > BLOCK
    gc.collect()
    index.extend([Message("user", "The kettle KX-9 came: zebra quartz.")])  # a turn's terms
    walked = {k: len(gc.get_referents(v)) for k, v in vars(index).items() if gc.is_tracked(v)}
    assert max(walked.values()) < BLOCK, walked  # postings, reading, columns: atoms
