"""The auto strategy: what it keeps verbatim, what it condenses, and what it reports."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxfold
from conftest import example_records
from ctxfold import AutoCompressor, ExtractiveSummarizer, Layers, Message, ToolCall, get_counter
from ctxfold.result import is_note
from ctxfold.strategies.auto.assemble import Notes, _outermost
from ctxfold.strategies.auto.policy import POLICY
from ctxfold.testing import check_continuation
from ctxfold.testing.strategies import texts
from ctxfold.validity import turn_order_problems

COUNTER = get_counter("o200k_base")


def agent_history(n_steps: int = 30) -> list[Message]:
    msgs = [
        Message("system", "You are a coding agent."),
        Message("user", "Fix the crash in src/auth/middleware.ts when the token is missing."),
    ]
    for k in range(n_steps):
        cid = f"call_{k}"
        msgs.append(
            Message(
                "assistant",
                f"Step {k}: let me inspect file number {k}.",
                tool_calls=(
                    ToolCall(
                        cid, "bash", json.dumps({"command": f"cat src/module_{k}/handler_{k}.py"})
                    ),
                ),
            )
        )
        body = "\n".join(f"    line {j} of handler_{k} = compute({j})" for j in range(40))
        msgs.append(Message("tool", f"def handler_{k}():\n{body}\n", tool_call_id=cid))
    msgs.append(Message("assistant", "The fix is to check for a missing token first."))
    return msgs


def test_recent_and_task_stay_verbatim_and_the_rest_is_condensed_into_a_note():
    msgs = agent_history()
    budget = COUNTER.count_messages(msgs) // 5
    r = AutoCompressor(reversible=False).compress(msgs, budget=budget, counter=COUNTER)
    assert r.stats.tokens_after <= budget
    # the system prompt, then the note (one leading system block, as strict APIs want),
    # then the task
    assert r.messages[0] == msgs[0] and r.messages[2] == msgs[1]
    assert r.messages[-1] == msgs[-1]  # the newest unit
    notes = [m for m in r.messages if m.metadata.get("ctxfold")]
    assert len(notes) == 1 and notes[0].role == "system" and notes[0] == r.messages[1]
    assert notes[0].text.startswith("[ctxfold: ")
    assert r.trace[1].reason == "task" and r.trace[-1].reason == "recent"
    folded = [d for d in r.trace if d.action == "summarized"]
    assert folded and all(d.reason.startswith("folded:note") for d in folded)


def test_identifiers_of_folded_content_stay_findable():
    msgs = agent_history()
    budget = COUNTER.count_messages(msgs) // 10
    r = AutoCompressor(reversible=False).compress(msgs, budget=budget, counter=COUNTER)
    shown = "\n".join(m.text + " ".join(c.arguments for c in m.tool_calls) for m in r.messages)
    paths = [f"src/module_{k}/handler_{k}.py" for k in range(30)]
    found = sum(p in shown for p in paths)
    assert found >= 25, (found, shown[-800:])
    assert "src/auth/middleware.ts" in shown


def test_tool_calls_are_never_left_without_results():
    msgs = agent_history()
    for frac in (0.5, 0.3, 0.1, 0.05):
        budget = int(COUNTER.count_messages(msgs) * frac)
        r = AutoCompressor().compress(msgs, budget=budget, counter=COUNTER)
        ctxfold.testing.check_tool_integrity(msgs, list(r.messages))


def test_layers_and_adapters_report_their_savings():
    msgs = agent_history()
    msgs[5] = msgs[5].with_content(json.dumps({"rows": list(range(200))}, indent=2))
    r = AutoCompressor().compress(msgs, budget=COUNTER.count_messages(msgs) // 4, counter=COUNTER)
    assert r.stats.savings.get("json", 0) > 0
    assert r.stats.savings.get("selection", 0) > 0
    assert r.stats.as_dict()["savings"] == dict(r.stats.savings)


def test_older_duplicates_are_deduplicated():
    out = "\n".join(f"row {i}: value {i * 7}" for i in range(40))
    msgs = [Message("user", "Show me the table twice.")]
    for k in range(2):
        msgs.append(Message("assistant", None, tool_calls=(ToolCall(f"c{k}", "show", "{}"),)))
        msgs.append(Message("tool", out, tool_call_id=f"c{k}"))
    msgs.append(Message("assistant", "Done. " * 30))
    budget = COUNTER.count_messages(msgs) - 200
    r = AutoCompressor(recent_share=0.1).compress(msgs, budget=budget, counter=COUNTER)
    assert r.trace[2].action == "deduplicated"
    assert r.trace[2].flags == ("dedup:repeated_later",)
    assert r.trace[2].tokens_after < 20 and r.trace[4].action != "deduplicated"


def test_a_folded_copy_of_a_later_message_leaves_nothing_in_the_note():
    table = "\n".join(f"row {i}: value {i * 7} for account ACC{i:04d}" for i in range(60))
    msgs = [Message("system", "agent"), Message("user", "Compare the two reports.")]
    for k in range(2):
        msgs.append(
            Message("assistant", f"Report {k}.", tool_calls=(ToolCall(f"c{k}", "get", "{}"),))
        )
        msgs.append(Message("tool", table, tool_call_id=f"c{k}"))
    msgs += [Message("user", "And now?"), Message("assistant", "They are the same. " * 20)]
    r = AutoCompressor(reversible=False).compress(msgs, budget=200, counter=COUNTER)
    assert r.trace[3].action == "deduplicated" and r.trace[5].tokens_after == 0
    assert "same content as a later message" not in "\n".join(m.text for m in r.messages)


def test_an_identifier_inside_another_listed_one_is_not_listed_again():
    candidates = ["gift_card", "gift_card_7000", "HAT001", "credit_card_12", "HAT0"]
    note = Notes("system", Layers()).write(5, [], candidates, "the flight HAT001", COUNTER)
    listed = note.text.split("Also mentioned: ")[1].split(", ")
    assert listed == ["gift_card_7000", "credit_card_12"]  # each is found in the list


def test_auto_uses_the_budget_it_is_given():
    """Room is left only where the note's list has its share of the note (its cap) or
    families shrank it: identifiers only alike lines showed do not fill the rest."""
    for record in example_records():
        msgs = ctxfold.from_openai(record["messages"])
        pinned = sum(COUNTER.count_message(m) for m in msgs if m.role == "system") + 3
        for fraction in (0.1, 0.25, 0.5):
            budget = int(pinned + fraction * (COUNTER.count_messages(msgs) - pinned))
            for reversible in (True, False):
                r = AutoCompressor(reversible=reversible).compress(
                    msgs, budget=budget, counter=COUNTER
                )
                left = budget - r.stats.tokens_after
                assert left >= 0
                # tight: what is left would not hold one more id
                slack = 8 if fraction == 0.1 else max(0.04 * (budget - pinned), 20)
                if left > slack:
                    assert _list_at_cap(r.messages), (record["id"], fraction, reversible, left)


def _list_at_cap(messages: Sequence[Message]) -> bool:
    """Whether the note's list could not take one more identifier (of about ten tokens)
    without passing a quarter of the note, or holds families (identifiers of one shape
    as one entry: the pool may have nothing left to fill the room with)."""
    note = next(m for m in messages if is_note(m))
    also = [x for x in note.text.split("\n") if x.startswith(POLICY.also)]
    listed = sum(COUNTER.count_text(x) for x in also)
    families = bool(re.search(r" x\d+ \(", "\n".join(also)))
    return families or listed + 10 > 0.25 * (COUNTER.count_text(note.text) + 10)


def test_a_long_newest_tool_output_is_condensed_not_dropped():
    log = "".join(f"2024-05-01 12:00:{i % 60:02d} INFO step {i}\n" for i in range(500))
    log += "2024-05-01 12:09:00 ERROR Failed to open /data/input.csv: permission denied\n"
    msgs = [
        Message("system", "agent"),
        Message("user", "Run the job."),
        Message("assistant", None, tool_calls=(ToolCall("c", "run", "{}"),)),
        Message("tool", log, tool_call_id="c"),
    ]
    r = AutoCompressor().compress(msgs, budget=600, counter=COUNTER)
    shown = "\n".join(m.text for m in r.messages)
    assert "ERROR Failed to open /data/input.csv: permission denied" in shown
    assert r.stats.tokens_after <= 600


def test_codebook_layers_encode_the_note_and_decode_exactly():
    msgs = [Message("system", "agent"), Message("user", "Audit the lint rules.")]
    for k in range(40):
        path = f"/testbed/src/sqlfluff/rules/L0{k:02d}.py"
        msgs.append(
            Message(
                "assistant",
                None,
                tool_calls=(ToolCall(f"c{k}", "cat", json.dumps({"path": path})),),
            )
        )
        msgs.append(
            Message(
                "tool",
                f"{path}:1: SomeVeryLongRuleIdentifier{k % 3} checks "
                f"{path} for layout errors and reports them.",
                tool_call_id=f"c{k}",
            )
        )
    layers = Layers(codebook=True, path_aliases=True, static_codebook=True)
    budget = COUNTER.count_messages(msgs) // 4
    plain = AutoCompressor(reversible=False).compress(msgs, budget=budget, counter=COUNTER)
    coded = AutoCompressor(layers=layers, reversible=False).compress(
        msgs, budget=budget, counter=COUNTER
    )
    note = next(m for m in coded.messages if m.metadata.get("ctxfold"))
    book = note.metadata["ctxfold"]["codebook"]
    assert book and "[Codebook:" in note.text
    assert coded.stats.savings["codebook"] > 0
    lines = note.text.split("\n")
    body = "\n".join(lines[2 + len(book) :])  # after the head line and the header
    decoded = ctxfold.decode(body, book)
    assert "§" not in decoded and len(body) < len(decoded)
    assert "/testbed/src/sqlfluff/rules/" in decoded
    assert all(
        line.startswith(("assistant:", "tool result:", "Also mentioned:", "Files:"))
        for line in decoded.splitlines()
    )
    assert coded.stats.tokens_after <= budget and plain.stats.tokens_after <= budget


def test_options_are_validated_at_construction():
    for bad in ({"recent_share": 1.0}, {"digest_share": -0.1}, {"task_share": "x"}):
        with pytest.raises(ctxfold.ConfigurationError):
            AutoCompressor(**bad)
    with pytest.raises(ctxfold.ConfigurationError, match="layers"):
        AutoCompressor(layers={"json": False})  # type: ignore[arg-type]
    with pytest.raises(ctxfold.ConfigurationError, match="summarizer must"):
        AutoCompressor(summarizer=42)


def test_an_llm_summarizer_rewrites_the_note_in_one_cached_call():
    calls: list[tuple[int, str]] = []

    class Upper:
        cache_id = "upper"

        def summarize(self, text: str, *, max_tokens: int) -> str:
            calls.append((max_tokens, text))
            return text[: max_tokens * 3].upper()  # too long: ctxfold shortens it

    msgs = ctxfold.from_openai(example_records()[1]["messages"])
    budget = COUNTER.count_messages(msgs) // 4
    cache = ctxfold.Cache()
    plain = AutoCompressor().compress(msgs, budget=budget, counter=COUNTER)
    r = AutoCompressor(summarizer=Upper(), cache=cache).compress(
        msgs, budget=budget, counter=COUNTER
    )
    assert len(calls) == 1 and r.stats.usage["summarizer_calls"] == 1
    folded = [d.index for d in r.trace if d.reason.startswith("folded:note")]
    assert calls[0][1] == ctxfold.messages.transcript([msgs[i] for i in folded])
    note = next(m for m in r.messages if m.metadata.get("ctxfold", {}).get("kind") == "note")
    assert "earlier messages summarized]" in note.text
    assert any(line.isupper() for line in note.text.splitlines()[1:])  # the summary
    assert r.stats.tokens_after <= plain.stats.tokens_after <= budget
    assert [d.action for d in r.trace] == [d.action for d in plain.trace]
    again = AutoCompressor(summarizer=Upper(), cache=cache).compress(
        msgs, budget=budget, counter=COUNTER
    )
    assert len(calls) == 1 and again.stats.usage["cache_hits"] >= 1
    assert again.messages == r.messages

    def llm(messages: list[Message]) -> str:  # a chat model: prompt, then the text
        assert messages[0].role == "system" and "summary" in messages[0].text
        return "The agent inspected the parser and ran the tests."

    by_callable = AutoCompressor(summarizer=llm, cache=False).compress(
        msgs, budget=budget, counter=COUNTER
    )
    assert any("The agent inspected the parser" in m.text for m in by_callable.messages)

    class Broken:
        def summarize(self, text: str, *, max_tokens: int) -> str:
            raise TimeoutError("model timed out")

    with pytest.raises(ctxfold.SummarizerError, match="timed out"):
        AutoCompressor(summarizer=Broken(), cache=False).compress(
            msgs, budget=budget, counter=COUNTER
        )


def test_extractive_summarizer_keeps_order_identifiers_and_budget():
    text = (
        "Hello there. The config lives in /etc/app/config.yaml and must be edited. "
        "We had lunch. The build failed with ValueError: bad port 8080. "
        "Nice weather today. We decided to pin requests==2.31.0 because of the bug."
    )
    s = ExtractiveSummarizer(goal="why did the build fail")
    out = s.summarize(text, max_tokens=45)
    assert "/etc/app/config.yaml" in out and "ValueError: bad port 8080" in out
    assert out.index("/etc/app/config.yaml") < out.index("ValueError")
    assert "requests==2.31.0" in out
    assert "Nice weather" not in out and "lunch" not in out
    assert COUNTER.count_text(out) <= 50
    assert s.summarize(text, max_tokens=1000) == text


def test_cached_analyses_give_the_same_result_as_a_cold_run():
    import ctxfold.strategies.auto.analysis as auto

    msgs = ctxfold.from_openai(example_records()[2]["messages"])
    budget = COUNTER.count_messages(msgs) // 4
    ctxfold.clear_caches()
    assert len(auto._ANALYSES) == 0
    cold = AutoCompressor().compress(msgs, budget=budget, counter=COUNTER)
    assert len(auto._ANALYSES) > 0
    warm = AutoCompressor().compress(
        ctxfold.from_openai(example_records()[2]["messages"]), budget=budget, counter=COUNTER
    )
    assert warm.to_openai() == cold.to_openai() and warm.trace == cold.trace
    # a grown history reuses what it can and still fits
    grown = [*msgs, Message("user", "Now also check src/sqlfluff/core/parser/grammar.py")]
    nxt = AutoCompressor().compress(grown, budget=budget, counter=COUNTER)
    assert nxt.stats.tokens_after <= budget and nxt.messages[-1] == grown[-1]


def test_registering_an_adapter_invalidates_cached_analyses():
    from ctxfold.text.adapters import registry_version

    before = registry_version()

    class Never:
        name = "never"

        def detect(self, text):
            return False

        def extract_preserved(self, text):
            return []

        def extract_compressible(self, text):
            return [text]

        def reconstruct(self, text, compressed):
            return "".join(compressed)

    from ctxfold.strategies.auto.analysis import Analyzer
    from ctxfold.text.layers import Layers

    analyzer = Analyzer(Layers(), None)  # one kept across the change, as a compressor's
    key = analyzer._config()
    assert analyzer._config() == key  # made once, asked by every message and note line
    ctxfold.register_adapter(Never())
    try:
        assert registry_version() != before
        assert analyzer._config() != key  # its memo keys change with the registry
    finally:
        ctxfold.text.unregister_adapter("never")


def chat_history(n: int = 60) -> list[Message]:
    msgs = [Message("system", "You are Mel, chatting with Caro.")]
    for k in range(n):
        text = f"Caro here. On day {k} I visited museum number {k}."
        msgs.append(Message("user", text, name="Caro"))
        msgs.append(Message("assistant", f"Lovely, Caro! Museum {k} sounds great.", name="Mel"))
    return msgs


def test_a_chat_keeps_a_shorter_verbatim_window_than_an_agent_trace():
    chat = chat_history()
    budget = COUNTER.count_messages(chat) // 4
    default = AutoCompressor().compress(chat, budget=budget, counter=COUNTER)
    wide = AutoCompressor(recent_share=0.25).compress(chat, budget=budget, counter=COUNTER)
    recent = [sum(d.reason == "recent" for d in r.trace) for r in (default, wide)]
    assert 0 < recent[0] < recent[1]
    agent = agent_history()
    budget = COUNTER.count_messages(agent) // 4
    a = AutoCompressor().compress(agent, budget=budget, counter=COUNTER)
    b = AutoCompressor(recent_share=0.25).compress(agent, budget=budget, counter=COUNTER)
    assert a.trace == b.trace  # tool calls: the agent default


PLACES = ["Lisbon", "Oslo", "Quito", "Hanoi", "Lagos", "Perth", "Cusco", "Tbilisi", "Dakar"]


def test_consecutive_folded_lines_of_one_speaker_share_a_tag():
    msgs = [Message("system", "Chat.")]
    for k in range(40):
        place = PLACES[k % len(PLACES)]
        text = f"Hmm, okay. In {2000 + k} my cousin Ravi flew to {place} with {k + 2} friends."
        msgs.append(Message("user", text, name="Ann"))
        msgs.append(Message("assistant", "Okay, thanks!", name="Bob"))  # filler, never kept
    budget = COUNTER.count_messages(msgs) // 3
    r = AutoCompressor(reversible=False).compress(msgs, budget=budget, counter=COUNTER)
    note = next(m for m in r.messages if m.metadata.get("ctxfold")).text
    lines = note.splitlines()[1:]
    assert sum(ln.startswith("Ann: ") for ln in lines) == 1
    assert lines[0].count("my cousin Ravi") > 5
    # Most folded lines drop the filler (the few folded whole, rather than kept beside
    # another of Ann's turns, keep it).
    assert lines[0].count("Hmm") < lines[0].count("my cousin Ravi") // 2
    assert not turn_order_problems(list(r.messages))


def test_tool_results_keep_one_tag_each():
    calls = tuple(ToolCall(f"c{k}", "read", json.dumps({"path": f"src/m{k}.py"})) for k in range(3))
    msgs = [Message("system", "Agent."), Message("user", "Read the modules.")]
    msgs.append(Message("assistant", "Reading three modules.", tool_calls=calls))
    for k in range(3):
        body = "\n".join(f"def f{k}_{j}(x): return x * {j}" for j in range(30))
        msgs.append(Message("tool", body, tool_call_id=f"c{k}"))
    msgs += [Message("user", "Now summarize them in one line."), Message("assistant", "Done.")]
    budget = COUNTER.count_messages(msgs) // 3
    r = AutoCompressor(reversible=False).compress(msgs, budget=budget, counter=COUNTER)
    note = next(m for m in r.messages if m.metadata.get("ctxfold")).text
    assert note.count("tool result: ") == 3


def test_a_note_folded_again_keeps_the_weight_of_what_it_listed():
    from ctxfold.strategies.auto.plan import Carried, identifier_pool

    msgs = [Message("system", "Agent.")]
    for k in range(30):
        path = f"src/pkg/module_{k:02d}.py"
        msgs += [
            Message("user", f"Check {path} and {path} again for the bug BUG-{k:03d}."),
            Message("assistant", f"Looked at {path}: nothing wrong in BUG-{k:03d} there."),
        ]
    first = AutoCompressor(reversible=False).compress(msgs, budget=900, counter=COUNTER)
    note = next(m for m in first.messages if m.metadata.get("ctxfold"))
    weights = note.metadata["ctxfold"]["weights"]
    shown = "\n".join(m.text for m in first.messages)
    assert weights and all(v in shown for v in weights)
    assert set(note.metadata["ctxfold"]["listed"]) <= set(weights)
    # Folded again, what the note listed keeps that weight (named once in the note,
    # it would otherwise count as mentioned once).
    listed = next(iter(weights))
    used = frozenset(note.metadata["ctxfold"]["used"])  # the user named them
    assert listed in used
    pool = identifier_pool({}, [], -1, {1: Carried(weights, used)})
    assert dict(pool.ranked)[listed] == weights[listed] and listed in pool.used
    later = [
        *first.messages,
        *(
            Message("user" if k % 2 == 0 else "assistant", f"Also saw lib/extra_{k}.py.")
            for k in range(20)
        ),
    ]
    plain = [
        m if not m.metadata.get("ctxfold") else dataclasses.replace(m, metadata={}) for m in later
    ]
    again = AutoCompressor(reversible=False).compress(later, budget=500, counter=COUNTER)
    without = AutoCompressor(reversible=False).compress(plain, budget=500, counter=COUNTER)

    def kept(r: ctxfold.CompressionResult) -> int:
        text = "\n".join(m.text for m in r.messages)
        return sum(v in text for v in weights)

    assert kept(again) > kept(without)  # 56 against 45 when written


def test_the_task_weight_of_an_identifier_shown_verbatim_is_carried():
    # The task names engine.py; so does the newest tool output, kept verbatim, so the
    # note does not list it. When a later round folds that output, the identifier must
    # still weigh as the task's, not as one mention in a tool result.
    from ctxfold.strategies.auto.plan import Carried, identifier_pool

    task = "Fix the crash in src/core/engine.py (EngineError in Engine.start_loop).\n" + "\n".join(
        f"  File lib/deep/frame_{k}.py, line {k}, in step_{k}" for k in range(60)
    )
    msgs = [Message("system", "Agent."), Message("user", task)]
    for k in range(24):
        call = ToolCall(f"c{k}", "bash", json.dumps({"command": f"cat notes/n{k}.txt"}))
        msgs.append(Message("assistant", f"Reading note {k}.", tool_calls=(call,)))
        msgs.append(Message("tool", f"note {k}: lib/mod_{k}.py is fine", tool_call_id=f"c{k}"))
    last = ToolCall("c99", "bash", json.dumps({"command": "grep -n start_loop src/core/engine.py"}))
    msgs.append(Message("assistant", "Looking at the engine.", tool_calls=(last,)))
    msgs.append(Message("tool", "src/core/engine.py:40: def start_loop(self):", tool_call_id="c99"))
    budget = COUNTER.count_messages(msgs) // 2
    r = AutoCompressor(reversible=False).compress(msgs, budget=budget, counter=COUNTER)
    note = next(m for m in r.messages if m.metadata.get("ctxfold"))
    weights = note.metadata["ctxfold"]["weights"]
    listed = [ln for ln in note.text.split("\n") if ln.startswith(POLICY.also)]
    assert all("src/core/engine.py" not in ln for ln in listed)  # shown, so not listed
    once = dict(identifier_pool({}, [], -1, {1: Carried({"lib/mod_3.py": 1.0})}).ranked)
    assert weights["src/core/engine.py"] > weights.get("lib/mod_3.py", once["lib/mod_3.py"])
    assert weights["src/core/engine.py"] == max(weights.values())  # the task's, boosted


def test_a_note_folded_again_and_again_keeps_content_under_its_speakers() -> None:
    # A session folds its note again at every compaction. The old note's first line
    # (and the round id in it) is no content, and its lines keep their own speakers:
    # neither nested heads nor the note's own tag ("system: Bob: ...") pile up, and a
    # sentence kept from the middle of a line keeps the speaker of the line.
    def chat(start: int, n: int) -> list[Message]:
        out = []
        for k in range(start, start + n):
            ann = f"On day {k} I visited Lake {k * 7} with Priya and paid {k * 3} euros."
            bob = f"Lovely! Day {k} sounds calm; I fixed bike number {k * 11}."
            out += [Message("user", ann, name="Ann"), Message("assistant", bob, name="Bob")]
        return out

    msgs = [Message("system", "Chat between Ann and Bob."), *chat(0, 30)]
    budget = COUNTER.count_messages(msgs) // 3
    history = list(AutoCompressor().compress(msgs, budget=budget, counter=COUNTER).messages)
    for k in range(4):
        history += chat(30 + 20 * k, 20)
        history = list(AutoCompressor().compress(history, budget=budget, counter=COUNTER).messages)
    note = next(m for m in history if m.metadata.get("ctxfold"))
    head, *lines = note.text.split("\n")
    body = [line for line in lines if not line.startswith("Also mentioned: ")]
    assert head.startswith("[ctxfold round ") and len(body) > 5
    assert all(line.startswith(("Ann: ", "Bob: ")) for line in body), body
    assert not any(line.startswith(("Ann: Bob:", "Bob: Ann:", "Ann: Ann:")) for line in body)


def test_a_note_speaking_as_the_user_is_not_taken_for_the_task():
    from ctxfold.result import from_user, note_message

    note = note_message("user", "note", "30 earlier messages condensed", "Ann: flew to Oslo. " * 40)
    msgs = [Message("system", "Chat."), note]
    for k in range(30):
        msgs.append(Message("assistant", f"Noted trip {k} to Lima with {k} friends."))
        msgs.append(Message("user", f"Then trip {k + 1} went to Quito on day {k}."))
    assert not from_user(note) and from_user(msgs[-1])
    r = AutoCompressor(reversible=False).compress(msgs, budget=600, counter=COUNTER)
    assert r.trace[1].reason != "task"
    assert r.trace[3].reason == "task"  # the first thing the user said


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="ab/.", min_size=1, max_size=6), max_size=10, unique=True))
def test_a_listed_value_inside_another_is_not_listed_again(values):
    """The note lists a value once: not when it is found inside another listed one."""
    joined = "\n".join(values)
    assert _outermost(values) == [v for v in values if joined.count(v) == 1]


@st.composite
def _strict_histories(draw):
    """A request strict chat APIs accept: user turns, then the assistant's answer or
    its tool calls with their results, ending on a user turn or a tool result."""
    msgs = []
    turns = draw(st.integers(1, 8))
    for n in range(turns):
        msgs.append(Message("user", draw(texts(200))))
        for k in range(draw(st.integers(0, 3))):
            call = ToolCall(f"c{n}_{k}", "lookup", json.dumps({"q": draw(texts(40))}))
            msgs += [
                Message("assistant", draw(st.none() | texts(80)), tool_calls=(call,)),
                Message("tool", draw(texts(400)), tool_call_id=call.id),
            ]
        if (n < turns - 1 and msgs[-1].role == "user") or draw(st.booleans()):
            msgs.append(Message("assistant", draw(texts(200))))
    if msgs[-1].role == "assistant":
        msgs.append(Message("user", draw(texts(100))))
    return msgs


@settings(max_examples=50, deadline=None)
@given(_strict_histories(), st.floats(0.1, 0.9))
def test_the_output_ends_on_the_side_the_input_ended_on(msgs, fraction):
    # A session appends the next turn (the model's, after a user turn or a tool
    # result) right after a compaction's output: when the newest messages are folded,
    # a turn kept in place before them must not end the output in that turn's role.
    budget = max(int(COUNTER.count_messages(msgs) * fraction), 1)  # 0: no budget
    try:
        out = list(AutoCompressor().compress(msgs, budget=budget, counter=COUNTER).messages)
    except ctxfold.BudgetError:
        return
    assert turn_order_problems([*out, Message("assistant", "The next turn.")]) == []


@pytest.mark.parametrize("strategy", ["auto", "summarize"])
def test_the_newest_call_is_cut_in_place_with_valid_arguments_and_expands_back(
    strategy: str,
) -> None:
    """A system prompt that leaves little room and a newest exchange over it: the call's
    longest string argument is shortened (still valid JSON), the output ends on the
    result, and the original comes back from the store."""
    counter = get_counter("o200k_base")
    summary = " ".join(
        f"The customer reports problem {k} with booking ABC{k:03d}." for k in range(20)
    )
    msgs = [
        Message("system", "You are an airline agent. " + "Follow the policy. " * 200),
        Message("user", "My flight was cancelled; please hand me to a person."),
        Message("assistant", "I will transfer you now."),
        Message("user", "Yes, please transfer me."),
        Message(
            "assistant",
            None,
            tool_calls=(
                ToolCall("t1", "transfer_to_human_agents", json.dumps({"summary": summary})),
            ),
        ),
        Message("tool", "Transfer successful", tool_call_id="t1"),
    ]
    budget = counter.count_messages(msgs[:1]) + 150
    store = ctxfold.storage.MemoryStore()
    compressor = ctxfold.strategies.resolve_strategy(strategy, store=store, reversible=True)
    result = compressor.compress(msgs, budget=budget, counter=counter)
    out = list(result.messages)
    assert counter.count_messages(out) <= budget
    assert out[-1].role == "tool" and out[-1].tool_call_id == "t1"
    (call,) = out[-2].tool_calls
    args = json.loads(call.arguments)
    assert len(args["summary"]) < len(summary) and "..." in args["summary"]
    # written as a framework writes arguments back, so a LangChain round trip (args as
    # a dict, dumped again) counts the same tokens and stays within the budget
    assert call.arguments == json.dumps(args, ensure_ascii=False)
    assert result.trace[4].reason == "shortened:newest"
    assert list(ctxfold.expand(result, store=store).messages) == msgs


def _newest_result_of(share: float, budget: int) -> list[Message]:
    """An agent's run ending on a tool result whose unit (the call and the result) costs
    about ``share`` of the room the system prompt and the note's minimum leave."""

    msgs = agent_history(8)[:-1]
    room = budget - COUNTER.count_messages(msgs[:1]) - POLICY.note_overhead
    call = Message(
        "assistant", None, tool_calls=(ToolCall("run", "bash", json.dumps({"cmd": "pytest"})),)
    )
    lines: list[str] = []
    result = Message("tool", "", tool_call_id="run")
    while COUNTER.count_message(call) + COUNTER.count_message(result) < share * room:
        lines.append(f"tests/test_{len(lines)}.py::test_{len(lines)} FAILED code E{len(lines)}")
        result = Message("tool", "\n".join(lines), tool_call_id="run")
    return [*msgs, call, result]


