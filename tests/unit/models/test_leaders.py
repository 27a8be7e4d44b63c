"""Leader clustering in blocks gives what the full similarity matrix gave, in memory
that grows with the number of texts, not its square."""

from __future__ import annotations

import numpy as np
import pytest

from ctxfold.models import similarity
from ctxfold.models.similarity import cosine_matrix, leader_clusters


def by_full_matrix(vectors: np.ndarray, threshold: float) -> list[list[int]]:
    """The clustering as it was: one n x n matrix."""
    sims = cosine_matrix(vectors)
    leaders: list[int] = []
    members: dict[int, list[int]] = {}
    for k in range(len(vectors)):
        row = sims[k, leaders][::-1]
        j = int(row.argmax()) if leaders else 0
        if not leaders or row[j] < threshold:
            leaders.append(k)
            members[k] = [k]
        else:
            members[leaders[len(leaders) - 1 - j]].append(k)
    return list(members.values())


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("block_values", [1 << 24, 64])  # one block, and many small ones
def test_blocks_give_the_same_groups_as_the_full_matrix(seed, block_values, monkeypatch):
    monkeypatch.setattr(similarity, "_BLOCK_VALUES", block_values)
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(40, 16)).astype(np.float32)
    picks = rng.integers(0, 40, size=300)
    noise = rng.normal(scale=0.05, size=(300, 16)).astype(np.float32)
    vectors = base[picks] + noise  # near-duplicates of 40 texts
    vectors[::37] = 0.0  # empty texts: similarity 0 with everything
    for threshold in (0.5, 0.9, 0.99):
        assert leader_clusters(vectors, threshold) == by_full_matrix(vectors, threshold)


def test_ties_go_to_the_newest_leader_and_bad_shapes_are_refused():
    same = np.ones((3, 4), dtype=np.float32)
    same[1] = -1.0  # leader 0, leader 1, then a copy of row 0: joins 0
    assert leader_clusters(same, 0.9) == [[0, 2], [1]]
    tie = np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float32)
    assert leader_clusters(tie, 0.5) == [[0], [1, 2]]  # equal to both: the newer one
    with pytest.raises(ValueError, match="2-D array"):
        leader_clusters(np.ones(3), 0.5)
