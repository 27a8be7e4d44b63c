"""Similarity of embedding vectors: unit rows, the full cosine matrix of a few texts,
and leader clustering in blocks for any number of texts (memory grows with ``n``,
never ``n**2``). numpy loads on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..exceptions import ConfigurationError, MissingDependencyError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["cosine_matrix", "import_numpy", "leader_clusters", "normalize_rows"]


def import_numpy() -> Any:
    try:
        import numpy
    except ImportError:
        raise MissingDependencyError("Embeddings", "numpy", "semantic") from None
    return numpy


def normalize_rows(vectors: Any) -> npt.NDArray[np.float32]:
    """float32 copy of ``vectors`` with unit rows; zero rows stay zero."""
    np = import_numpy()
    v = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    np.divide(v, norms, out=v, where=norms > 0)
    v[(norms <= 0).ravel()] = 0.0
    return v.astype(np.float32)  # type: ignore[no-any-return]


def _unit_rows(vectors: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """The rows of a 2-D array of vectors, normalized (a clear error for another shape)."""
    np = import_numpy()
    v = np.asarray(vectors)
    if v.ndim != 2:
        raise ConfigurationError(
            f"vectors must be a 2-D array (one row per text), got shape {v.shape}; "
            "check that the embedder's embed() returns one row per text"
        )
    return normalize_rows(v)


def cosine_matrix(vectors: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """Pairwise cosine similarities of the rows of ``vectors`` (shape ``(n, n)``).

    Rows are normalized first, so any embedder's output works; a zero row (an empty
    text) has similarity 0 with every row, itself included. Values are clipped to
    ``[-1, 1]``.
    """
    np = import_numpy()
    unit = _unit_rows(vectors)
    sims = unit @ unit.T
    np.clip(sims, -1.0, 1.0, out=sims)
    return sims  # type: ignore[no-any-return]


#: Similarities computed at once at most (a block of rows against the leaders so far):
#: 16M float32 values, 64 MB, whatever the number of texts.
_BLOCK_VALUES = 1 << 24


def leader_clusters(vectors: npt.ArrayLike, threshold: float) -> list[list[int]]:
    """Group rows by leader: each row joins the most similar earlier leader whose
    cosine similarity reaches ``threshold`` (the newest such leader on a tie), or
    becomes a leader itself. Returns every group (leader first, in row order).

    The similarities are computed a block of rows at a time against the leaders so
    far, never as an ``n x n`` matrix: memory grows with ``n``, not ``n**2``.
    """
    np = import_numpy()
    unit = _unit_rows(vectors)
    n = unit.shape[0]
    leaders: list[int] = []
    groups: dict[int, list[int]] = {}
    start = 0
    while start < n:
        size = max(1, min(1024, _BLOCK_VALUES // max(len(leaders) + 1024, 1)))
        stop = min(n, start + size)
        block = unit[start:stop]
        before = len(leaders)
        earlier = np.clip(block @ unit[leaders].T, -1.0, 1.0) if before else None
        inside = np.clip(block @ block.T, -1.0, 1.0)
        new: list[int] = []  # leaders found in this block, by position in it
        for r in range(stop - start):
            row = earlier[r] if earlier is not None else np.empty(0, dtype=block.dtype)
            if new:
                row = np.concatenate([row, inside[r, new]])
            if not len(row):
                j = -1
            else:
                back = row[::-1]  # newest leader first: it wins a tie
                j = len(row) - 1 - int(back.argmax())
            if j < 0 or row[j] < threshold:
                leaders.append(start + r)
                groups[start + r] = [start + r]
                new.append(r)
            else:
                groups[leaders[j]].append(start + r)
        start = stop
    return list(groups.values())