@pytest.mark.parametrize("strategy", ["auto", "summarize"])
def test_a_newest_result_that_fits_the_room_is_kept_whole(strategy: str) -> None:
    """A newest tool result of 70% of the room fits: shown byte for byte (it used to be
    cut to 60% of the room), the rest folded reversibly, the output a valid request."""
    budget = 1500
    msgs = _newest_result_of(0.7, budget)
    store = ctxfold.storage.MemoryStore()
    compressor = ctxfold.strategies.resolve_strategy(strategy, store=store, reversible=True)
    result = compressor.compress(msgs, budget=budget, counter=COUNTER)
    out = list(result.messages)
    assert out[-2:] == msgs[-2:]  # byte for byte
    assert [d.reason for d in result.trace[-2:]] == ["recent", "recent"]
    assert COUNTER.count_messages(out) <= budget and turn_order_problems(out) == []
    check_continuation(msgs, out)
    if strategy == "auto":
        assert msgs[1] in out  # the task, short, still kept beside it
    assert list(ctxfold.expand(result, store=store).messages) == msgs


@pytest.mark.parametrize("strategy", ["auto", "summarize"])
def test_a_newest_result_over_the_room_alone_is_cut_in_place_and_expands_back(
    strategy: str,
) -> None:
    budget = 1500
    msgs = _newest_result_of(1.3, budget)
    store = ctxfold.storage.MemoryStore()
    compressor = ctxfold.strategies.resolve_strategy(strategy, store=store, reversible=True)
    result = compressor.compress(msgs, budget=budget, counter=COUNTER)
    out = list(result.messages)
    assert result.trace[-1].reason == "shortened:newest" and out[-1].tool_call_id == "run"
    assert COUNTER.count_messages(out) <= budget and turn_order_problems(out) == []
    check_continuation(msgs, out)
    assert list(ctxfold.expand(result, store=store).messages) == msgs


