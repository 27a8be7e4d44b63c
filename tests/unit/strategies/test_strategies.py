"""The strategy family: summarize, semantic, hierarchical, hybrid, and how options,
profiles, configuration files and plugins become compressors."""

from __future__ import annotations

import asyncio
import json

import pytest

import ctxfold
from conftest import DATA_DIR, SKIP_NO_DATA
from ctxfold import (
    Cache,
    ConfigurationError,
    HierarchicalCompressor,
    HybridCompressor,
    Message,
    SemanticCompressor,
    SlidingWindow,
    SummarizerError,
    SummarizingCompressor,
    ToolCall,
    get_counter,
    normalize,
)
from ctxfold._registry import Registry
from ctxfold.testing import check_invariants
from ctxfold.testing.doubles import FakeEmbedder, FakeSummarizer
from ctxfold.validity import turn_order_problems

COUNTER = get_counter("o200k_base")


def chat(n: int, start: int = 0) -> list[Message]:
    msgs = []
    for k in range(start, start + n):
        msgs.append(
            Message("user", f"Question {k}: where did parcel P-{k:03d} go after depot {k}?")
        )
        msgs.append(Message("assistant", f"Parcel P-{k:03d} left depot {k} for Lyon on day {k}."))
    return msgs


SYSTEM = Message("system", "You track parcels.")


# ------------------------------------------------------------------------ summarize


def test_older_messages_become_one_marked_summary_never_a_user_turn():
    msgs = [SYSTEM, *chat(30)]
    fake = FakeSummarizer()
    r = SummarizingCompressor(summarizer=fake, cache=Cache()).compress(
        msgs, budget=COUNTER.count_messages(msgs) // 3, counter=COUNTER
    )
    notes = [m for m in r.messages if m.metadata.get("ctxfold")]
    assert len(notes) == 1 and notes[0].role == "system"
    assert notes[0].metadata["ctxfold"]["kind"] == "summary"
    assert notes[0].text.startswith("[ctxfold: 56 earlier messages summarized]\n")
    assert r.messages[0] == SYSTEM and r.messages[-1] == msgs[-1]
    assert r.stats.usage["summarizer_calls"] == 1 and fake.calls == 1
    assert r.stats.usage["summarizer_tokens"] > 0
    with pytest.raises(ConfigurationError, match="role"):
        SummarizingCompressor(role="user")


def test_the_running_summary_is_extended_with_new_messages_only():
    cache = Cache()
    fake = FakeSummarizer()
    first = [SYSTEM, *chat(30)]
    budget = COUNTER.count_messages(first) // 3
    SummarizingCompressor(summarizer=fake, cache=cache).compress(
        first, budget=budget, counter=COUNTER
    )
    grown = [*first, *chat(6, start=30)]
    r = SummarizingCompressor(summarizer=fake, cache=cache).compress(
        grown, budget=budget, counter=COUNTER
    )
    assert fake.calls == 2
    sent = fake.texts[1]
    assert sent.startswith("Earlier summary:\n")
    assert "Question 0:" not in sent.split("New messages:")[1]  # already summarized
    assert r.stats.usage["cache_hits"] >= 1
    # the same history again: nothing new is sent
    again = SummarizingCompressor(summarizer=fake, cache=cache).compress(
        grown, budget=budget, counter=COUNTER
    )
    assert fake.calls == 2 and "summarizer_calls" not in again.stats.usage
    assert again.to_openai() == r.to_openai()


def test_running_summaries_persist_in_a_sqlite_file(tmp_path):
    msgs = [SYSTEM, *chat(30)]
    budget = COUNTER.count_messages(msgs) // 3
    spec = f"sqlite:///{tmp_path / 'cache.db'}"
    one, two = FakeSummarizer(), FakeSummarizer()
    a = SummarizingCompressor(summarizer=one, cache=spec).compress(
        msgs, budget=budget, counter=COUNTER
    )
    b = SummarizingCompressor(summarizer=two, cache=spec).compress(
        msgs, budget=budget, counter=COUNTER
    )
    assert one.calls == 1 and two.calls == 0 and a.to_openai() == b.to_openai()


@pytest.mark.parametrize("fake", [FakeSummarizer(fail=True), FakeSummarizer(empty=True)])
def test_a_failing_summarizer_raises_and_writes_no_summary(fake):
    msgs = [SYSTEM, *chat(30)]
    snapshot = list(msgs)
    with pytest.raises(SummarizerError, match=r"(?i)nothing was summarized"):
        SummarizingCompressor(summarizer=fake, cache=False).compress(
            msgs, budget=COUNTER.count_messages(msgs) // 3, counter=COUNTER
        )
    assert msgs == snapshot


