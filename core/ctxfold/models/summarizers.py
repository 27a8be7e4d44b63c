"""Pluggable models: summarizers and embedders, with caching and usage accounting.

A summarizer is anything with ``summarize(text, *, max_tokens) -> str`` (the
:class:`~ctxfold.Summarizer` protocol), an object with an async ``asummarize`` of the
same shape, or a plain callable that takes chat messages and returns the summary text
(an LLM call): it gets a system message with the instructions and a user message with
the text. An embedder has ``embed(texts) -> array`` (:class:`~ctxfold.Embedder`).

Results are cached by a SHA-256 of their inputs and settings (:mod:`ctxfold.storage.cache`),
so a second pass over the same history makes no new calls for unchanged content, and
every call and hit is counted in ``CompressionStats.usage``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..exceptions import ConfigurationError, SummarizerError
from ..messages import Message
from ..storage.cache import Cache, cache_key
from ..text.fitting import fit_text
from ..text.scoring import ExtractiveSummarizer
from ..tokens import TokenCounter
from .usage import record

if TYPE_CHECKING:
    pass

__all__ = [
    "SUMMARY_PROMPT",
    "CallableSummarizer",
    "Summarizer",
    "as_summarizer",
    "fit_summary",
    "summarize",
    "summarizer_id",
]


#: The instructions a message-taking summarizer (an LLM) gets as its system message.
@runtime_checkable
class Summarizer(Protocol):
    """Shortens text to at most ``max_tokens``. This is a Protocol: any object with a
    ``summarize(text, *, max_tokens)`` method works, an LLM-backed one included."""

    def summarize(self, text: str, *, max_tokens: int) -> str:
        """A summary of ``text`` within ``max_tokens`` tokens."""
        ...


SUMMARY_PROMPT = (
    "You condense the earlier part of a conversation between a user, an AI assistant "
    "and its tools, so the assistant can continue without it. Write a factual summary "
    "in at most {max_tokens} tokens. Keep every file path, URL, identifier, number, "
    "name, date, error message, command and decision exactly as written; keep what was "
    "asked, what was found, what was done and what is still open. If the text begins "
    "with an earlier summary, extend it with the new messages instead of starting "
    "over. Write the summary only, in the third person; do not address anyone."
)


class CallableSummarizer:
    """Wraps ``fn(messages) -> str`` (sync or async, an LLM call) as a summarizer.

    ``fn`` gets ``[Message("system", SUMMARY_PROMPT), Message("user", text)]``;
    ``cache_id`` names the model and prompt in cache keys (default: the function's
    qualified name).
    """

    def __init__(
        self,
        fn: Callable[[list[Message]], str | Awaitable[str]],
        *,
        prompt: str = SUMMARY_PROMPT,
        cache_id: str | None = None,
    ) -> None:
        if not callable(fn):
            raise ConfigurationError("CallableSummarizer needs a callable")
        self.fn = fn
        self.prompt = prompt
        self.cache_id = cache_id or qualname(fn)

    def summarize(self, text: str, *, max_tokens: int) -> str:
        """Ask ``fn`` for a summary of ``text`` within ``max_tokens`` tokens."""
        msgs = [
            Message("system", self.prompt.format(max_tokens=max_tokens)),
            Message("user", text),
        ]
        out: Any = self.fn(msgs)
        if inspect.isawaitable(out):
            out = _run(out)
        return out  # type: ignore[no-any-return]  # checked by summarize()


class _AsyncOnly:
    """An object with only ``asummarize``: run it to completion in this thread."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.cache_id = summarizer_id(inner)

    def summarize(self, text: str, *, max_tokens: int) -> str:
        out: str = _run(self.inner.asummarize(text, max_tokens=max_tokens))
        return out


def _run(awaitable: Awaitable[Any]) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:

        async def wait() -> Any:
            return await awaitable

        return asyncio.run(wait())
    raise ConfigurationError(
        "an async summarizer was called from inside a running event loop; use "
        "`await compressor.acompress(...)`, which runs compression in a worker thread"
    )


def as_summarizer(obj: object) -> Summarizer:
    """Normalize a summarizer option: a :class:`Summarizer`, an object with an async
    ``asummarize``, or a callable taking messages (see :class:`CallableSummarizer`)."""
    if isinstance(obj, Summarizer):
        return obj
    if callable(getattr(obj, "asummarize", None)):
        return _AsyncOnly(obj)
    if callable(obj):
        return CallableSummarizer(obj)
    raise ConfigurationError(
        "summarizer must have summarize(text, *, max_tokens), an async asummarize(text, "
        f"*, max_tokens), or be a callable taking a list of messages; got {type(obj).__name__}"
    )


def qualname(obj: object) -> str:
    return f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', type(obj).__name__)}"


def summarizer_id(s: object) -> str:
    """What names a summarizer in cache keys: its ``cache_id`` if it has one."""
    cid = getattr(s, "cache_id", None)
    if isinstance(cid, str) and cid:
        return cid
    if isinstance(s, ExtractiveSummarizer):
        return f"extractive:{s.chars_per_token}:{s.goal}"
    return qualname(type(s))


def summarize(
    s: Summarizer, text: str, *, max_tokens: int, cache: Cache | None, count: Callable[[str], int]
) -> str:
    """``s.summarize`` with the cache, usage accounting and typed errors: a failure or
    an empty answer raises :class:`SummarizerError`, never becomes the summary."""
    key = cache_key("summary", summarizer_id(s), str(max_tokens), text)
    if cache is not None:
        hit = cache.get(key)
        if hit is not None:
            record("cache_hits")
            return hit.decode("utf-8")
        record("cache_misses")
    record("summarizer_calls")
    record("summarizer_tokens", count(text))
    try:
        out = s.summarize(text, max_tokens=max_tokens)
    except SummarizerError:
        raise
    except Exception as exc:
        raise SummarizerError(
            f"the summarizer {summarizer_id(s)!r} failed: {exc!r}. Nothing was "
            "summarized and the input is unchanged; fix the summarizer or use a "
            "strategy without one"
        ) from exc
    if isinstance(out, str) and not out.strip() and isinstance(s, ExtractiveSummarizer):
        return ""  # the built-in one found no sentence short enough: an honest nothing
    if not isinstance(out, str) or not out.strip():
        raise SummarizerError(
            f"the summarizer {summarizer_id(s)!r} returned {type(out).__name__} "
            f"{out!r:.40}, not a non-empty string; nothing was summarized"
        )
    if cache is not None:
        cache.set(key, out.encode("utf-8"))
    return out


_TRIES = 20  # a summary keeps whole sentences: it may shrink by less than its room


def fit_summary(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """Shorten a summary that came back too long, extractively, until it fits in
    ``max_tokens`` (``""`` when nothing does; :func:`ctxfold.text.fitting.fit_text`)."""
    cpt = max(len(text) / max(counter.count_text(text), 1), 1.0)
    extract = ExtractiveSummarizer(chars_per_token=cpt)
    fitted = fit_text(
        lambda room: extract.summarize(text, max_tokens=room), max_tokens, counter, tries=_TRIES
    )
    return fitted.text if fitted.fits else ""