def test_an_assistant_turn_kept_in_place_never_opens_the_output():
    """An earlier note speaks as the user; the assistant's short answer after it is
    worth keeping in place, the task follows: folding the note must not leave the
    assistant opening the conversation (the note fills the gap between two user turns,
    so the answer is folded too)."""
    from ctxfold.result import note_message

    said = "user: My reservation number is PEP4E0 and I booked it in April with insurance "
    msgs = [
        Message("system", "You are an airline agent. " * 20),
        note_message("user", "note", "3 earlier messages condensed", (said + "for all. ") * 3),
        Message("assistant", "Travel insurance was not added to reservation PEP4E0."),
        Message(
            "user",
            "That can't be right. Everyone else in my family has insurance for their "
            "flight, please look again.",
        ),
        Message(
            "assistant",
            "Unfortunately, I cannot add travel insurance to an existing reservation or "
            "investigate further; I can transfer you to an agent.",
        ),
        Message("user", "No, I do not want to be transferred. Check again."),
    ]
    low = COUNTER.count_messages(msgs[:1]) + 40
    for budget in range(low, COUNTER.count_messages(msgs)):
        try:
            out = AutoCompressor(reversible=False).compress(msgs, budget=budget, counter=COUNTER)
        except ctxfold.BudgetError:
            continue
        assert turn_order_problems(list(out.messages)) == [], budget


