"""Query-aware recall: what a question needs comes back from anywhere in the history,
in a block strict chat APIs take, reversible, within the budget."""

from __future__ import annotations

import json
from datetime import date, datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxfold
from ctxfold import ConfigurationError, Message, ToolCall, from_openai, to_openai
from ctxfold.recall import Passage, RecallIndex, default_query, resolve_query
from ctxfold.recall.periods import TOLD_WITHIN, Period, day_of, periods
from ctxfold.recall.select import rank
from ctxfold.recall.stamps import stamp_of
from ctxfold.recall.terms import terms
from ctxfold.result import RECALL_END, RECALL_HEAD, RECALL_KEY, without_recall
from ctxfold.session import Session
from ctxfold.storage import MemoryStore
from ctxfold.testing import check_tool_integrity
from ctxfold.text.scoring import features, says_little
from ctxfold.validity import tool_pairing_problems, turn_order_problems

COUNTER = ctxfold.get_counter("o200k_base")
FILLER = [
    "We watched a film about the ocean and the kids loved the whales.",
    "I baked bread this morning; the crust came out a little too dark.",
    "The weather turned cold, so we spent the afternoon reading inside.",
    "My sister called about the holidays and we talked for an hour.",
    "I finally fixed the squeaky door in the hallway with some oil.",
    "The garden needs work; the tomatoes are not doing well this year.",
]


def _chat(facts: dict[int, str], turns: int = 160) -> list[Message]:
    """A long chat between Ana and Ben over dated sessions, ``facts`` said by Ana at
    the turns given, filler elsewhere."""
    msgs = [Message("system", "You are Ben, chatting with Ana over many sessions.")]
    for k in range(turns):
        text = facts.get(k, FILLER[k % len(FILLER)] + f" (turn {k})")
        if k % 40 == 0:
            text = f"[10:00 am on {k // 40 + 1} March, 2024] {text}"
        name, role = ("Ana", "user") if k % 2 == 0 else ("Ben", "assistant")
        msgs.append(Message(role, text, name=name))
    return msgs


LOCKER = {10: "By the way, my gym locker code is 4471, I keep forgetting it.", 11: "Noted!"}


def _budget(msgs: list[Message], share: float = 0.1) -> int:
    return int(COUNTER.count_messages(msgs) * share)


def _shown(result: ctxfold.CompressionResult, question: str) -> str:
    return "\n".join(m.text for m in result.messages).replace(question, "")


# ------------------------------------------------------------------ the words


def test_terms_hold_words_numbers_and_identifiers_whole_and_in_parts() -> None:
    found = terms("The painted bowls at src/auth/middleware.ts:42 cost 12.50 for HAT039")
    assert {"paint", "bowl", "12.50", "hat039", "src/auth/middleware.ts:42"} <= set(found)
    assert {"auth", "middleware"} <= set(found)  # the parts of an identifier match too
    assert "the" not in found and "at" not in found  # stop words are no terms
    assert terms("painting") == terms("paints") == ("paint",)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["a", "I", "x", "7", "٣", "the", "Painted", "bowls", "is", "12.50", " ", "\n", ".", "-"]
        ),
        max_size=20,
    ).map("".join)
)
def test_terms_leave_out_stop_words_and_single_letters_only(text: str) -> None:
    """Each word and number in order, stemmed, but stop words and single letters (a
    single digit, of any script, stays); asked twice, the same (stems made, then
    found)."""
    from ctxfold import clear_caches
    from ctxfold.recall.terms import _STOP, _WORD, _terms, stem

    words = _WORD.findall(text.lower())
    kept = [stem(w) for w in words if w not in _STOP and (len(w) > 1 or w.isdigit())]
    clear_caches()
    for _ in range(2):  # stems made, then found
        assert list(_terms(text))[: len(kept)] == kept


