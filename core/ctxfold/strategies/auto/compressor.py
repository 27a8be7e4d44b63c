"""The ``auto`` strategy's options and its pipeline, stage by stage."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from ...contract import Compaction, Conversation
from ...exceptions import ConfigurationError
from ...messages import ROLES, Message
from ...models.summarizers import Summarizer, as_summarizer
from ...result import is_note
from ...text.adapters import FormatAdapter
from ...text.layers import Layers
from ...text.scoring import goal_names
from ..base import BaseCompressor
from ..options import CachedOptions, check_choice, check_share
from .analysis import Analyzer
from .assemble import Notes, savings
from .fit import fill, fit, summarize_note, with_weights

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["AutoCompressor"]


class AutoCompressor(BaseCompressor):
    """Compress hard without an LLM, keeping what matters. The default strategy.

    Args:
        recent_share: share of the budget (after pinned messages) for the newest
            units, kept verbatim. Default ``None``: 0.25 when the history has tool
            calls (the latest results are the agent's working state), 0.1 in a chat
            (older turns are memory, which selection serves better).
        task_share: the first user message (the task) stays verbatim if it needs at
            most this share of the budget.
        digest_share: at most this share of the note's room lists the
            identifiers of folded content (``0`` turns the list off); within it, an
            identifier is listed when it is worth more per token than a sentence.
        layers: which encoding layers run (:class:`ctxfold.Layers`).
        adapters: the format adapters to try, in order (default: the registry).
        summarizer: an LLM (anything :func:`ctxfold.as_summarizer` accepts: a
            :class:`ctxfold.Summarizer`, an object with async ``asummarize``, or a
            callable taking messages) that rewrites the condensed lines of the note
            as one summary in at most as many tokens: one call per compression, on
            the full text of the folded messages, cached by that text (a second pass
            over the same history makes no call). Default: none, the note keeps the
            extractive lines.
        cache: where those summaries are cached (see
            :class:`ctxfold.SummarizingCompressor`).
        pin_roles: roles always kept verbatim.
        note_role: the role of the note that lists folded identifiers.
        overflow: ``"error"`` raises :class:`~ctxfold.BudgetError` when pinned
            messages alone exceed the budget; ``"best_effort"`` returns them anyway.
        reversible: on by default: every original goes to ``store`` and the note
            names the round (``[ctxfold round <id>: ...]``), so
            :func:`ctxfold.expand` gives the input back and the model can read any
            original with :func:`ctxfold.expand_tool`. ``False`` for a plain result.
        store, reference_share, max_references: see
            :meth:`~ctxfold.BaseCompressor.set_reversible`.
    """

    name: ClassVar[str] = "auto"
    reversible_default: ClassVar[bool] = True
    uses_cache: ClassVar[bool] = True
    lists_identifiers = True

    def __init__(
        self,
        *,
        recent_share: float | None = None,
        task_share: float = 0.25,
        digest_share: float = 0.25,
        layers: Layers | None = None,
        adapters: Sequence[FormatAdapter] | None = None,
        summarizer: Any = None,
        note_role: str = "system",
        **options: Unpack[CachedOptions],
    ) -> None:
        super().__init__(**options)
        self.recent_share = (
            None if recent_share is None else check_share("recent_share", recent_share)
        )
        self.task_share = check_share("task_share", task_share)
        self.digest_share = check_share("digest_share", digest_share)
        if layers is not None and not isinstance(layers, Layers):
            raise ConfigurationError("layers must be a ctxfold.text.Layers instance")
        self.layers = layers or Layers()
        self.adapters = tuple(adapters) if adapters is not None else None
        self.summarizer: Summarizer | None = (
            None if summarizer is None else as_summarizer(summarizer)
        )
        check_choice("note_role", note_role, sorted(ROLES))
        self.note_role = note_role

    def prepare(self, messages: Sequence[Message], tokens: Sequence[int]) -> None:
        """Analyse each message alone ahead of a compaction (memoized by content, as a
        compaction would): a session calls this as messages arrive, and on the note its
        last compaction wrote (a note is folded again, never pinned, whatever its role)."""
        analyzer = Analyzer(self.layers, self.adapters)
        for m, t in zip(messages, tokens, strict=True):
            # A tool result the layers cut is analysed by the compaction, which knows
            # what the task names (the lines naming it are kept).
            if (m.role not in self.pin_roles or is_note(m)) and not analyzer.truncates(m):
                analyzer(m, t)

    def compact(self, conv: Conversation) -> Compaction:
        """Analyse, plan, select, assemble and fit (see :mod:`ctxfold.strategies.auto`)."""
        notes = Notes(self.note_role, self.layers, self.digest_share)
        analyzer = Analyzer(self.layers, self.adapters, goal_names(conv.user_task()))
        fitted = fit(conv, self, analyzer, notes)
        fitted = fill(fitted, conv.budget, conv.counter, self.digest_share)
        out = summarize_note(conv, fitted, self, notes)
        out = with_weights(out, fitted)
        note = None if fitted.note_at is None else out[fitted.note_at]
        return Compaction(out, fitted.trace, savings(fitted.plans, conv.tokens, note, conv.counter))