def test_a_callable_or_async_summarizer_works_like_an_object():
    seen: list[list[Message]] = []

    def llm(messages: list[Message]) -> str:
        seen.append(messages)
        return "Parcels went to Lyon."

    class AsyncOnly:
        cache_id = "async-only"

        async def asummarize(self, text: str, *, max_tokens: int) -> str:
            return "Parcels went to Lyon (async)."

    msgs = [SYSTEM, *chat(30)]
    budget = COUNTER.count_messages(msgs) // 3
    r = SummarizingCompressor(summarizer=llm, cache=False).compress(
        msgs, budget=budget, counter=COUNTER
    )
    assert [m.role for m in seen[0]] == ["system", "user"]
    assert "at most" in seen[0][0].text and "Question 0:" in seen[0][1].text
    assert "Parcels went to Lyon." in r.messages[1].text
    c = SummarizingCompressor(summarizer=AsyncOnly(), cache=False)
    sync = c.compress(msgs, budget=budget, counter=COUNTER)
    async_ = asyncio.run(c.acompress(msgs, budget=budget, counter=COUNTER))
    assert "(async)" in sync.messages[1].text and sync.to_openai() == async_.to_openai()
    with pytest.raises(ConfigurationError, match="summarizer must"):
        SummarizingCompressor(summarizer=42)


# ------------------------------------------------------------------------- semantic


def repeated_observations() -> list[Message]:
    log = "\n".join(f"tests/test_api.py::test_case_{j} PASSED" for j in range(40))
    msgs = [SYSTEM, Message("user", "Run the tests until they pass.")]
    for k in range(3):
        cid = f"c{k}"
        msgs.append(
            Message(
                "assistant",
                f"Run {k}.",
                tool_calls=(ToolCall(cid, "bash", json.dumps({"cmd": "pytest -q"})),),
            )
        )
        msgs.append(Message("tool", f"{log}\nrun {k}: 40 passed", tool_call_id=cid))
    msgs.append(Message("assistant", "All tests pass."))
    return msgs


def test_near_duplicate_units_merge_into_the_newest_and_are_traced():
    msgs = repeated_observations()
    embedder = FakeEmbedder()
    cache = Cache()
    budget = COUNTER.count_messages(msgs) // 2
    r = SemanticCompressor(embedder=embedder, cache=cache).compress(
        msgs, budget=budget, counter=COUNTER
    )
    merged = [d for d in r.trace if d.action == "deduplicated"]
    assert [d.index for d in merged] == [2, 3, 4, 5]
    assert {d.reason for d in merged} == {"merged_into:6"}
    assert [m for m in r.messages] == [msgs[0], msgs[1], *msgs[6:]]
    assert r.stats.usage["embedder_calls"] == 1
    again = SemanticCompressor(embedder=embedder, cache=cache).compress(
        msgs, budget=budget, counter=COUNTER
    )
    assert embedder.calls == 1 and "embedder_calls" not in again.stats.usage
    assert again.stats.usage["cache_hits"] > 0


def test_short_units_are_never_merged():
    msgs = [SYSTEM]
    for _ in range(12):
        msgs += [Message("user", "yes"), Message("assistant", "ok " * 60)]
    r = SemanticCompressor(embedder=FakeEmbedder(), min_tokens=20, fit="none").compress(
        msgs, budget=10, counter=COUNTER
    )
    kept_users = [m for m in r.messages if m.role == "user"]
    assert len(kept_users) == 12  # each "yes" is its own unit, under min_tokens


def test_the_default_threshold_is_the_embedders_own():
    class Strict(FakeEmbedder):
        duplicate_threshold = 1.0  # identical texts only

    assert SemanticCompressor().threshold == ctxfold.models.TfidfEmbedder.duplicate_threshold == 0.8
    assert SemanticCompressor(embedder=FakeEmbedder()).threshold == 0.9  # none of its own
    assert SemanticCompressor(embedder=FakeEmbedder(), threshold=0.5).threshold == 0.5
    # The threshold decides: the three test runs differ in one line, so a strict
    # embedder keeps them apart where the fallback merges them.
    msgs = repeated_observations()
    budget = COUNTER.count_messages(msgs)
    strict = SemanticCompressor(embedder=Strict(), fit="none").compress(
        msgs, budget=budget - 1, counter=COUNTER
    )
    assert strict.decision_counts().get("deduplicated", 0) == 0
    with pytest.raises(ConfigurationError, match="threshold"):
        SemanticCompressor(embedder=FakeEmbedder(), threshold=1.5)


