"""CompressionPostprocessor in a query engine, the memory block in LlamaIndex's Memory,
and LlamaIndex models as ctxfold's summarizer and embedder."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.memory import Memory
from llama_index.core.schema import NodeWithScore, TextNode

import ctxfold
from conftest import example_conversations, long_chat
from llamaindex_ctx import (
    CompressedHistoryBlock,
    CompressionPostprocessor,
    LlamaIndexEmbedder,
    summarizer_from,
    to_llamaindex,
)

COUNTER = ctxfold.TiktokenCounter()

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")  # Memory's aiosqlite


def _doc(k: int) -> str:
    return (
        f"Incident INC-{4000 + k} hit the billing service on day {k}. "
        + "The team met and talked about the weather and lunch plans at length. " * 6
        + f"Root cause: the cron job /etc/cron.d/rotate_{k} removed /var/log/billing_{k}.log. "
        + "Everyone agreed the meeting had been pleasant and long. " * 4
    )


def _nodes() -> list[NodeWithScore]:
    nodes = [
        NodeWithScore(
            node=TextNode(text=_doc(k), id_=f"n{k}", metadata={"day": k}), score=1 - k / 10
        )
        for k in range(5)
    ]
    dup = NodeWithScore(node=TextNode(text=_doc(0), id_="copy", metadata={"day": 0}), score=0.05)
    return [*nodes, dup]


def test_nodes_fit_the_budget_and_keep_their_ids_metadata_and_scores() -> None:
    nodes = _nodes()
    out = CompressionPostprocessor(budget=400).postprocess_nodes(nodes, query_str="root cause?")
    assert sum(COUNTER.count_text(n.node.get_content()) for n in out) <= 400
    assert [n.node.id_ for n in out] == ["n0", "n1", "n2", "n3", "n4"]  # the copy went
    for n in out:
        k = int(n.node.id_[1:])
        assert n.node.metadata == {"day": k} and n.score == pytest.approx(1 - k / 10)
        assert f"/etc/cron.d/rotate_{k}" in n.node.get_content()  # what matters stays
        assert "weather" not in n.node.get_content()
    assert [n.node.get_content() for n in nodes[:1]] == [_doc(0)]  # input untouched


def test_nodes_that_fit_come_back_unchanged_and_a_tiny_budget_keeps_the_best() -> None:
    nodes = _nodes()[:2]
    assert CompressionPostprocessor(budget=10_000).postprocess_nodes(nodes) == nodes
    out = CompressionPostprocessor(budget=60, min_tokens=40).postprocess_nodes(nodes)
    assert [n.node.id_ for n in out] == ["n0"]
    with pytest.raises(ctxfold.ConfigurationError):
        CompressionPostprocessor(budget=-1)


def test_a_node_of_long_sentences_is_cut_to_its_share_never_emptied() -> None:
    # Forty sentences of about 45 tokens into 40 or 162: an estimate loop once gave
    # up and sent the LLM an empty node; the core's exact-fit shortening keeps the
    # best that fits, cutting the best sentence when none fits whole.
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    text = " ".join(
        f"Sentence {k} on host db-{k}.internal: "
        + " ".join(words[(k + i) % 6] for i in range(30))
        + "."
        for k in range(40)
    )
    node = NodeWithScore(node=TextNode(text=text, id_="long"), score=1.0)
    for budget in (40, 162):
        (out,) = CompressionPostprocessor(budget=budget).postprocess_nodes([node])
        content = out.node.get_content()
        assert 0.5 * budget <= COUNTER.count_text(content) <= budget, (budget, content)
        assert "db-" in content


def test_a_query_engine_answers_from_the_compressed_nodes() -> None:
    docs = [TextNode(text=_doc(k), id_=f"n{k}") for k in range(4)]
    index = VectorStoreIndex(docs, embed_model=MockEmbedding(embed_dim=8))
    engine = index.as_query_engine(
        llm=MockLLM(),
        similarity_top_k=4,
        node_postprocessors=[CompressionPostprocessor(budget=300)],
    )
    response = engine.query("What removed the billing log?")
    sources = response.source_nodes
    assert len(sources) == 4 and sum(COUNTER.count_text(n.get_content()) for n in sources) <= 300
    assert "/etc/cron.d/rotate_" in str(response)  # MockLLM echoes its prompt
    again = asyncio.run(engine.aquery("What removed the billing log?"))
    assert [n.node.id_ for n in again.source_nodes] == [n.node.id_ for n in sources]


def test_the_block_gives_memory_the_older_history_compressed() -> None:
    chat = []
    for k in range(30):
        chat.append(ChatMessage(role="user", content=f"Day {k}: status of ticket OPS-{100 + k}?"))
        chat.append(
            ChatMessage(
                role="assistant",
                content=f"OPS-{100 + k} is with Priya; the fix is in deploy/release_{k}.yaml. "
                + "We also chatted about the weather for a while. " * 3,
            )
        )
    block = CompressedHistoryBlock(token_limit=600)
    memory = Memory.from_defaults(
        token_limit=2000, token_flush_size=300, chat_history_token_ratio=0.5, memory_blocks=[block]
    )
    memory.put_messages(chat)
    got = memory.get()
    context = got[0].content or ""
    assert got[0].role.value == "system" and "<compressed_history>" in context
    shown = context.split("<compressed_history>")[1].split("</compressed_history>")[0].strip()
    assert COUNTER.count_text(shown) <= 600
    assert "OPS-100" in shown and "deploy/release_0.yaml" in shown  # the oldest turn
    assert len(block.session) > 0 and len(got) < len(chat)
    assert asyncio.run(block.atruncate(shown, 10_000)) is None
    assert COUNTER.count_text(asyncio.run(block.atruncate(shown, 300)) or "") <= 300
    # Memory may truncate the block (priority 0 would forbid it): over its limit, the
    # block is rendered again smaller, not sent whole
    sizes = []
    for priority in (0, None):
        given = {} if priority is None else {"priority": priority}
        tight = Memory.from_defaults(
            token_limit=1500,
            token_flush_size=300,
            chat_history_token_ratio=0.5,
            memory_blocks=[CompressedHistoryBlock(token_limit=2000, **given)],
        )
        tight.put_messages(chat)
        context = tight.get()[0].content or ""
        kept = context.split("<compressed_history>")[1].split("</compressed_history>")[0]
        sizes.append(COUNTER.count_text(kept.strip()))
    assert 0 < sizes[1] < sizes[0] - 500


def test_a_llamaindex_llm_writes_the_note_and_embeddings_serve_semantic() -> None:
    class Fixed(MockLLM):
        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            return super().complete("SUMMARY: rule L060 now names the function.", formatted=True)

    _, msgs = next((n, m) for n, m in example_conversations() if "sqlfluff" in n)
    budget = COUNTER.count_messages(msgs) // 4
    result = ctxfold.compress(
        msgs, budget=budget, strategy="summarize", summarizer=summarizer_from(Fixed())
    )
    assert any("SUMMARY: rule L060" in m.text for m in result.messages)
    embedder = LlamaIndexEmbedder(MockEmbedding(embed_dim=8))
    rows = embedder.embed(["a", "b"])
    assert rows.shape == (2, 8) and np.allclose(np.linalg.norm(rows, axis=1), 1.0)
    assert embedder.embed([]).shape == (0, 8)
    out = ctxfold.compress(
        msgs, budget=budget, strategy="semantic", embedder=embedder, overflow="best_effort"
    )
    assert out.stats.tokens_after <= COUNTER.count_messages(msgs)
    for bad in (lambda: summarizer_from(object()), lambda: LlamaIndexEmbedder(object())):  # type: ignore[arg-type]
        with pytest.raises(ctxfold.ConfigurationError):
            bad()


def test_the_block_recalls_for_the_question_memory_is_asked_with() -> None:
    chat = to_llamaindex(long_chat())
    block = CompressedHistoryBlock(token_limit=300, strategy="sliding_window")
    memory = Memory.from_defaults(
        token_limit=1200, token_flush_size=200, chat_history_token_ratio=0.3, memory_blocks=[block]
    )
    memory.put_messages(chat)
    plain = memory.get()[0].content or ""
    asked = memory.get(input="Which gym locker is mine?")[0].content or ""
    assert "sauna" not in plain  # the flushed history's newest turns alone
    shown = asked.split("<compressed_history>")[1].split("</compressed_history>")[0]
    assert "sauna" in shown and COUNTER.count_text(shown.strip()) <= 300


def test_a_thinking_block_crosses_llamaindex_whole_and_counted():
    """An Anthropic thinking block became an empty ThinkingBlock (text and signature
    lost); LlamaIndex's own ThinkingBlock counted nothing."""
    from llama_index.core.base.llms.types import ChatMessage, ThinkingBlock

    import ctxfold
    from llamaindex_ctx import from_llamaindex, to_llamaindex

    thought = {"type": "thinking", "thinking": "Check the last page. " * 50, "signature": "sig"}
    given = ctxfold.from_anthropic(
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": [thought]}]
    )
    there = to_llamaindex(given)
    block = there[1].blocks[0]
    assert isinstance(block, ThinkingBlock) and block.content == thought["thinking"]
    assert block.additional_information["signature"] == "sig"
    back = from_llamaindex(there)
    assert back == given and ctxfold.to_anthropic(back)[1][1]["content"] == [thought]
    native = ChatMessage(role="assistant", blocks=[ThinkingBlock(content="Check. " * 100)])
    counter = ctxfold.get_counter("o200k_base")
    assert counter.count_messages(from_llamaindex([native])) > counter.count_text("Check. " * 100)
    assert to_llamaindex(from_llamaindex([native]))[0] == native


def test_a_part_llamaindex_has_no_block_for_is_a_typed_error():
    import pytest

    import ctxfold
    from llamaindex_ctx import to_llamaindex

    redacted = {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "x"}]}
    with pytest.raises(ctxfold.InvalidMessageError, match="no block for a 'redacted_thinking'"):
        to_llamaindex(ctxfold.from_anthropic([{"role": "user", "content": "q"}, redacted]))