def test_a_message_is_dated_by_its_header_its_metadata_or_the_one_before() -> None:
    assert stamp_of(Message("user", "[1:56 pm on 8 May, 2023] Hi!")) == "1:56 pm on 8 May, 2023"
    assert stamp_of(Message("user", "[shares a photo of a dog] Look!")) is None
    assert stamp_of(Message("user", "hi", metadata={"timestamp": 0})) == "1970-01-01 00:00 UTC"
    assert stamp_of(Message("user", "hi", metadata={"date": "2024-03-01"})) == "2024-03-01"
    index = RecallIndex(_chat({}, 50))
    assert index.stamps[1] == index.stamps[40] == "10:00 am on 1 March, 2024"
    assert index.stamps[41] == "10:00 am on 2 March, 2024"
    assert index.stamps[0] is None  # the system prompt, before any date


def test_an_index_extended_message_by_message_scores_as_one_built_at_once() -> None:
    msgs = _chat(LOCKER)
    whole, grown = RecallIndex(msgs), RecallIndex()
    for m in msgs:
        grown.extend([m])
    query = terms("What is my gym locker code?")
    assert grown.search(query, before=len(msgs)) == whole.search(query, before=len(msgs))
    found = whole.search(query, before=len(msgs))
    best = max(found, key=found.__getitem__)
    assert "4471" in whole.passages[best].text
    assert all(whole.passages[p].message < 11 for p in whole.search(query, before=11))


def test_the_passages_read_back_as_they_were_indexed() -> None:
    call = ToolCall("c1", "lookup_order", '{"order_id": "ORD-4471"}')
    long = " ".join(
        f"Step {k} of the migration moved table t{k} to the new cluster." for k in range(40)
    )
    msgs = [
        Message("user", "Where is my order ORD-4471?"),
        Message("assistant", "", tool_calls=(call,)),
        Message("tool", '{"status": "shipped"}', tool_call_id="c1"),
        Message("user", long),
    ]
    index = RecallIndex(msgs)
    assert index.passages[0] == Passage(0, "Where is my order ORD-4471?", True, False)
    (shown_call,) = [index.passages[p] for p in index.of_message(1)]
    assert shown_call.call and shown_call.message == 1 and "ORD-4471" in shown_call.text
    parts = [index.passages[p] for p in index.of_message(3)]
    assert len(parts) > 1 and not any(p.whole for p in parts)  # a long one, in runs
    assert " ".join(p.text for p in parts) == long
    assert index.passages[1:3] == [index.passages[1], index.passages[2]]
    assert len(index.passages) == index.of_message(3).stop


def test_a_ranking_kept_on_an_index_is_dropped_when_the_index_grows() -> None:
    """A render ranks a query twice (the room, then what fits): the second is the
    first, kept; once the index grows, its words' rarity changes and so does the
    ranking, as a fresh index's."""
    msgs = _chat(LOCKER)
    grown = RecallIndex(msgs[:100])
    first = rank(grown, "gym locker code", 50)
    assert rank(grown, "gym locker code", 50) is first
    grown.extend(msgs[100:])
    again = rank(grown, "gym locker code", 50)
    assert again is not first
    assert again == rank(RecallIndex(msgs), "gym locker code", 50)


def test_a_sentence_says_little_without_content_numbers_or_new_names() -> None:
    def little(text: str, known: tuple[str, ...] = ()) -> bool:
        return says_little(features(text), known)

    assert little("Wow, that's great!") and little("How have you been?")
    assert little("Thanks, Mel!", ("mel",)) and not little("Thanks, Mel!")
    assert not little("Been only to Rome once.")  # a name says where
    assert not little("It took 3 days.") and not little("See src/app.py now.")
    assert not little("The locker code works.")


# ------------------------------------------------------------------ the query