def test_semantic_with_the_real_default_embedder_on_agent_traces():
    if DATA_DIR is None:
        pytest.skip(SKIP_NO_DATA)
    from ctxfold.testing import load_conversations

    convs = list(load_conversations(DATA_DIR / "mini_swe_agent.jsonl"))[:5]
    for _, msgs in convs:
        budget = COUNTER.count_messages(msgs) // 2
        r = check_invariants(SemanticCompressor(cache=False), msgs, budget=budget)
        assert r is not None and r.stats.fits
        kept = {d.index for d in r.trace if d.action == "kept"}
        for d in r.trace:
            if d.action == "deduplicated":
                assert int(d.reason.split(":")[1]) in kept


# --------------------------------------------------------------------- hierarchical


def test_newer_units_win_when_all_else_is_equal_and_errors_can_outweigh_recency():
    same = [Message("user", "Please check the build log again for me today.")] * 1
    msgs = [SYSTEM]
    for k in range(6):
        msgs += [*same, Message("assistant", f"Checked it, all fine here, round {k} done.")]
    budget = COUNTER.count_messages(msgs) // 2
    r = HierarchicalCompressor().compress(msgs, budget=budget, counter=COUNTER)
    kept = [d.index for d in r.trace if d.action == "kept" and d.index > 0]
    assert kept == sorted(kept) and kept[-1] == len(msgs) - 1
    assert min(kept) > 2  # the oldest go first

    err = list(msgs)
    err[2] = Message("assistant", "Build failed: ValueError in src/app/build.py line 12.")
    weighted = HierarchicalCompressor(weights={"errors": 10.0}).compress(
        err, budget=budget, counter=COUNTER
    )
    assert weighted.trace[2].action == "kept"
    with pytest.raises(ConfigurationError, match="unknown weight 'speed'"):
        HierarchicalCompressor(weights={"speed": 1.0})


def test_units_holding_facts_outrank_small_talk_of_any_length():
    msgs = [SYSTEM]
    for k in range(10):
        msgs.append(Message("user", "Haha, wow, that sounds really great, thanks so much!"))
        msgs.append(
            Message(
                "assistant",
                f"Parcel P-{k:03d} left depot {k} for Lyon on 2024-03-{k + 1:02d}; the "
                f"manifest is in /srv/manifests/p{k:03d}.csv and weighs {k + 3} kg.",
            )
        )
    budget = COUNTER.count_messages(msgs) // 2
    r = HierarchicalCompressor().compress(msgs, budget=budget, counter=COUNTER)
    kept = [msgs[d.index] for d in r.trace if d.action == "kept" and d.index > 0]
    facts = [m for m in kept if "Parcel" in m.text]
    # As many as fit beside the notes that keep turns apart; small talk only fills the
    # room left.
    assert len(facts) == 5
    notes = [m for m in r.messages if m.metadata.get("ctxfold")]
    assert all(m.text.startswith("[ctxfold: ") and m.role == "user" for m in notes)
    assert r.stats.fits and [m for m in r.messages if m not in notes] == [SYSTEM, *kept]
    assert not turn_order_problems(list(r.messages))


def test_hierarchical_summarizes_what_it_leaves_out():
    msgs = [SYSTEM, *chat(30)]
    r = HierarchicalCompressor(summarizer=FakeSummarizer(), cache=False).compress(
        msgs, budget=COUNTER.count_messages(msgs) // 3, counter=COUNTER
    )
    assert any(m.metadata.get("ctxfold", {}).get("kind") == "summary" for m in r.messages)
    assert {d.action for d in r.trace} == {"kept", "summarized"}

    class Verbose:  # ignores max_tokens, as LLMs do: the summary is shortened to fit
        def summarize(self, text: str, *, max_tokens: int) -> str:
            return text + " In short, parcels moved."

    long = HierarchicalCompressor(summarizer=Verbose(), cache=False).compress(
        msgs, budget=COUNTER.count_messages(msgs) // 3, counter=COUNTER
    )
    assert long.stats.fits and long.decision_counts()["summarized"] > 0


# --------------------------------------------------------------------------- hybrid


