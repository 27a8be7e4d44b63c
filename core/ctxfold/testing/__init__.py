"""Test helpers for compressors: the shared contract and the checks behind it.

Every compressor, built in or third-party, must keep the invariants of the design.
Subclass :class:`CompressorContract` in a pytest module to check one::

    from ctxfold.testing import CompressorContract

    class TestMyCompressor(CompressorContract):
        def make_compressor(self):
            return MyCompressor()

:func:`check_invariants` runs every check on one history and budget, for use in your
own tests. The hypothesis strategies live in :mod:`ctxfold.testing.strategies`
(``pip install 'ctxfold[dev]'``).
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar, NoReturn

from ..contract import Compressor, CounterSpec
from ..exceptions import BudgetError
from ..messages import Message
from ..result import CompressionResult, is_note, without_recall
from ..tokens import get_counter
from ..units import group_units
from ..validity import SYSTEM_ROLES, turn_order_problems
from ..wire import to_anthropic
from ..wire.openai import as_messages, from_openai, to_openai

__all__ = [
    "CompressorContract",
    "ContractViolation",
    "check_continuation",
    "check_invariants",
    "check_tool_integrity",
    "find_data_dir",
    "full_sweep",
    "load_conversations",
    "sample_conversations",
    "shared_conversations",
]


class ContractViolation(AssertionError):
    """A compressor broke one of the invariants; the message says which and where."""


def _fail(invariant: str, detail: str) -> NoReturn:
    raise ContractViolation(f"{invariant}: {detail}")


def check_tool_integrity(before: Sequence[Message], after: Sequence[Message]) -> None:
    """Check that ``after`` keeps the tool-call structure ``before`` had.

    Every tool result in ``after`` whose call was in ``before`` follows an assistant
    message in ``after`` that makes the call, and every call in ``after`` that had
    results in ``before`` keeps them, after it.
    """
    called_before = {c.id for m in before if m.role == "assistant" for c in m.tool_calls}
    answered_before = {m.tool_call_id for m in before if m.role == "tool"}
    seen_calls: set[str] = set()
    for i, m in enumerate(after):
        if m.role == "assistant":
            seen_calls.update(c.id for c in m.tool_calls)
        elif (
            m.role == "tool"
            and m.tool_call_id in called_before
            and m.tool_call_id not in seen_calls
        ):
            _fail(
                "tool-call integrity",
                f"output message {i} answers call {m.tool_call_id!r}, "
                "which no earlier output message makes",
            )
    for i, m in enumerate(after):
        for call in m.tool_calls if m.role == "assistant" else ():
            if call.id in answered_before and not any(
                r.role == "tool" and r.tool_call_id == call.id for r in after[i + 1 :]
            ):
                _fail(
                    "tool-call integrity",
                    f"output message {i} makes call {call.id!r} but its result was dropped",
                )


def check_continuation(before: Sequence[Message], after: Sequence[Message]) -> None:
    """Check that ``after`` ends with the newest message of ``before``, so an agent
    sees where it is: the same message, or the same one shortened in place (its role,
    name, tool call ids and the call it answers kept; a recall block at its head
    allowed), never a note standing for it. A history that ends on a system message
    (pinned messages are checked apart) or on tool calls still waiting for their results
    (no model is called there; a session keeps them out of its compactions) is exempt."""
    if not before or before[-1].role in SYSTEM_ROLES or before[-1].tool_calls:
        return
    newest = before[-1]
    shown = without_recall(after)
    if not shown:
        _fail("continuation", "the output is empty")
    last = shown[-1]
    same = last == newest or (
        not is_note(last)
        and last.role == newest.role
        and last.name == newest.name
        and last.tool_call_id == newest.tool_call_id
        and [c.id for c in last.tool_calls] == [c.id for c in newest.tool_calls]
    )
    if not same:
        _fail(
            "continuation",
            f"the output ends on a {last.role} message ({last.text[:60]!r}), not on the "
            f"input's newest {newest.role} message ({newest.text[:60]!r})",
        )


def _converts_to_anthropic(messages: Sequence[Message]) -> bool:
    try:
        to_anthropic(messages)
    except ValueError:
        return False
    return True


def _system_block_leads(messages: Sequence[Message]) -> bool:
    """Whether every system (or developer) message comes before every other message."""
    roles = [m.role in SYSTEM_ROLES for m in messages]
    return roles == sorted(roles, reverse=True)


def _is_subsequence(needles: Sequence[Message], haystack: Sequence[Message]) -> bool:
    it = iter(haystack)
    return all(any(n == h for h in it) for n in needles)


def check_invariants(
    compressor: Compressor,
    messages: Sequence[Message | dict[str, Any]],
    *,
    budget: int,
    counter: CounterSpec = "o200k_base",
) -> CompressionResult | None:
    """Compress once and check the design's invariants (and that an input strict
    chat APIs accept gives an output they accept: one leading system block, a user
    turn first, user and assistant alternating); return the result.

    Returns ``None`` when the compressor raised :class:`BudgetError` honestly (the error
    reports a requirement above the budget). Raises :class:`ContractViolation` naming
    the broken invariant.
    """
    original = as_messages(messages)
    snapshot = copy.deepcopy(original)
    wire = json.dumps(to_openai(original), sort_keys=True)
    cnt = get_counter(counter)
    before = cnt.count_messages(original)
    try:
        result = compressor.compress(original, budget=budget, counter=cnt)
    except BudgetError as exc:
        if not exc.required > budget or exc.budget != budget:
            _fail(
                "budget",
                f"BudgetError claims {exc.required} needed for budget {exc.budget}, "
                f"but was given {budget}",
            )
        try:
            compressor.compress(copy.deepcopy(original), budget=budget, counter=cnt)
        except BudgetError:
            return None
        _fail("deterministic", "a second identical call did not raise BudgetError")

    # 6. Pure: the input is not mutated.
    if original != snapshot or json.dumps(to_openai(original), sort_keys=True) != wire:
        _fail("pure", "the input messages were modified")
    out = list(result.messages)
    after = cnt.count_messages(out)
    # 1. Never more tokens; a history that fits comes back unchanged.
    if result.stats.tokens_after != after or result.stats.tokens_before != before:
        _fail(
            "stats",
            f"stats say {result.stats.tokens_before} -> {result.stats.tokens_after}, "
            f"the counter says {before} -> {after}",
        )
    if after > before:
        _fail("never larger", f"{before} tokens in, {after} out")
    if before <= budget and to_openai(out) != to_openai(original):
        _fail("never larger", "a history that fits the budget was changed")
    # 2. Fits the budget (or follows a declared overflow policy); never empty silently.
    if after > budget and getattr(compressor, "overflow", "error") != "best_effort":
        _fail("budget", f"{after} tokens out for a budget of {budget}, and no BudgetError")
    if original and not out:
        _fail("budget", "returned no messages for a non-empty history")
    # 3. Tool-call integrity (and the output still converts for Anthropic).
    check_tool_integrity(original, out)
    if _converts_to_anthropic(original) and not _converts_to_anthropic(out):
        _fail("tool-call integrity", "the output no longer converts to Anthropic messages")
    # 4. System messages kept; order preserved; one trace entry per input message.
    systems = [m for m in original if m.role in SYSTEM_ROLES]
    if not _is_subsequence(systems, out):
        _fail("pinned", "a system message was dropped, changed or moved")
    if _system_block_leads(original) and not _system_block_leads(out):
        _fail(
            "strict APIs",
            "the input's system messages form one leading block and the output's do not "
            "(a note or summary after a user turn: Anthropic and Gemini refuse it)",
        )
    if [d.index for d in result.trace] != list(range(len(original))):
        _fail("trace", "the trace must hold one decision per input message, in order")
    kept = [original[d.index] for d in result.trace if d.action == "kept"]
    if not _is_subsequence(kept, out):
        _fail("order", "messages the trace calls kept are missing or out of order")
    # 9. Continuation: the output ends with the input's newest message.
    check_continuation(original, out)
    # 5. Deterministic, byte for byte.
    again = compressor.compress(copy.deepcopy(original), budget=budget, counter=cnt)
    if (
        json.dumps(again.to_openai()) != json.dumps(result.to_openai())
        or again.trace != result.trace
    ):
        _fail("deterministic", "the same input and settings gave a different output")
    # And a valid request for strict chat APIs when the input is one (a best-effort
    # result over the budget keeps what it must instead).
    valid_in = original and not turn_order_problems(original)
    if valid_in and after <= budget and turn_order_problems(out):
        _fail(
            "strict APIs",
            f"the input is a valid request for strict chat APIs and the output is not: "
            f"{'; '.join(turn_order_problems(out))}",
        )
    # 7. Reversible where claimed: every changed output expands back.
    if getattr(compressor, "reversible", False) and out != original:
        expand = getattr(compressor, "expand", None)
        if expand is None or to_openai(expand(result)) != to_openai(original):
            _fail("reversible", "expanding the output did not give back the input")
    # 8. acompress gives the same result.
    async_result = asyncio.run(compressor.acompress(original, budget=budget, counter=cnt))
    if (
        json.dumps(async_result.to_openai()) != json.dumps(result.to_openai())
        or async_result.trace != result.trace
    ):
        _fail("async", "acompress gave a different result from compress")
    return result


# ------------------------------------------------------------------------------ data


def find_data_dir(start: str | os.PathLike[str] | None = None) -> Path | None:
    """Where the shared conversations are: ``$CTXFOLD_DATA_DIR``, else the first
    ``shared/data`` beside ``start`` (default: the working directory) or a parent."""
    env = os.environ.get("CTXFOLD_DATA_DIR")
    if env:
        return Path(env) if Path(env).is_dir() else None
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "shared" / "data"
        if candidate.is_dir():
            return candidate
    return None


def load_conversations(path: str | os.PathLike[str]) -> Iterator[tuple[str, list[Message]]]:
    """Yield ``(id, messages)`` from a JSONL file of ``{"id", "messages"}`` records or a
    JSON file holding one record or a bare list of messages."""
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    if p.suffix == ".jsonl":
        for n, line in enumerate(text.splitlines()):
            if line.strip():
                rec = json.loads(line)
                yield str(rec.get("id", f"{p.stem}:{n}")), from_openai(rec["messages"])
    else:
        rec = json.loads(text)
        msgs = rec["messages"] if isinstance(rec, dict) else rec
        yield (str(rec.get("id", p.stem)) if isinstance(rec, dict) else p.stem), from_openai(msgs)


#: Set to ``1`` to sweep every shared conversation instead of a sample of each file.
FULL_SWEEP_ENV = "CTXFOLD_FULL_SWEEP"


def full_sweep() -> bool:
    """Whether tests sweep every shared conversation (``CTXFOLD_FULL_SWEEP=1``) or a
    deterministic sample of each data set (the default)."""
    return os.environ.get(FULL_SWEEP_ENV, "") not in ("", "0")


def _features(msgs: Sequence[Message]) -> set[str]:
    """The irregular shapes a sample should cover, found in one conversation."""
    grouping = group_units(msgs)
    found = set()
    if grouping.dangling_calls:
        found.add("dangling_call")
    if grouping.orphan_results:
        found.add("orphan_result")
    if any(m.role == "assistant" and m.tool_calls and m.text for m in msgs):
        found.add("text_and_calls")
    if any(m.name for m in msgs):
        found.add("names")
    if any(not isinstance(m.content, str) and m.content is not None for m in msgs):
        found.add("multipart")
    return found


def sample_conversations(
    conversations: Sequence[tuple[str, list[Message]]], *, size_points: int = 3
) -> list[tuple[str, list[Message]]]:
    """A deterministic sample of one data set that keeps its range and its shapes: the
    smallest, the median and the largest conversation by characters (``size_points``
    spread from smallest to largest), then the smallest with each irregular shape not
    yet covered (a dangling tool call, an orphan result, text beside calls, names,
    multi-part content). In input order."""
    if len(conversations) <= size_points:
        return list(conversations)
    sizes = [sum(len(m.text) for m in msgs) for _, msgs in conversations]
    by_size = sorted(range(len(conversations)), key=lambda k: (sizes[k], k))
    last = len(by_size) - 1
    chosen = {by_size[round(j * last / (size_points - 1))] for j in range(size_points)}
    covered = set().union(*(_features(conversations[k][1]) for k in chosen))
    for k in by_size:
        new = _features(conversations[k][1]) - covered
        if new:
            chosen.add(k)
            covered |= new
    return [conversations[k] for k in sorted(chosen)]


def shared_conversations(
    data: str | os.PathLike[str] | None = None, *, full: bool | None = None
) -> list[tuple[str, list[Message]]]:
    """The shared conversations of every ``*.jsonl`` in ``data`` (default:
    :func:`find_data_dir`; none when absent): all of them with ``full`` (default:
    :func:`full_sweep`), else :func:`sample_conversations` of each file."""
    folder = Path(data) if data is not None else find_data_dir()
    if folder is None:
        return []
    every = full_sweep() if full is None else full
    out: list[tuple[str, list[Message]]] = []
    for path in sorted(folder.glob("*.jsonl")):
        convs = list(load_conversations(path))
        out.extend(convs if every else sample_conversations(convs))
    return out


class CompressorContract:
    """Pytest mixin: the invariants every compressor keeps, on real and generated data.

    Override :meth:`make_compressor`. Real conversations come from
    :meth:`conversations` (by default every ``*.jsonl`` in :func:`find_data_dir`, plus
    ``example_files``); generated ones from hypothesis. Budgets are fractions of each
    history's tokens.
    """

    budget_fractions: ClassVar[tuple[float, ...]] = (1.0, 0.5, 0.25, 0.1, 0.02)
    counter: ClassVar[str] = "o200k_base"
    example_files: ClassVar[tuple[str, ...]] = ()
    max_examples: ClassVar[int] = 60

    def make_compressor(self) -> Compressor:
        """Return the compressor under test (fresh, configured)."""
        raise NotImplementedError

    def conversations(self) -> list[tuple[str, list[Message]]]:
        """The real conversations to check (override to choose others): the
        ``example_files`` and :func:`shared_conversations` (a sample of each data set,
        every conversation with ``CTXFOLD_FULL_SWEEP=1``)."""
        found: list[tuple[str, list[Message]]] = []
        for name in self.example_files:
            found.extend(load_conversations(name))
        return found + shared_conversations()

    def _check(self, messages: Sequence[Message], fraction: float) -> CompressionResult | None:
        cnt = get_counter(self.counter)
        budget = max(int(cnt.count_messages(list(messages)) * fraction), 1)
        return check_invariants(self.make_compressor(), messages, budget=budget, counter=cnt)

    def test_contract_on_real_conversations(self) -> None:
        convs = self.conversations()
        if not convs:
            import pytest

            pytest.skip("no real conversations: set CTXFOLD_DATA_DIR or add example_files")
        for conv_id, msgs in convs:
            for fraction in self.budget_fractions:
                try:
                    self._check(msgs, fraction)
                except ContractViolation as exc:
                    raise ContractViolation(f"{conv_id} at {fraction:.0%}: {exc}") from None

    def test_contract_on_generated_conversations(self) -> None:
        from hypothesis import HealthCheck, given, settings
        from hypothesis import strategies as st

        from .strategies import conversations

        @settings(
            max_examples=self.max_examples,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(conversations(), st.sampled_from(self.budget_fractions))
        def run(msgs: list[Message], fraction: float) -> None:
            self._check(msgs, fraction)

        run()

    def test_history_that_fits_is_returned_unchanged(self) -> None:
        for _, msgs in self.conversations()[:20]:
            cnt = get_counter(self.counter)
            budget = cnt.count_messages(msgs)
            result = self.make_compressor().compress(msgs, budget=budget, counter=cnt)
            assert list(result.messages) == msgs
            assert all(d.action == "kept" for d in result.trace)