def test_the_default_query_is_the_last_user_message_or_the_newest_calls_and_errors() -> None:
    chat = [*_chat({}, 4), Message("user", "What did I bake?", name="Ana")]
    assert default_query(chat) == "What did I bake?"
    assert default_query([*chat[:-1], Message("user", "Remind me of the bread")]) is not None
    assert default_query([*chat[:-1], Message("user", "Great, bye!")]) is None  # asks nothing
    assert default_query(chat[:-1]) is None  # an assistant message last: nothing asked
    agent = from_openai(
        [
            {"role": "user", "content": "Fix the failing test."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"cmd": "pytest tests/a.py"}'},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "c1",
                "content": "collected 3 items\nE   KeyError: 'user_id'\n2 passed, 1 failed",
            },
        ]
    )
    query = default_query(agent)
    assert query is not None
    assert "pytest tests/a.py" in query and "KeyError: 'user_id'" in query
    assert "collected 3 items" not in query  # only the lines that report an error
    assert resolve_query(chat, False) is None
    assert resolve_query(chat, "  locker code ") == "locker code"
    assert resolve_query(chat, "") is None


def test_a_query_of_another_type_is_a_clear_error() -> None:
    msgs = [*_chat(LOCKER), Message("user", "What is my locker code?", name="Ana")]
    with pytest.raises(ConfigurationError, match="query must be a string"):
        ctxfold.compress(msgs, budget=_budget(msgs), query=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="query must be a string"):  # fits or not
        ctxfold.compress(msgs, budget=10**6, query=["locker"])  # type: ignore[arg-type]
    session = Session(budget=10**6)
    session.add(msgs)
    with pytest.raises(ConfigurationError, match="query must be a string"):
        session.render(query=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="recall_share"):
        ctxfold.compress(msgs, budget=_budget(msgs), recall_share=1.5)
    with pytest.raises(ConfigurationError, match="recall_share"):
        Session(recall_share=-0.1)


def test_a_query_before_anything_is_said_recalls_nothing_and_fails_nothing() -> None:
    """A memory asks with the user's first question before the history holds it."""
    session = Session(budget=500)
    assert not session.render(query="when does release 2.0 ship?").messages
    session.add([Message("user", "Release 2.0 ships on day 5.")])
    shown = session.render(query="when does release 2.0 ship?").messages
    assert [m.content for m in shown] == ["Release 2.0 ships on day 5."]


# ------------------------------------------------------------------ compress


def _asked(question: str = "Ana, what is my gym locker code again?") -> list[Message]:
    return [*_chat(LOCKER), Message("user", question, name="Ana")]


# ``sliding_window`` keeps only the newest turns: what is older comes back by recall
# alone (``auto`` finds much of it without: its selection scores the question's words).
WINDOW = "sliding_window"


def test_the_question_last_brings_back_its_answer_from_long_ago() -> None:
    msgs = _asked()
    budget = _budget(msgs)
    recalled = ctxfold.compress(msgs, budget=budget, strategy=WINDOW)
    plain = ctxfold.compress(msgs, budget=budget, strategy=WINDOW, query=False)
    question = msgs[-1].text
    assert "4471" in _shown(recalled, question)
    assert "4471" not in _shown(plain, question)  # the budget alone would have lost it
    assert recalled.stats.tokens_after <= budget
    assert not any(RECALL_KEY in m.metadata for m in plain.messages)


def test_the_block_opens_the_question_with_speakers_and_dates() -> None:
    msgs = _asked()
    result = ctxfold.compress(msgs, budget=_budget(msgs), strategy=WINDOW)
    last = result.messages[-1]
    assert last.role == "user" and last.text.startswith(RECALL_HEAD)
    assert last.text.endswith(f"{RECALL_END}\n\n{msgs[-1].text}")  # the question, whole
    block = last.text.split(RECALL_END)[0]
    lines = block.splitlines()
    at = next(k for k, line in enumerate(lines) if "4471" in line)
    assert lines[at].startswith("Ana: ")
    assert "[1 March, 2024]" in lines[:at]  # the day of that session, above
    assert last.metadata[RECALL_KEY]["sources"] and 11 in last.metadata[RECALL_KEY]["sources"]
    assert any("recalled" in d.flags for d in result.trace if d.index == 11)


