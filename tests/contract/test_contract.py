"""Every built-in compressor passes the shared contract; the contract catches breakage."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import pytest

from conftest import EXAMPLES
from ctxfold import BaseCompressor, Message, SlidingWindow
from ctxfold.testing import CompressorContract, ContractViolation, check_invariants


class TestSlidingWindow(CompressorContract):
    example_files = tuple(str(p) for p in EXAMPLES)

    def make_compressor(self):
        return SlidingWindow()


class TestSlidingWindowKeepFirstBestEffort(CompressorContract):
    example_files = tuple(str(p) for p in EXAMPLES)
    budget_fractions = (0.5, 0.1, 0.0)

    def make_compressor(self):
        return SlidingWindow(keep_first=1, overflow="best_effort")


# ---- the contract must be able to fail: deliberately broken compressors -------------

HISTORY = [
    Message("system", "be brief"),
    Message("user", "first question " * 20),
    Message("assistant", "first answer " * 20),
    Message("user", "second question " * 20),
    Message("assistant", "second answer"),
]


class _Broken(BaseCompressor):
    name = "broken"

    def __init__(self, how: str) -> None:
        self.how = how
        self.calls = 0

    def compact(self, conv):

        messages = conv.messages
        from ctxfold import Decision

        self.calls += 1
        keep: Sequence[int] = range(len(messages))
        if self.how == "drops_system":
            keep = [len(messages) - 1]
        elif self.how == "over_budget":
            keep = range(len(messages))
        elif self.how == "nondeterministic":
            keep = [0, len(messages) - 1] if self.calls % 2 else [0, len(messages) - 2]
        elif self.how == "reorders":
            keep = [0, len(messages) - 1, len(messages) - 2]
        elif self.how == "mutates":
            messages[1] = Message("user", "overwritten")
            object.__setattr__(messages[1], "content", "x")
            keep = [0, len(messages) - 1]
        out = [messages[i] for i in keep]
        trace = [
            Decision(i, "kept" if i in keep else "dropped", "test", 0, 0, self.name)
            for i in range(len(messages))
        ]
        return out, trace, {}


@pytest.mark.parametrize(
    ("how", "invariant"),
    [
        ("drops_system", "pinned"),
        ("over_budget", "budget"),
        ("nondeterministic", "deterministic"),
        ("reorders", "order"),
    ],
)
def test_the_contract_catches_a_broken_compressor(how, invariant):
    with pytest.raises(ContractViolation, match=invariant):
        check_invariants(_Broken(how), HISTORY, budget=80)


def test_the_contract_catches_mutation_of_the_input():
    class Mutates(BaseCompressor):
        name = "mutates"

        def compact(self, conv):

            messages = conv.messages
            from ctxfold import Decision

            object.__setattr__(messages[1], "content", "mutated in place")
            return (
                messages[:1] + messages[-1:],
                [Decision(i, "kept", "t", 0, 0, self.name) for i in range(len(messages))],
                {},
            )

    with pytest.raises(ContractViolation, match="pure"):
        check_invariants(Mutates(), copy.deepcopy(HISTORY), budget=60)


def test_the_contract_catches_a_split_tool_exchange():
    from ctxfold import ToolCall

    msgs = [
        Message("user", "run it " * 30),
        Message("assistant", None, tool_calls=(ToolCall("c1", "bash", "{}"),)),
        Message("tool", "output " * 30, tool_call_id="c1"),
        Message("assistant", "ok"),
    ]

    class DropsResult(BaseCompressor):
        name = "drops_result"

        def compact(self, conv):

            messages = conv.messages
            from ctxfold import Decision

            keep = [1, 3]
            return (
                [messages[i] for i in keep],
                [
                    Decision(i, "kept" if i in keep else "dropped", "t", 0, 0, self.name)
                    for i in range(len(messages))
                ],
                {},
            )

    with pytest.raises(ContractViolation, match="tool-call integrity"):
        check_invariants(DropsResult(), msgs, budget=40)


class TestAuto(CompressorContract):
    example_files = tuple(str(p) for p in EXAMPLES)

    def make_compressor(self):
        from ctxfold import AutoCompressor

        return AutoCompressor()


# Every layer and adapter combination keeps the contract too (on the bundled examples and
# generated histories; the full shared data runs for the default above).
def _combo(name: str, **options):
    from ctxfold import AutoCompressor

    class Combo(CompressorContract):
        example_files = tuple(str(p) for p in EXAMPLES)
        budget_fractions = (1.0, 0.3, 0.1, 0.03)
        max_examples = 25

        def conversations(self):
            from ctxfold.testing import load_conversations

            return [c for f in self.example_files for c in load_conversations(f)]

        def make_compressor(self):
            return AutoCompressor(**options)

    Combo.__name__ = Combo.__qualname__ = f"TestAuto_{name}"
    return Combo


def _layer_combos():
    from ctxfold import Layers
    from ctxfold.text.adapters import JsonAdapter, LogAdapter, ToolOutputAdapter

    return {
        "no_layers": {"layers": Layers(dedup=False, whitespace=False, json=False, truncate=False)},
        "all_encodings": {"layers": Layers(codebook=True, static_codebook=True, path_aliases=True)},
        "tight_truncation": {"layers": Layers(truncate_lines=12, truncate_head=4, truncate_tail=4)},
        "no_adapters": {"adapters": []},
        "some_adapters": {"adapters": [JsonAdapter(), LogAdapter(), ToolOutputAdapter()]},
        "no_recent_no_note": {"recent_share": 0.0, "digest_share": 0.0, "task_share": 0.0},
    }


for _name, _opts in _layer_combos().items():
    globals()[f"TestAuto_{_name}"] = _combo(_name, **_opts)


# ---- the strategy family, with deterministic fake models ------------------------------


class TestSummarize(CompressorContract):
    example_files = tuple(str(p) for p in EXAMPLES)
    budget_fractions = (1.0, 0.3, 0.1, 0.02)

    def make_compressor(self):
        from ctxfold import SummarizingCompressor
        from ctxfold.testing.doubles import FakeSummarizer

        return SummarizingCompressor(summarizer=FakeSummarizer())


class TestSummarizeExtractive(CompressorContract):
    example_files = tuple(str(p) for p in EXAMPLES)
    budget_fractions = (0.3, 0.1)
    max_examples = 25

    def make_compressor(self):
        from ctxfold import SummarizingCompressor

        return SummarizingCompressor()


class TestSemantic(CompressorContract):
    example_files = tuple(str(p) for p in EXAMPLES)
    budget_fractions = (1.0, 0.5, 0.1, 0.02)

    def make_compressor(self):
        from ctxfold import SemanticCompressor
        from ctxfold.testing.doubles import FakeEmbedder

        return SemanticCompressor(embedder=FakeEmbedder(), threshold=0.8)


class TestHierarchical(CompressorContract):
    example_files = tuple(str(p) for p in EXAMPLES)
    budget_fractions = (1.0, 0.3, 0.1, 0.02)

    def make_compressor(self):
        from ctxfold import HierarchicalCompressor
        from ctxfold.testing.doubles import FakeSummarizer

        return HierarchicalCompressor(summarizer=FakeSummarizer())


class TestHierarchicalNoSummary(CompressorContract):
    example_files = tuple(str(p) for p in EXAMPLES)
    budget_fractions = (0.3, 0.05)
    max_examples = 25

    def make_compressor(self):
        from ctxfold import HierarchicalCompressor

        return HierarchicalCompressor(overflow="best_effort")


class TestHybrid(CompressorContract):
    example_files = tuple(str(p) for p in EXAMPLES)
    budget_fractions = (1.0, 0.3, 0.1, 0.02)

    def make_compressor(self):
        from ctxfold import HybridCompressor, SemanticCompressor
        from ctxfold.testing.doubles import FakeEmbedder

        return HybridCompressor([SemanticCompressor(embedder=FakeEmbedder(), fit="none"), "auto"])
