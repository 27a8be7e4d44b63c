"""Pluggable models: summarizers and embedders, with caching and usage accounting.

A summarizer is anything with ``summarize(text, *, max_tokens) -> str`` (the
:class:`~ctxfold.Summarizer` protocol), an object with an async ``asummarize`` of the
same shape, or a plain callable that takes chat messages and returns the summary text
(an LLM call): it gets a system message with the instructions and a user message with
the text. An embedder has ``embed(texts) -> array`` (:class:`~ctxfold.Embedder`).

Results are cached by a SHA-256 of their inputs and settings (:mod:`ctxfold._cache`),
so a second pass over the same history makes no new calls for unchanged content, and
every call and hit is counted in ``CompressionStats.usage``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._cache import Cache, cache_key
from ._messages import Message
from ._summarize import ExtractiveSummarizer, Summarizer
from ._usage import record
from .exceptions import ConfigurationError, SummarizerError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ._embed import Embedder

__all__ = [
    "SUMMARY_PROMPT",
    "CallableSummarizer",
    "as_summarizer",
    "speaker_tag",
    "transcript",
]

#: The instructions a message-taking summarizer (an LLM) gets as its system message.
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
        self.cache_id = cache_id or _qualname(fn)

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


def _qualname(obj: object) -> str:
    return f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', type(obj).__name__)}"


def summarizer_id(s: object) -> str:
    """What names a summarizer in cache keys: its ``cache_id`` if it has one."""
    cid = getattr(s, "cache_id", None)
    if isinstance(cid, str) and cid:
        return cid
    if isinstance(s, ExtractiveSummarizer):
        return f"extractive:{s.chars_per_token}:{s.goal}"
    return _qualname(type(s))


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


def embed(e: Embedder, texts: Sequence[str], *, cache: Cache | None) -> npt.NDArray[np.float32]:
    """``e.embed`` with the cache and usage accounting. An embedder whose vectors depend
    on the whole batch (``per_text = False``, such as TF-IDF) is cached by batch; any
    other text by text, so only new texts are sent."""
    import numpy as np

    eid = f"{getattr(e, 'name', _qualname(type(e)))}:{_settings(e)}"
    if not texts:
        return np.asarray(e.embed([]), dtype=np.float32)
    if not getattr(e, "per_text", True):
        key = cache_key("embed-batch", eid, *texts)
        hit = cache.get(key) if cache is not None else None
        if hit is not None:
            record("cache_hits")
            return _unpack(hit)
        if cache is not None:
            record("cache_misses")
        record("embedder_calls")
        record("embedder_texts", len(texts))
        vectors = np.asarray(e.embed(list(texts)), dtype=np.float32)
        if cache is not None:
            cache.set(key, _pack(vectors))
        return vectors
    keys = [cache_key("embed", eid, t) for t in texts]
    found = cache.get_many(keys) if cache is not None else [None] * len(texts)
    rows: list[Any] = [None if h is None else _unpack(h)[0] for h in found]
    missing = sorted({t for t, r in zip(texts, rows, strict=True) if r is None})
    record("cache_hits", len(texts) - sum(r is None for r in rows) if cache else 0)
    if missing:
        if cache is not None:
            record("cache_misses", len(missing))
        record("embedder_calls")
        record("embedder_texts", len(missing))
        fresh = np.asarray(e.embed(missing), dtype=np.float32)
        by_text = dict(zip(missing, fresh, strict=True))
        for k, t in enumerate(texts):
            if rows[k] is None:
                rows[k] = by_text[t]
                if cache is not None:
                    cache.set(keys[k], _pack(by_text[t][None, :]))
    return np.stack(rows).astype(np.float32)


def _settings(e: object) -> str:
    fn = getattr(e, "settings", None)
    return str(fn()) if callable(fn) else ""


def _pack(a: npt.NDArray[np.float32]) -> bytes:
    rows, cols = (int(x) for x in a.shape)
    return rows.to_bytes(4, "little") + cols.to_bytes(4, "little") + bytes(a.tobytes())


def _unpack(b: bytes) -> npt.NDArray[np.float32]:
    import numpy as np

    rows = int.from_bytes(b[:4], "little")
    cols = int.from_bytes(b[4:8], "little")
    out: npt.NDArray[np.float32] = np.frombuffer(b[8:], dtype=np.float32).reshape(rows, cols)
    copied: npt.NDArray[np.float32] = out.copy()
    return copied


def speaker_tag(m: Message) -> str:
    """Who speaks in a condensed line: the name (or role), ``tool result (name)``."""
    if m.role == "tool":
        return f"tool result{f' ({m.name})' if m.name else ''}"
    return m.name or m.role


def transcript(messages: Sequence[Message]) -> str:
    """Messages as plain text for a summarizer: ``speaker: text`` (see
    :func:`speaker_tag`), tool calls as ``-> name(arguments)``."""
    lines: list[str] = []
    for m in messages:
        tag = speaker_tag(m)
        body = m.text
        calls = " ".join(f"-> {c.name}({c.arguments})" for c in m.tool_calls)
        lines.append(f"{tag}: {' '.join(x for x in (body, calls) if x)}")
    return "\n".join(lines)