def test_a_time_line_shows_the_day_and_an_opening_message_keeps_its_time() -> None:
    """The time of day of a session header is when it opened, not when each later
    message was said: a time line shows the day, or above the message that opens with
    the header, the header whole (once: the line below it does not repeat it)."""
    msgs = [
        *_chat({40: "I adopted a cat named Miso.", 41: "Lovely!", 86: "Miso the cat sleeps."}),
        Message("user", "What is my cat called?", name="Ana"),
    ]
    result = ctxfold.compress(msgs, budget=_budget(msgs), strategy=WINDOW)
    lines = result.messages[-1].text.split(RECALL_END)[0].splitlines()
    at = lines.index("Ana: I adopted a cat named Miso.")
    assert lines[at - 1] == "[10:00 am on 2 March, 2024]"
    later = lines.index("Ana: Miso the cat sleeps.")
    assert [ln for ln in lines[:later] if ln.startswith("[")][-1] == "[3 March, 2024]"


def test_a_recalled_message_leaves_out_what_says_nothing() -> None:
    """Greetings and exclamations cost room and say nothing: a recalled message shows
    its other sentences (the cut marked), unless the question asks for one of them."""
    fact = "Wow, Ben! Great. By the way, my gym locker code is 4471. Hats off!"
    msgs = [*_chat({10: fact, 11: "Noted!"}), Message("user", "What is my locker code?")]
    result = ctxfold.compress(msgs, budget=_budget(msgs), strategy=WINDOW)
    block = result.messages[-1].text.split(RECALL_END)[0]
    assert "Ana: ... By the way, my gym locker code is 4471. ..." in block.splitlines()
    asked = [*msgs[:-1], Message("user", "Where did I take my hats off with the locker code?")]
    result = ctxfold.compress(asked, budget=_budget(asked), strategy=WINDOW)
    assert f"Ana: {fact}" in result.messages[-1].text.splitlines()


def test_a_question_that_names_a_day_recalls_what_was_said_then() -> None:
    """Every evening Ana says what she had for dinner (dated by metadata): asked about
    one day, recall shows that day's, though each matches the question's words alike."""
    dishes = ["lentil soup", "ramen", "paella", "tacos", "risotto", "goulash", "pho", "dal"]
    msgs = [Message("system", "You are Ben, Ana's friend.")]
    for day in range(1, 29):
        when = datetime(2024, 3, day, 19, tzinfo=timezone.utc).timestamp()
        dish = dishes[day % len(dishes)] if day != 21 else "grilled halibut"
        for role, name, text in (
            ("user", "Ana", f"For dinner tonight I had {dish}. {FILLER[day % len(FILLER)]}"),
            ("assistant", "Ben", FILLER[(day + 3) % len(FILLER)]),
        ):
            msgs.append(Message(role, text, name=name, metadata={"timestamp": when}))
    for question in ("What did I have for dinner on 21 March 2024?", "What was dinner on Mar 21?"):
        asked = [*msgs, Message("user", question, name="Ana")]
        budget = _budget(asked, 0.15)
        result = ctxfold.compress(asked, budget=budget, strategy=WINDOW)
        assert "grilled halibut" in result.messages[-1].text.replace(question, "")
        assert result.stats.tokens_after <= budget


def test_periods_are_read_from_days_months_and_dates() -> None:
    assert periods("What did I say on 16 November, 2023?") == (Period(11, 2023, 16),)
    assert periods("and on November 16th?") == (Period(11, None, 16),)
    assert periods("in August 2023, or 2024-03-05") == (Period(3, 2024, 5), Period(8, 2023))
    assert periods("What happened in December?") == (Period(12),)
    assert periods("It may rain; we march on") == ()  # words, not months
    assert day_of("1:56 pm on 8 May, 2023") == date(2023, 5, 8)
    assert day_of("2024-03-05 19:00 UTC") == date(2024, 3, 5)
    assert day_of("10:32") is None
    # what was said a few days after a period may still tell of it ("last night")
    assert Period(5, 2023, 8).holds(date(2023, 5, 8 + TOLD_WITHIN))
    assert not Period(5, 2023, 8).holds(date(2023, 5, 9 + TOLD_WITHIN))
    assert not Period(5, 2023, 8).holds(date(2023, 5, 7))
    assert Period(12).holds(date(2024, 1, 2)) and not Period(12).holds(date(2024, 1, 20))


