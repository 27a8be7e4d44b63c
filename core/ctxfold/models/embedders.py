"""Embedders: a protocol, an offline TF-IDF / LSA default and an optional WordLlama one.

An embedder turns texts into vectors whose cosine similarity says how alike the texts
are; the semantic compressor uses it to find near-duplicate messages. Everything here
works with no network:

- :class:`TfidfEmbedder` (the default; scikit-learn): TF-IDF fitted on the batch,
  reduced by LSA. Best at what deduplication needs: texts that share most of their
  words, such as two runs of the same command.
- :class:`WordLlamaEmbedder` (``pip install 'ctxfold[wordllama]'``): static token
  embeddings distilled from an LLM, averaged; 16 MB of weights shipped in the package,
  numpy only, no torch. Also matches texts that say the same thing in other words.

numpy and scikit-learn load on first use, never at ``import ctxfold``.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..exceptions import ConfigurationError, MissingDependencyError
from ..storage.cache import Cache, cache_key
from .similarity import import_numpy as _import_numpy
from .similarity import normalize_rows
from .summarizers import qualname
from .usage import record

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "CallableEmbedder",
    "Embedder",
    "TfidfEmbedder",
    "WordLlamaEmbedder",
    "embed",
    "get_embedder",
]

#: Bumped when an embedder's algorithm changes, so cached vectors are not reused.
_ALGORITHM_VERSION = 1
#: Up to this many distinct texts LSA is computed exactly (an eigendecomposition of the
#: texts' Gram matrix, about a second at 3,000); beyond, by randomized SVD.
_EXACT_LSA_MAX_TEXTS = 3000


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors. This is a Protocol: any object with ``embed`` works.

    ``embed(texts)`` returns a float32 array of shape ``(len(texts), dim)`` whose rows
    are L2-normalized (a text with nothing to embed, such as ``""``, may get a zero
    row), so a dot product is a cosine similarity. ``embed([])`` returns shape
    ``(0, dim)``.

    Optional members the cache reads: ``name`` (a short id), ``settings()`` (a stable
    string of the settings that change the vectors) and ``per_text`` (``True`` when a
    text's vector does not depend on the other texts of the batch, so vectors can be
    cached text by text; ``False`` when the whole batch must be the cache key).
    ``duplicate_threshold`` (optional) is the cosine similarity from which two texts
    are near-duplicates for this embedder; every embedder has its own scale (0.8 for
    TF-IDF is as strict as 0.96 for WordLlama), and the semantic compressor uses it
    unless given a threshold (0.9 for an embedder without one).
    """

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One L2-normalized float32 row per text."""
        ...


class CallableEmbedder:
    """Any function from a list of texts to a list of vectors (a framework's embedding
    model) as an :class:`Embedder`: rows L2-normalized, float32 (needs numpy).
    ``name`` says which model it is, for the cache (a text's vector is taken not to
    depend on the rest of its batch, so vectors are cached text by text)."""

    per_text = True

    def __init__(self, embed: Callable[[list[str]], Sequence[Sequence[float]]], name: str) -> None:
        if not callable(embed):
            raise ConfigurationError(f"CallableEmbedder needs a function, got {embed!r}")
        self._embed = embed
        self.name = name
        self._dim = 0

    def settings(self) -> str:
        """What changes the vectors: the model's name."""
        return self.name

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One L2-normalized float32 row per text."""
        if not texts:
            return normalize_rows(_import_numpy().zeros((0, self._dim)))
        unit = normalize_rows(self._embed(list(texts)))
        self._dim = int(unit.shape[1])
        return unit


def _find_spec(module: str) -> Any:
    """The module's import spec, or None when it cannot be imported."""
    try:
        return importlib.util.find_spec(module)
    except (ImportError, ValueError):  # a broken install, or None in sys.modules
        return None


