"""Deterministic test doubles for the pluggable models (no LLM, no network)."""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..models.similarity import normalize_rows

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["FakeEmbedder", "FakeSummarizer"]

_WORD = re.compile(r"\w+")


class FakeSummarizer:
    """A summarizer for tests: the first words of the text, within ``max_tokens`` (at
    two characters a token, so it always fits). Records every text it is sent in
    ``texts``; with ``fail=True`` it raises, with ``empty=True`` it returns ``""``."""

    def __init__(
        self, *, fail: bool = False, empty: bool = False, cache_id: str = "fake-summarizer"
    ) -> None:
        self.fail = fail
        self.empty = empty
        self.cache_id = cache_id
        self.texts: list[str] = []

    @property
    def calls(self) -> int:
        """How many times it was called."""
        return len(self.texts)

    def summarize(self, text: str, *, max_tokens: int) -> str:
        """The start of ``text``, cut at a word boundary."""
        self.texts.append(text)
        if self.fail:
            raise RuntimeError("the fake summarizer was told to fail")
        if self.empty:
            return ""
        limit = max(max_tokens * 2, 1)
        words: list[str] = []
        size = 0
        for w in text.split():
            if size + len(w) + 1 > limit:
                break
            words.append(w)
            size += len(w) + 1
        return " ".join(words) or text[:limit]


class FakeEmbedder:
    """An embedder for tests: hashed bag of words (numpy), L2-normalized, so texts that
    share most of their words are near-duplicates. Counts ``calls`` and ``texts``."""

    name = "fake"
    per_text = True

    def __init__(self, dim: int = 512) -> None:
        self.dim = dim
        self.calls = 0
        self.texts = 0

    def settings(self) -> str:
        """Its settings, for cache keys."""
        return f"dim={self.dim}"

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One row per text."""
        import numpy as np

        self.calls += 1
        self.texts += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for w in _WORD.findall(text.lower()):
                out[row, zlib.crc32(w.encode()) % self.dim] += 1.0
        return normalize_rows(out)