def test_a_recall_block_fills_the_room_it_is_given() -> None:
    """A block's lines cost less than their passages alone (one speaker per run, no
    separate framing): the room left over is chosen into again, not left unused (the
    block may take the whole budget here, so the room it is given is all that is left)."""
    msgs = [Message("system", "You keep Ana's notes.")]
    for k in range(150):
        msgs.append(Message("user", f"Tomato {2 * k}.", name="Ana"))
        msgs.append(Message("assistant", f"Ok {2 * k + 1}.", name="Ben"))
    msgs.append(Message("user", "Which tomato numbers did I note?", name="Ana"))
    for budget in (400, 600, 800):
        result = ctxfold.compress(msgs, budget=budget, strategy=WINDOW, recall_share=0.99)
        assert 0 <= budget - result.stats.tokens_after < 16, budget


def test_an_explicit_query_recalls_when_no_user_message_is_last() -> None:
    msgs = _chat(LOCKER)  # Ben speaks last
    budget = _budget(msgs)
    plain = ctxfold.compress(msgs, budget=budget, strategy=WINDOW)
    assert "4471" not in "\n".join(m.text for m in plain.messages)
    result = ctxfold.compress(msgs, budget=budget, strategy=WINDOW, query="gym locker code")
    assert "4471" in "\n".join(m.text for m in result.messages)
    assert turn_order_problems(result.messages) == []
    assert result.stats.tokens_after <= budget


@pytest.mark.parametrize(
    "strategy", ["auto", "sliding_window", "hierarchical", "semantic", "hybrid", "summarize"]
)
def test_every_strategy_that_selects_recalls_and_stays_a_valid_request(strategy: str) -> None:
    msgs = _asked()
    budget = _budget(msgs, 0.2)
    result = ctxfold.compress(msgs, budget=budget, strategy=strategy)
    assert "4471" in _shown(result, msgs[-1].text), strategy
    assert result.stats.tokens_after <= budget
    assert turn_order_problems(result.messages) == []
    again = ctxfold.compress(msgs, budget=budget, strategy=strategy)
    assert to_openai(again.messages) == to_openai(result.messages)  # deterministic


def test_a_reversible_result_expands_to_the_history_without_its_block() -> None:
    msgs = _asked()
    store = MemoryStore()
    result = ctxfold.compress(msgs, budget=_budget(msgs), store=store)
    assert any(RECALL_KEY in m.metadata for m in result.messages)
    back = ctxfold.expand(result, store=store)
    assert back.complete and to_openai(back.messages) == to_openai(msgs)
    # Read back as OpenAI dicts (no metadata), the block is known by its text.
    dicts = from_openai(result.to_openai())
    assert to_openai(ctxfold.expand(dicts, store=store).messages) == to_openai(msgs)
    assert len(without_recall(dicts)) == len(dicts)  # it opened the question


def test_a_passage_of_a_long_message_names_its_stored_original() -> None:
    report = (
        "Here is the incident report. "
        + " ".join(
            f"Step {k}: the team checked rack {k} and found nothing wrong." for k in range(30)
        )
        + " The root cause was a failed fan in rack B7, replaced on Tuesday."
        + " ".join(f" Note {k}: follow-up {k} is scheduled." for k in range(30))
    )
    msgs = _chat({20: report, 21: "Thanks for the report."})
    msgs.append(Message("user", "What was the root cause of the incident, which rack?", name="Ana"))
    store = MemoryStore()
    budget = _budget(msgs)
    result = ctxfold.compress(msgs, budget=budget, strategy=WINDOW, reversible=True, store=store)
    block = result.messages[-1].text.split(RECALL_END)[0]
    line = next(line for line in block.splitlines() if "rack B7" in line)
    assert "..." in line  # a part of the message, marked as such
    marker = line.rsplit("[expand ", 1)[1].rstrip("]")
    assert report in ctxfold.expand(marker, store=store)