def _check_installed(feature: str, module: str, package: str, extra: str) -> None:
    if _find_spec(module) is None:
        raise MissingDependencyError(feature, package, extra)


# ---------------------------------------------------------------------------- TF-IDF


def _is_int(value: object, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


class TfidfEmbedder:
    """TF-IDF vectors fitted on the batch, reduced by LSA to ``dims`` (scikit-learn).

    Words (``ngram_range`` word n-grams, lowercased, tokens of two or more word
    characters) are weighted by TF-IDF, with the idf fitted on the distinct texts of
    the batch, so a repeated text does not make its own words look common and the
    same text always gets the same row. With ``char_ngrams=True`` character 3- to
    5-grams inside word boundaries are added as a second, equally weighted block:
    more robust to changed numbers and word forms, about twice as slow.

    The result always has ``dims`` columns. While the batch spans at most ``dims``
    dimensions (a small vocabulary, or no more distinct texts than ``dims``) the
    vectors are an exact rotation of the TF-IDF vectors, so cosines are the TF-IDF
    cosines; beyond that, LSA keeps the ``dims`` strongest directions (an exact
    truncated SVD up to 3,000 distinct texts, a randomized one with a fixed random
    state above). Deterministic: the same batch gives the same array.

    Because the idf depends on the batch, so do the vectors (``per_text = False``).

    ``duplicate_threshold`` is 0.8: on the near-duplicate benchmark
    (``benchmarks/embedders.py``) the best F1 falls at 0.77 with the default settings,
    and at 0.9 half the re-runs of a command are missed.
    """

    name = "tfidf"
    per_text = False
    duplicate_threshold = 0.8

    def __init__(
        self,
        *,
        dims: int = 256,
        ngram_range: tuple[int, int] = (1, 2),
        min_df: int = 1,
        sublinear_tf: bool = True,
        char_ngrams: bool = False,
    ) -> None:
        if not _is_int(dims, 1):
            raise ConfigurationError(f"dims must be an integer >= 1, got {dims!r}")
        if (
            not isinstance(ngram_range, (tuple, list))
            or len(ngram_range) != 2
            or not all(_is_int(n, 1) for n in ngram_range)
            or ngram_range[0] > ngram_range[1]
        ):
            raise ConfigurationError(
                f"ngram_range must be a pair (low, high) of integers with "
                f"1 <= low <= high, got {ngram_range!r}"
            )
        if not _is_int(min_df, 1):
            raise ConfigurationError(f"min_df must be an integer >= 1, got {min_df!r}")
        for label, flag in (("sublinear_tf", sublinear_tf), ("char_ngrams", char_ngrams)):
            if not isinstance(flag, bool):
                raise ConfigurationError(f"{label} must be True or False, got {flag!r}")
        _check_installed("The TF-IDF embedder", "sklearn", "scikit-learn", "semantic")
        _check_installed("The TF-IDF embedder", "numpy", "numpy", "semantic")
        self.dims = dims
        self.ngram_range = (int(ngram_range[0]), int(ngram_range[1]))
        self.min_df = min_df
        self.sublinear_tf = sublinear_tf
        self.char_ngrams = char_ngrams

    def settings(self) -> str:
        """The settings that change the vectors, as a stable string for cache keys."""
        low, high = self.ngram_range
        return (
            f"tfidf-v{_ALGORITHM_VERSION}:dims={self.dims},ngram={low}-{high},"
            f"min_df={self.min_df},sublinear={int(self.sublinear_tf)},"
            f"char={int(self.char_ngrams)}"
        )

    def __repr__(self) -> str:
        return (
            f"TfidfEmbedder(dims={self.dims}, ngram_range={self.ngram_range}, "
            f"min_df={self.min_df}, sublinear_tf={self.sublinear_tf}, "
            f"char_ngrams={self.char_ngrams})"
        )

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One L2-normalized float32 row of ``dims`` values per text; a text with no
        words (``""``, ``"!!"``) gets a zero row."""
        np = _import_numpy()
        if isinstance(texts, str):
            raise ConfigurationError("embed() takes a sequence of texts, not one string")
        texts = list(texts)
        distinct = sorted(set(texts))
        slot = {t: i for i, t in enumerate(distinct)}
        rows = self._embed_distinct(distinct)
        out = rows[[slot[t] for t in texts]] if texts else rows[:0]
        return np.ascontiguousarray(out, dtype=np.float32)  # type: ignore[no-any-return]

    def _tfidf(self, texts: list[str]) -> Any:
        """The sparse TF-IDF matrix (one L2-normalized row per text), or None when no
        term survives (no words, or fewer texts than ``min_df``)."""
        np = _import_numpy()
        from scipy import sparse
        from sklearn.feature_extraction.text import TfidfVectorizer

        if len(texts) < self.min_df:
            return None
        common: dict[str, Any] = {
            "lowercase": True,
            "min_df": self.min_df,
            "sublinear_tf": self.sublinear_tf,
            "dtype": np.float64,
        }
        vectorizers = [
            TfidfVectorizer(
                analyzer="word",
                ngram_range=self.ngram_range,
                token_pattern=r"(?u)\b\w\w+\b",
                **common,
            )
        ]
        if self.char_ngrams:
            vectorizers.append(TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), **common))
        blocks = []
        for vectorizer in vectorizers:
            try:
                blocks.append(vectorizer.fit_transform(texts))
            except ValueError as exc:  # sklearn's words for "no term survived"
                if "empty vocabulary" not in str(exc) and "no terms remain" not in str(exc):
                    raise
        if not blocks:
            return None
        matrix = blocks[0] if len(blocks) == 1 else sparse.hstack(blocks, format="csr")
        return matrix.tocsr()

    def _embed_distinct(self, texts: list[str]) -> Any:
        np = _import_numpy()
        out = np.zeros((len(texts), self.dims), dtype=np.float64)
        matrix = self._tfidf(texts) if texts else None
        if matrix is None:
            return out.astype(np.float32)
        n, vocab = matrix.shape
        if vocab <= self.dims:
            # Already small enough: the TF-IDF vectors themselves, zero-padded.
            out[:, :vocab] = matrix.toarray()
        elif n <= _EXACT_LSA_MAX_TEXTS:
            # Exact LSA through the Gram matrix G = X X^T = Q L Q^T: the rows of
            # Q_k sqrt(L_k), for the k = min(n, dims) largest eigenvalues, are the rows
            # of X projected on its k leading singular directions. When n <= dims that
            # keeps every dot product of X exactly.
            from scipy.linalg import eigh

            k = min(n, self.dims)
            gram = (matrix @ matrix.T).toarray()
            values, vectors = eigh(gram, subset_by_index=[n - k, n - 1])
            values, vectors = values[::-1], vectors[:, ::-1]
            # A deterministic sign per direction: its largest component positive.
            signs = np.sign(vectors[np.argmax(np.abs(vectors), axis=0), np.arange(k)])
            signs[signs == 0] = 1.0
            out[:, :k] = vectors * signs * np.sqrt(np.clip(values, 0.0, None))
        else:
            # Many texts: randomized truncated SVD (fixed random state).
            from sklearn.decomposition import TruncatedSVD

            svd = TruncatedSVD(n_components=self.dims, algorithm="randomized", random_state=0)
            svd.fit(matrix)
            out[:] = matrix @ svd.components_.T
        return normalize_rows(out)


# ------------------------------------------------------------------------- WordLlama

_WORDLLAMA_HINT = "pip install 'ctxfold[wordllama]'"
_load_lock = threading.Lock()


def _wordllama_folder() -> Path:
    spec = _find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError("The WordLlama embedder", "wordllama", "wordllama")
    return Path(next(iter(spec.submodule_search_locations)))


def _import_wordllama() -> Any:
    """Import wordllama without the side effect of its import: it calls
    ``logging.basicConfig(level=INFO)``, which would configure the application's root
    logger. The root logger's handlers and level are put back as they were."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import wordllama
    except ImportError as exc:
        raise MissingDependencyError(
            "The WordLlama embedder", exc.name or "wordllama", "wordllama"
        ) from None
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    return wordllama


def _shipped_dims(folder: Path, config: str) -> list[int]:
    """Dimensions of the weight files for ``config`` inside the installed package."""
    dims = []
    for path in (folder / "weights").glob(f"{config}_*.safetensors"):
        suffix = path.stem[len(config) + 1 :]
        if suffix.isdigit():
            dims.append(int(suffix))
    return sorted(dims)


@cache
def _wordllama_model(config: str, dim: int, full_dim: int) -> tuple[Any, Any]:
    """(token embedding matrix, tokenizer), loaded once per process from the files the
    package ships. Loading never touches the network (``disable_download=True``)."""
    wordllama = _import_wordllama()
    folder = _wordllama_folder()
    with _load_lock:
        # WordLlama looks for the shipped tokenizer in ``<package>/tokenizer/`` but
        # ships it in ``<package>/tokenizers/``; pointing its cache at the package
        # folder makes it find both files there.
        model = wordllama.WordLlama.load(
            config=config,
            dim=full_dim,
            trunc_dim=dim if dim != full_dim else None,
            cache_dir=folder,
            disable_download=True,
        )
    tokenizer = model.tokenizer
    tokenizer.no_padding()  # this instance is ours; texts are pooled one by one
    tokenizer.no_truncation()
    return model.embedding, tokenizer


class WordLlamaEmbedder:
    """Averaged static token embeddings from WordLlama (``pip install 'ctxfold[wordllama]'``).

    WordLlama distils an LLM's token embedding table (``l2_supercat``: Llama 2's
    tokenizer, 32,000 tokens) into small vectors trained for sentence similarity; a
    text's vector is the mean of its tokens' vectors. The weights ship inside the
    ``wordllama`` package, so this works offline; it needs numpy but not torch.

    ``config`` is a WordLlama configuration whose weights are in the installed package
    (the wheel ships ``l2_supercat`` at 256 dimensions); ``dim`` is 256 or a smaller
    Matryoshka size (64, 128), which keeps the first ``dim`` values. A text's vector
    does not depend on the rest of the batch (``per_text = True``). Texts are not
    truncated; each is pooled on its own, so one long log does not pad the others.

    Averaged embeddings of texts on one topic are close, so ``duplicate_threshold`` is
    0.96 (the best F1 on the near-duplicate benchmark; at 0.9, four merges in ten would
    join different texts).
    """

    name = "wordllama"
    per_text = True
    duplicate_threshold = 0.96

    def __init__(self, *, config: str = "l2_supercat", dim: int = 256) -> None:
        if not isinstance(config, str) or not config:
            raise ConfigurationError(f"config must be a WordLlama config name, got {config!r}")
        if not _is_int(dim, 1):
            raise ConfigurationError(f"dim must be an integer >= 1, got {dim!r}")
        folder = _wordllama_folder()
        _check_installed("The WordLlama embedder", "numpy", "numpy", "wordllama")
        wordllama = _import_wordllama()
        models = wordllama.config.WordLlamaModels
        offline = sorted(c for c in models.list_configs() if _shipped_dims(folder, c))
        uri = getattr(models, config, None) if config in models.list_configs() else None
        shipped = _shipped_dims(folder, config)
        if uri is None or not shipped:
            raise ConfigurationError(
                f"WordLlama config {config!r} has no weights in the installed package, and "
                f"ctxfold never downloads them; configs available offline: "
                f"{', '.join(offline) or 'none'}"
            )
        full_dim = shipped[-1]
        usable = [d for d in uri.available_dims if d <= full_dim]
        if dim not in usable:
            raise ConfigurationError(
                f"dim must be one of {usable} for WordLlama {config!r} (the package ships "
                f"{full_dim}-dimensional weights), got {dim!r}"
            )
        tokenizer_file = folder / "tokenizers" / str(uri.tokenizer_config)
        if not tokenizer_file.is_file():
            raise ConfigurationError(
                f"the installed wordllama package has no tokenizer file for {config!r} "
                f"({tokenizer_file}); reinstall it: {_WORDLLAMA_HINT}"
            )
        self.config = config
        self.dim = dim
        self._full_dim = full_dim
        self._version = str(getattr(wordllama, "__version__", "?"))

    def settings(self) -> str:
        """The settings that change the vectors, as a stable string for cache keys."""
        return (
            f"wordllama-v{_ALGORITHM_VERSION}:{self.config},dim={self.dim},package={self._version}"
        )

    def __repr__(self) -> str:
        return f"WordLlamaEmbedder(config={self.config!r}, dim={self.dim})"

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One L2-normalized float32 row of ``dim`` values per text; a text with no
        tokens (``""``) gets a zero row."""
        np = _import_numpy()
        if isinstance(texts, str):
            raise ConfigurationError("embed() takes a sequence of texts, not one string")
        texts = list(texts)
        table, tokenizer = _wordllama_model(self.config, self.dim, self._full_dim)
        out = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
        if not texts:
            return out  # type: ignore[no-any-return]
        last = table.shape[0] - 1
        for row, encoding in enumerate(tokenizer.encode_batch(texts, add_special_tokens=False)):
            if not encoding.ids:
                continue
            ids = np.clip(np.asarray(encoding.ids, dtype=np.int64), 0, last)
            # Sum by distinct token: memory stays bounded by the vocabulary however
            # long the text (the mean's division does not change the direction).
            tokens, counts = np.unique(ids, return_counts=True)
            out[row] = counts.astype(np.float32) @ table[tokens]
        return normalize_rows(out)


# ---------------------------------------------------------------------------- lookup

_NAMES = ("tfidf", "wordllama")


def get_embedder(spec: Embedder | str | None = None) -> Embedder:
    """Resolve an embedder spec: ``None`` or ``"tfidf"`` (a :class:`TfidfEmbedder`),
    ``"wordllama"`` (a :class:`WordLlamaEmbedder`), or any object with an
    ``embed(texts)`` method, returned as is."""
    if spec is None:
        return TfidfEmbedder()
    if isinstance(spec, str):
        key = spec.strip().lower()
        if key == "tfidf":
            return TfidfEmbedder()
        if key == "wordllama":
            return WordLlamaEmbedder()
        raise ConfigurationError(
            f"unknown embedder {spec!r}: use one of {', '.join(repr(n) for n in _NAMES)}, "
            "None (the TF-IDF default) or an object with an embed(texts) method"
        )
    if isinstance(spec, type):
        raise ConfigurationError(
            f"embedder must be an instance, got the class {spec.__name__}; "
            f"pass {spec.__name__}() instead"
        )
    if isinstance(spec, Embedder) and callable(getattr(spec, "embed", None)):
        return spec
    raise ConfigurationError(
        f"embedder must be one of {', '.join(repr(n) for n in _NAMES)}, None (the TF-IDF "
        f"default) or an object with an embed(texts) method, got {type(spec).__name__}"
    )


# ------------------------------------------------------------- cached embedding


def embed(e: Embedder, texts: Sequence[str], *, cache: Cache | None) -> npt.NDArray[np.float32]:
    """``e.embed`` with the cache and usage accounting. An embedder whose vectors depend
    on the whole batch (``per_text = False``, such as TF-IDF) is cached by batch; any
    other text by text, so only new texts are sent."""
    import numpy as np

    eid = f"{getattr(e, 'name', qualname(type(e)))}:{_settings(e)}"
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