@pytest.mark.parametrize("share", [0.8, 0.97])
def test_a_whole_newest_result_leaves_room_for_what_the_earlier_note_carried(share):
    """A session folds its last note again: a newest result kept whole beside it leaves
    the next note room for the identifiers that note listed (their only copy in view),
    so a result that fits beside them is whole and one that does not is cut."""
    from ctxfold.result import NOTE_KEY, is_note

    budget = 1500
    first = list(
        AutoCompressor(reversible=False)
        .compress(agent_history(12)[:-1], budget=budget, counter=COUNTER)
        .messages
    )
    note = next(m for m in first if is_note(m))
    listed = [v for v in note.metadata[NOTE_KEY]["listed"] if v in note.text]
    room = budget - COUNTER.count_messages(first[:1]) - 20  # ``Policy.note_overhead``
    call = Message("assistant", None, tool_calls=(ToolCall("run", "bash", "{}"),))
    result = Message("tool", "", tool_call_id="run")
    while COUNTER.count_message(call) + COUNTER.count_message(result) < share * room:
        result = Message(
            "tool", result.text + f"test_{len(result.text)} FAILED\n", tool_call_id="run"
        )
    msgs = [*first, call, result]
    out = AutoCompressor(reversible=False).compress(msgs, budget=budget, counter=COUNTER)
    shown = "\n".join(m.text for m in out.messages)
    assert len(listed) > 10 and all(v in shown for v in listed)
    whole = share < 0.9  # the listing takes more than a tenth of the room
    assert (out.messages[-1] == result) is whole
    check_continuation(msgs, list(out.messages))