def test_a_chain_reports_against_the_original_and_names_the_deciding_step():
    msgs = repeated_observations() + chat(20)
    before = COUNTER.count_messages(msgs)
    chain = HybridCompressor([SemanticCompressor(embedder=FakeEmbedder(), fit="none"), "auto"])
    r = chain.compress(msgs, budget=before // 4, counter=COUNTER)
    assert r.stats.tokens_before == before and r.stats.fits
    steps = {d.step for d in r.trace}
    assert "hybrid/0:semantic" in steps and "hybrid/1:auto" in steps
    assert r.trace[2].action == "deduplicated" and r.trace[2].step == "hybrid/0:semantic"
    assert r.stats.savings["step:0:semantic"] > 0
    with pytest.raises(ConfigurationError, match="list of strategy options"):
        HybridCompressor("auto")


# ------------------------------------------------------------- options and plugins


def test_normalize_accepts_every_documented_form():
    assert normalize(None) is None and normalize(False) is None
    assert isinstance(normalize(True), ctxfold.AutoCompressor)
    assert isinstance(normalize("semantic"), SemanticCompressor)
    assert isinstance(normalize(SlidingWindow), SlidingWindow)
    inst = SlidingWindow(keep_first=2)
    assert normalize(inst) is inst
    assert normalize(("sliding_window", {"keep_first": 3})).keep_first == 3
    assert normalize({"strategy": "sliding_window", "keep_first": 4}).keep_first == 4
    assert normalize({"strategy": "auto"}, recent_share=0.2).recent_share == 0.2
    assert isinstance(normalize("fast"), SlidingWindow)
    assert isinstance(normalize("balanced"), ctxfold.AutoCompressor)
    assert isinstance(normalize("quality"), HybridCompressor)
    assert isinstance(normalize("cost"), SummarizingCompressor)
    for bad in (3, ["auto"], {"keep_first": 1}):
        with pytest.raises(ConfigurationError, match="strategy"):
            normalize(bad)
    with pytest.raises(ConfigurationError, match="None/False"):
        normalize(3.5)


def test_configuration_files_in_toml_and_yaml(tmp_path):
    toml = tmp_path / "ctxfold.toml"
    toml.write_text('[ctxfold]\nstrategy = "hybrid"\nsteps = ["semantic", "auto"]\n')
    chain = ctxfold.load_config(toml)
    assert isinstance(chain, HybridCompressor)
    assert [s.name for s in chain.steps] == ["semantic", "auto"]
    yml = tmp_path / "ctxfold.yaml"
    yml.write_text("ctxfold:\n  profile: fast\n")
    assert isinstance(ctxfold.load_config(yml), SlidingWindow)
    bad = tmp_path / "bad.toml"
    bad.write_text("strategy = [")
    with pytest.raises(ConfigurationError, match="not valid TOML"):
        ctxfold.load_config(bad)
    with pytest.raises(ConfigurationError, match=r"use a \.toml, \.yaml"):
        ctxfold.load_config(tmp_path / "x.ini")


def test_a_plugin_package_adds_a_strategy_through_an_entry_point(tmp_path, monkeypatch):
    import ctxfold.strategies.registry as reg

    (tmp_path / "ctxplug.py").write_text(
        "from ctxfold import SlidingWindow\n\nclass Plug(SlidingWindow):\n    name = 'plug'\n"
    )
    info = tmp_path / "ctxplug-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ctxplug\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[ctxfold.strategies]\nplug = ctxplug:Plug\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(
        reg, "REGISTRY", Registry("strategy", reg.REGISTRY.view(), group="ctxfold.strategies")
    )
    assert normalize("plug").name == "plug"
    assert "plug" in ctxfold.strategies.registered()


def test_semantic_dedup_keeps_turns_alternating_with_the_real_turn_or_a_note():
    msgs = [SYSTEM]
    for k in range(6):
        msgs.append(Message("user", f"Status of parcel P-{k:03d} in depot {k}, please?"))
        msgs.append(Message("assistant", "It is on its way to Lyon and due by Friday. " * 3))
    r = SemanticCompressor(embedder=FakeEmbedder(), fit="none").compress(
        msgs, budget=COUNTER.count_messages(msgs) - 1, counter=COUNTER
    )
    assert r.decision_counts()["deduplicated"] > 0
    assert not turn_order_problems(list(r.messages))
    users = [m for m in r.messages if m.role == "user"]
    assert len(users) == 6  # every question stays; notes sit between them
    notes = [m for m in r.messages if m.metadata.get("ctxfold")]
    assert notes and all(m.role == "assistant" and "left out" in m.text for m in notes)


def test_an_unknown_option_names_the_closest_and_every_valid_one():
    msgs = [{"role": "user", "content": "hello"}]
    with pytest.raises(ConfigurationError) as err:
        ctxfold.compress(msgs, budget=100, strategy="summarize", recent_shar=0.3)
    message = str(err.value)
    assert "no option 'recent_shar' (did you mean 'recent_share'?)" in message
    assert "its options: cache, " in message and "summarizer" in message
    with pytest.raises(ConfigurationError, match="did you mean 'auto'"):
        ctxfold.compress(msgs, budget=100, strategy="autto")
    # a plug-in factory that passes **kwargs on to what it cannot name still says why
    ctxfold.register_strategy("forwarding", lambda **kw: ctxfold.AutoCompressor(**kw))
    try:
        with pytest.raises(ConfigurationError, match=r"rejected its options.*nope"):
            ctxfold.compress(msgs, budget=100, strategy="forwarding", nope=1)
    finally:
        ctxfold.strategies.registry.REGISTRY.unregister("forwarding")
