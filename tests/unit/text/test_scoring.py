"""Sentence scoring: what counts as content, and how names and rarity weigh."""

from __future__ import annotations

from ctxfold.text.scoring import ScoreContext, combine, features


def test_contractions_and_chat_filler_are_not_content():
    f = features("That's so true, I don't think it isn't amazing, totally agree!")
    assert f.content == frozenset({"true"})
    assert features("Caroline's painting won the prize.").content == frozenset(
        {"caroline", "painting", "won", "prize"}
    )


def test_a_name_on_every_other_line_adds_little_a_rare_name_adds_much():
    docs = [frozenset({"mel", f"topic{k}"}) for k in range(40)] + [frozenset({"nutt"})]
    ctx = ScoreContext.from_words(docs)
    common = combine(features("We met Mel at the harbour market."), ctx)
    rare = combine(features("We met Nutt at the harbour market."), ctx)
    assert rare > common + 0.8
