"""Sentence scoring: what counts as content, and how names and rarity weigh."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxfold.text.scoring import ScoreContext, combine, features


def test_contractions_and_chat_filler_are_not_content():
    f = features("That's so true, I don't think it isn't amazing, totally agree!")
    assert f.content == ("true",)  # each word once
    assert sorted(features("Caroline's painting won the prize.").content) == [
        "caroline",
        "painting",
        "prize",
        "won",
    ]


def test_a_name_on_every_other_line_adds_little_a_rare_name_adds_much():
    docs = [frozenset({"mel", f"topic{k}"}) for k in range(40)] + [frozenset({"nutt"})]
    ctx = ScoreContext.from_words(docs)
    common = combine(features("We met Mel at the harbour market."), ctx)
    rare = combine(features("We met Nutt at the harbour market."), ctx)
    assert rare > common + 0.8


def test_scores_do_not_depend_on_the_process_hash_seed():
    # A segment's words are a set, whose order follows PYTHONHASHSEED; a plain float sum
    # over it drifted in the last bits and flipped near-ties from one process to the next.
    import os
    import subprocess
    import sys

    code = (
        "from ctxfold.text.scoring import ScoreContext, combine, features\n"
        "import random\n"
        "r = random.Random(7)\n"
        "words = [''.join(r.choice('abcdefghij') for _ in range(7)) for _ in range(400)]\n"
        "docs = [' '.join(r.sample(words, 30)) for _ in range(60)]\n"
        "ctx = ScoreContext.build(docs)\n"
        "print([repr(combine(features(d), ctx)) for d in docs])\n"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("0", "1", "6", "42")
    }
    assert len(outs) == 1


def test_a_speaker_tag_or_a_capital_stop_word_makes_no_name():
    """A note line starts with its speaker's tag: the capital after it starts the
    sentence, as in the message it came from, so the line scores as that sentence did."""
    assert features("Caroline: Taking care of ourselves is vital.").names == ()
    assert features("Taking care of ourselves is vital.").names == ()
    assert features("yes, The plan holds").names == ()
    assert features("we met Melanie in Boston, then Oslo").names == ("melanie", "boston", "oslo")
    tagged, plain = features("Mel: Hiking is fun."), features("Hiking is fun.")
    ctx = ScoreContext()
    assert abs(combine(tagged, ctx) - combine(plain, ctx)) <= 0.2  # the tag word only


def test_a_word_common_in_the_whole_conversation_is_not_rare_in_a_part_of_it():
    from ctxfold.contract import WordCounts

    part = [frozenset({"adoption", "agency"}), frozenset({"hiking"})]
    alone = ScoreContext.from_words(part)
    assert alone.idf["adoption"] == alone.idf["hiking"]
    whole = WordCounts(200, {"adoption": 150, "hiking": 1})
    ctx = ScoreContext.from_words(part, rarity=whole)
    assert ctx.idf["adoption"] < 0.5 < ctx.idf["hiking"]
    assert ctx.idf["agency"] == ctx.idf["hiking"]  # unknown to the counts: counted here


_DECISION_SPEC = re.compile(
    r"decid|chose|choose|plan|let's|we'll|i'll|will (?:now|use|try|fix|add|change|run)|"
    r"should|must|root cause|the fix|the issue is|the problem is|the bug is|because|"
    r"instead|conclusion|solution|agree"
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "will ",
                "now",
                "run",
                "we",
                "'ll",
                "the ",
                "fix",
                "issue is",
                "plan",
                "agre",
                "e",
                "x",
                " ",
                "decid",
                "cho",
                "se",
                "must",
                "root cause",
            ]
        ),
        max_size=10,
    ).map("".join)
)
def test_a_decision_is_any_of_its_phrases_anywhere(low: str) -> None:
    from ctxfold.text.scoring import mentions_decision

    assert mentions_decision(low) == bool(_DECISION_SPEC.search(low))


def test_a_segment_counts_up_to_four_numbers() -> None:
    from ctxfold.text.scoring import features

    four = features("ports 8080 8081 8082 8083 open")
    assert features("ports 8080 8081 8082 8083 8084 8085 8086 open").base == four.base
    assert features("ports 8080 8081 8082 open").base == four.base - 1


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.sampled_from(["a", "b", ",", ";", ":", ".", " ", "  ", "\n", "Bob", "ANN", "Eve", "Al"]),
        max_size=30,
    ).map("".join)
)
def test_names_are_the_capitalized_words_after_a_lower_case_word_or_a_comma(text: str) -> None:
    """The quick pattern (the space first) finds what a look-behind at every place
    finds: a capital, two lower-case letters or more, after one of ``a-z , ;`` and a
    space."""
    from ctxfold.text.scoring import _CAPITAL

    slow = re.compile(r"(?<=[a-z,;] )[A-Z][a-z]{2,}")
    assert _CAPITAL.findall(text) == slow.findall(text)
    assert bool(_CAPITAL.search(text)) == bool(slow.search(text))