def test_a_whole_newest_result_leaves_room_for_what_a_tool_showed_before():
    """The identifiers an earlier note listed because a tool showed them on lines of
    their own (reservation codes: what the agent acts on next), though nobody wrote
    them yet, keep their room when the note is folded again beside a newest result
    that would otherwise take it all."""
    from ctxfold.result import NOTE_KEY, is_note

    codes = ["JG7FMM", "LQ940Q", "2FBBAH", "X7BYG1", "EQ1G6C", "BOH180", "K3PZ0W", "9MUQ2R"]
    msgs = [
        Message("system", "You are an airline agent. Follow the policy. " * 30),
        Message("user", "Downgrade my reservations to economy, my id is ana_7781."),
    ]
    for k in range(4):
        call = ToolCall(f"c{k}", "list_reservations", json.dumps({"page": k}))
        shown = [{"reservation_id": c, "cabin": "business"} for c in codes[k * 2 : k * 2 + 2]]
        msgs += [
            Message("assistant", None, tool_calls=(call,)),
            Message("tool", json.dumps(shown), tool_call_id=f"c{k}"),
            Message("assistant", f"Page {k} lists two reservations; shall I look further?"),
            Message("user", "Yes, keep looking please."),
        ]
    budget = 500
    compressor = AutoCompressor(reversible=False)
    first = list(compressor.compress(msgs, budget=budget, counter=COUNTER).messages)
    note = next(m for m in first if is_note(m))
    listed = [v for v in note.metadata[NOTE_KEY]["listed"] if v in codes and v in note.text]
    assert len(listed) >= 4
    call = Message("assistant", None, tool_calls=(ToolCall("run", "get_policy", "{}"),))
    room = budget - COUNTER.count_messages(first[:1]) - POLICY.note_overhead
    text = ""
    while COUNTER.count_message(Message("tool", text, tool_call_id="run")) < 0.75 * room:
        text += "Changes to basic economy fares are not allowed after booking.\n"
    more = [*first, call, Message("tool", text, tool_call_id="run")]
    out = compressor.compress(more, budget=budget, counter=COUNTER)
    shown_now = "\n".join(m.text for m in out.messages)
    assert [v for v in listed if v not in shown_now] == []
    assert COUNTER.count_messages(list(out.messages)) <= budget