def test_a_tool_run_keeps_its_calls_whole_with_recall_on() -> None:
    _, msgs = next((n, m) for n, m in _examples() if "sqlfluff" in n)
    budget = COUNTER.count_messages(msgs) // 4
    result = ctxfold.compress(msgs, budget=budget, recall_share=0.3)
    assert result.stats.tokens_after <= budget
    check_tool_integrity(msgs, list(result.messages))
    assert tool_pairing_problems(result.messages) == []
    default = ctxfold.compress(msgs, budget=budget)  # in an agent's run: off by default
    assert not any(RECALL_KEY in m.metadata for m in default.messages)


def _examples() -> list[tuple[str, list[Message]]]:
    from tests.conftest import example_conversations

    return example_conversations()


# ------------------------------------------------------------------ sessions


def test_a_session_recalls_for_each_question_and_keeps_its_prefix() -> None:
    msgs = _chat(LOCKER, 200)
    budget = _budget(msgs, 0.15)
    session = Session(budget=budget, strategy=WINDOW, store=MemoryStore())
    session.add(msgs)
    first = session.render(query=False)
    assert "4471" not in "\n".join(m.text for m in first.messages)
    asked = session.render(query="what is the gym locker code?")
    assert "4471" in "\n".join(m.text for m in asked.messages)
    assert asked.stats.tokens_after <= budget
    assert turn_order_problems(asked.messages) == []
    at = next(k for k, m in enumerate(asked.messages) if RECALL_KEY in m.metadata)
    again = session.render(query=False)
    assert to_openai(asked.messages[:at]) == to_openai(again.messages[:at])  # cache holds
    session.add(Message("user", "Remind me, my gym locker code?", name="Ana"))
    by_default = session.render()
    assert "4471" in by_default.messages[-1].text.split(RECALL_END)[0]
    assert session.history == (*msgs, session.history[-1])  # the history is never altered


def test_a_session_reopened_renders_the_same_recall(tmp_path: object) -> None:
    path = f"sqlite:///{tmp_path}/s.db"
    msgs = [*_chat(LOCKER, 200), Message("user", "My gym locker code?", name="Ana")]
    budget = _budget(msgs, 0.15)
    first = Session("s", budget=budget, strategy=WINDOW, store=path)
    first.add(msgs)
    rendered = first.render()
    again = Session.load("s", store=path, budget=budget, strategy=WINDOW).render()
    assert to_openai(again.messages) == to_openai(rendered.messages)
    assert "4471" in rendered.messages[-1].text


# ------------------------------------------------------------------ an embedder


def _synonyms(texts: list[str]) -> list[list[float]]:
    """A toy embedding model: "car" and "automobile" mean the same."""
    out = []
    for t in texts:
        low = t.lower()
        out.append([float("car" in low or "automobile" in low), float("bread" in low), 0.1])
    return out


def test_an_embedder_finds_what_shares_no_word_with_the_question() -> None:
    fact = {10: "My automobile is a red Volvo from 2009.", 11: "Nice!"}
    msgs = [*_chat(fact), Message("user", "Which car do I drive?", name="Ana")]
    budget = _budget(msgs)
    words = ctxfold.compress(msgs, budget=budget, strategy=WINDOW)
    assert "Volvo" not in _shown(words, msgs[-1].text)  # no word in common
    embedder = ctxfold.models.CallableEmbedder(_synonyms, "synonyms")
    fused = ctxfold.compress(msgs, budget=budget, strategy=WINDOW, recall_embedder=embedder)
    assert "Volvo" in _shown(fused, msgs[-1].text)
    session = Session(budget=budget, strategy=WINDOW, store=MemoryStore(), recall_embedder=embedder)
    session.add(msgs)
    assert "Volvo" in _shown(session.render(), msgs[-1].text)