def test_a_chat_keeps_what_was_said_early_as_well_as_what_was_said_late():
    """A chat's older turns are memory: a fact said in its first sessions is asked
    about as often as one said last week, so the note weighs them alike (an agent's
    run weighs newer messages a little more: its latest results are its state)."""
    templates = [
        "My sister {n} moved to {c} in {y} to study marine biology.",
        "I adopted a beagle called {n} from the {c} shelter in {y}.",
        "{n} and I ran the {c} half marathon in {y}, it took us two hours.",
        "Our book club picked a novel by {n} set in {c} during {y}.",
        "I started learning the cello with {n}, a teacher from {c}, back in {y}.",
        "We painted a mural of {c} harbour with {n} for the {y} fair.",
    ]
    names = [
        "Lena",
        "Omar",
        "Priya",
        "Tomas",
        "Aiko",
        "Bruno",
        "Carla",
        "Dmitri",
        "Elif",
        "Femi",
        "Greta",
        "Hugo",
    ]
    cities = [
        "Porto",
        "Ghent",
        "Leeds",
        "Osaka",
        "Tartu",
        "Cusco",
        "Bergen",
        "Hobart",
        "Izmir",
        "Accra",
        "Kyiv",
        "Lyon",
    ]
    msgs = [Message("system", "You are Ben, Ana's friend.")]
    facts = []
    for k in range(12):  # the same kinds of fact in the first half and the second
        facts.append(templates[k % 6].format(n=names[k], c=cities[k], y=2000 + 3 * k))
        msgs += [
            Message("user", f"Hi Ben! Lovely weather today. {facts[-1]} How are you?", name="Ana"),
            Message("assistant", "Oh nice, that sounds great! I'm good, thanks.", name="Ben"),
            Message("user", "Glad to hear it. Talk soon!", name="Ana"),
            Message("assistant", "Talk soon, take care!", name="Ben"),
        ]
    budget = COUNTER.count_messages(msgs) // 4
    out = AutoCompressor().compress(msgs, budget=budget, counter=COUNTER)
    shown = "\n".join(m.text for m in out.messages)
    early = sum(f in shown for f in facts[:6])
    late = sum(f in shown for f in facts[6:])  # the newest turns stay whole besides
    assert early >= 3 and early >= late - 1, (early, late)
    assert COUNTER.count_messages(list(out.messages)) <= budget