def test_a_batch_embedder_compares_the_query_within_its_batch() -> None:
    msgs = [*_chat(LOCKER), Message("user", "Which gym locker code is mine?", name="Ana")]
    budget = _budget(msgs)
    one = ctxfold.compress(msgs, budget=budget, strategy=WINDOW, recall_embedder="tfidf")
    two = ctxfold.compress(msgs, budget=budget, strategy=WINDOW, recall_embedder="tfidf")
    assert "4471" in _shown(one, msgs[-1].text)
    assert to_openai(one.messages) == to_openai(two.messages)
    with pytest.raises(ConfigurationError):
        ctxfold.compress(msgs, budget=budget, recall_embedder="no-such-embedder")


def test_a_chat_session_answers_more_of_its_questions_with_recall() -> None:
    """A LoCoMo conversation (the shortest) driven turn by turn through a session at
    10% of its tokens, rendering before every reply (its own questions recall as they
    come), then asked each of its questions: recall keeps far more answers in view
    than the note alone (91.4% against 57.1%)."""
    from tests.conftest import DATA_DIR, SKIP_NO_DATA

    if DATA_DIR is None:
        pytest.skip(SKIP_NO_DATA)
    lines = (DATA_DIR / "locomo.jsonl").read_text(encoding="utf-8").splitlines()
    record = min(map(json.loads, lines), key=lambda r: len(r["messages"]))
    msgs = from_openai(record["messages"])
    full = "\n".join(m.text for m in msgs).lower()
    budget = COUNTER.count_messages(msgs) // 10
    kept = {}
    for share in (None, 0.0):
        session = Session(budget=budget, store=MemoryStore(), recall_share=share)
        for m in msgs:
            if m.role == "assistant":
                assert session.render().stats.tokens_after <= budget
            session.add(m)
        found = total = 0
        for q in record["probes"]["questions"]:
            answer = str(q["answer"]).lower()
            if answer and answer in full:
                shown = session.render(query=str(q["question"])).messages
                total += 1
                found += answer in "\n".join(m.text for m in shown).lower()
        kept[share] = found / total
    assert kept[None] >= kept[0.0] + 0.2, kept


def test_recall_takes_only_the_free_room_of_a_session_never_its_prefix() -> None:
    """A chat session that recalls for its questions renders, under each recall block,
    exactly what a session that never recalls renders: the questions never squeeze
    the compacted prefix (general memory) nor start an extra compaction."""
    msgs = _chat(LOCKER, 400)
    for k in range(20, 400, 20):  # questions now and then, the locker asked once
        text = "What was my gym locker code again?" if k == 380 else f"Shall we talk at {k}?"
        msgs[k + 1] = Message("user", text, name="Ana")
    budget = _budget(msgs, 0.1)
    recalls = Session(budget=budget, store=MemoryStore())
    plain = Session(budget=budget, store=MemoryStore(), recall_share=0)
    blocks = 0
    for m in msgs:
        for s in (recalls, plain):
            s.add(m)
        if m.role != "user":
            continue
        with_block, without = recalls.render(), plain.render()
        assert with_block.stats.tokens_after <= budget
        assert with_block.round_id == without.round_id
        assert to_openai(without_recall(with_block.messages)) == to_openai(without.messages)
        blocks += any(RECALL_KEY in x.metadata for x in with_block.messages)
        if "locker" in m.text:
            assert "4471" in "\n".join(x.text for x in with_block.messages)
    assert blocks >= 5


def test_a_session_that_is_not_cache_stable_makes_room_for_what_a_question_recalls() -> None:
    """Fitted anew every turn, such a session has no prefix to keep: a question makes
    it compact into the budget less what its passages want, and they are shown."""
    msgs = _chat(LOCKER, 200)
    budget = _budget(msgs, 0.15)
    session = Session(budget=budget, strategy=WINDOW, store=MemoryStore(), cache_stable=False)
    session.add(msgs)
    plain = session.render(query=False)
    asked = session.render(query="what is the gym locker code?")
    assert asked.round_id != plain.round_id  # compacted into less for the passages
    assert "4471" in "\n".join(m.text for m in asked.messages)
    assert asked.stats.tokens_after <= budget
    assert turn_order_problems(asked.messages) == []