def test_a_results_parts_are_not_glued_together_where_a_tag_between_is_left_out() -> None:
    """mini-SWE-agent frames a result as ``<returncode>1</returncode>`` then
    ``<output>...``: the note leaves the tags out and keeps the status and some lines,
    which stay apart (``1`` then ``def handler_9_0``, not ``1def handler_9_0``)."""
    msgs = [Message("system", "You are an agent."), Message("user", "Fix the getitem bug.")]
    for k in range(12):
        call = ToolCall(f"c{k}", "bash", json.dumps({"command": f"python check_{k}.py"}))
        body = "\n".join(f"def handler_{k}_{j}(x):\n    return x.item_{j}(key)" for j in range(30))
        result = f"<returncode>{k % 2}</returncode>\n<output>\n{body}\nAttributeError: x\n</output>"
        msgs += [
            Message("assistant", f"Step {k}.", tool_calls=(call,)),
            Message("tool", result, tool_call_id=f"c{k}"),
        ]
    msgs.append(Message("assistant", "Done."))
    out = ctxfold.compress(msgs, budget=COUNTER.count_messages(msgs) // 5, counter=COUNTER)
    note = next(m for m in out.messages if is_note(m)).text
    assert "def handler_" in note
    assert re.search(r"\ddef handler_", note) is None
