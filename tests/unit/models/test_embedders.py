"""Embedders: the TF-IDF default, the optional WordLlama one, get_embedder, cosine_matrix."""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from ctxfold.exceptions import ConfigurationError, MissingDependencyError
from ctxfold.models import embedders as embedders_module
from ctxfold.models.embedders import (
    Embedder,
    TfidfEmbedder,
    WordLlamaEmbedder,
    get_embedder,
)
from ctxfold.models.similarity import cosine_matrix
from ctxfold.testing import find_data_dir, load_conversations

np = pytest.importorskip("numpy", reason="the embedders need pip install 'ctxfold[semantic]'")
pytest.importorskip("sklearn", reason="the TF-IDF embedder needs pip install 'ctxfold[semantic]'")

REPO = Path(__file__).resolve().parents[3]
HAS_WORDLLAMA = importlib.util.find_spec("wordllama") is not None
needs_wordllama = pytest.mark.skipif(
    not HAS_WORDLLAMA,
    reason="wordllama is not installed; run pip install 'ctxfold[wordllama]' to test it",
)

PYTEST_RUN = """\
============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-8.2.0, pluggy-1.5.0
rootdir: /repo
collected 12 items

tests/test_parser.py ......F.....                                        [100%]

=================================== FAILURES ===================================
___________________________ test_parse_nested_lists ____________________________
    def test_parse_nested_lists():
>       assert parse("[[1, 2], [3]]") == [[1, 2], [3]]
E       AssertionError: assert [[1, 2]] == [[1, 2], [3]]
tests/test_parser.py:41: AssertionError
=========================== short test summary info ============================
FAILED tests/test_parser.py::test_parse_nested_lists - AssertionError
========================= 1 failed, 11 passed in {secs}s =========================
started {stamp}
"""
RUN_1 = PYTEST_RUN.format(secs="0.31", stamp="2024-05-01T10:02:11")
RUN_2 = PYTEST_RUN.format(secs="0.47", stamp="2024-05-01T10:09:54")
README = (
    "ctxfold keeps an LLM agent's conversation inside its context window without "
    "losing what matters. Install it with pip, then call compress() on your message "
    "history with a token budget; every file path and identifier stays findable."
)
CHAT = "Sure! I booked the flight to Lisbon for Tuesday morning, seat 14C by the window."
TEXTS = [RUN_1, RUN_2, README, CHAT]


def embedders() -> list[object]:
    """Every built-in embedder available here, for parametrized tests."""
    found: list[object] = [
        pytest.param(TfidfEmbedder, id="tfidf"),
        pytest.param(lambda: TfidfEmbedder(char_ngrams=True), id="tfidf-char"),
    ]
    found.append(pytest.param(WordLlamaEmbedder, id="wordllama", marks=needs_wordllama))
    return found


def unit_rows(v: np.ndarray) -> np.ndarray:
    return np.abs(np.linalg.norm(v, axis=1) - 1.0) < 1e-5


# ------------------------------------------------------------------- every embedder


@pytest.mark.parametrize("make", embedders())
def test_shape_dtype_and_unit_rows(make):
    vectors = make().embed(TEXTS)
    assert vectors.shape[0] == len(TEXTS) and vectors.ndim == 2
    assert vectors.dtype == np.float32
    assert unit_rows(vectors).all()


@pytest.mark.parametrize("make", embedders())
def test_same_input_gives_identical_arrays(make):
    first = make().embed(TEXTS)
    assert np.array_equal(first, make().embed(TEXTS))
    assert np.array_equal(first, make().embed(list(TEXTS)))


@pytest.mark.parametrize("make", embedders())
def test_near_duplicates_score_higher_than_unrelated_texts(make):
    sims = cosine_matrix(make().embed(TEXTS))
    assert sims[0, 1] > 0.9  # the same pytest run, another duration and timestamp
    assert sims[0, 1] > sims[0, 2] + 0.3  # a README paragraph
    assert sims[0, 1] > sims[0, 3] + 0.3  # a chat reply


@pytest.mark.parametrize("make", embedders())
def test_edge_cases(make):
    e = make()
    empty = e.embed([])
    assert empty.shape[0] == 0 and empty.ndim == 2 and empty.dtype == np.float32
    assert empty.shape[1] == e.embed(["hello world"]).shape[1]
    one = e.embed(["just one text here"])
    assert one.shape[0] == 1 and unit_rows(one).all()
    blanks = e.embed(["", ""])
    assert blanks.shape[0] == 2 and not blanks.any()  # nothing to embed: zero rows
    mixed = e.embed(["", RUN_1, ""])
    assert not mixed[0].any() and not mixed[2].any() and unit_rows(mixed[1:2]).all()
    foreign = e.embed(["Grüße aus Köln, schönes Wetter", "日本語のテキストです", "Привет, мир"])
    assert unit_rows(foreign).all()
    with pytest.raises(ConfigurationError, match="sequence of texts"):
        e.embed("a single string")


@pytest.mark.parametrize("make", embedders())
def test_duplicate_texts_get_identical_rows(make):
    vectors = make().embed([RUN_1, README, RUN_1])
    assert np.array_equal(vectors[0], vectors[2])
    assert cosine_matrix(vectors)[0, 2] == pytest.approx(1.0, abs=1e-6)


# ---------------------------------------------------------------------------- TF-IDF


def test_tfidf_defaults_and_attributes():
    e = TfidfEmbedder()
    assert (e.name, e.per_text) == ("tfidf", False)
    assert (e.dims, e.ngram_range, e.min_df, e.sublinear_tf, e.char_ngrams) == (
        256,
        (1, 2),
        1,
        True,
        False,
    )
    assert isinstance(e, Embedder)
    assert e.embed(TEXTS).shape == (len(TEXTS), 256)
    assert TfidfEmbedder(dims=16).embed([]).shape == (0, 16)


def test_tfidf_texts_without_words_get_zero_rows():
    vectors = TfidfEmbedder().embed(["!!! ???", "-- ++", README])
    assert not vectors[:2].any() and unit_rows(vectors[2:]).all()
    assert not TfidfEmbedder().embed(["!!!", "?"]).any()  # an empty vocabulary


def test_tfidf_min_df_above_the_batch_gives_zero_rows():
    assert not TfidfEmbedder(min_df=5).embed([RUN_1, README]).any()
    vectors = TfidfEmbedder(min_df=2).embed([RUN_1, RUN_2, README])
    assert unit_rows(vectors[:2]).all()  # shared words survive min_df=2


def test_tfidf_repeating_a_text_does_not_change_the_others():
    once = TfidfEmbedder().embed(TEXTS)
    repeated = TfidfEmbedder().embed([*TEXTS, RUN_1, RUN_1, README])
    assert np.allclose(once, repeated[: len(TEXTS)], atol=1e-6)


def test_tfidf_small_batches_keep_the_exact_tfidf_cosines():
    # 4 texts with a vocabulary over 8: reduced to 8 dims exactly (4 rows span 4 dims);
    # with dims above the vocabulary, the TF-IDF vectors are used as they are.
    reduced = cosine_matrix(TfidfEmbedder(dims=8).embed(TEXTS))
    full = cosine_matrix(TfidfEmbedder(dims=5000).embed(TEXTS))
    assert np.allclose(reduced, full, atol=1e-5)


def lsa_corpus() -> list[str]:
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "omega"]
    texts = [" ".join(f"{words[(i + k) % len(words)]}{k % 3}" for k in range(6)) for i in range(20)]
    return [RUN_1, RUN_2, *texts]


def test_tfidf_lsa_when_there_are_more_texts_than_dims():
    texts = lsa_corpus()
    vectors = TfidfEmbedder(dims=6).embed(texts)
    assert vectors.shape == (len(texts), 6) and unit_rows(vectors).all()
    assert np.array_equal(vectors, TfidfEmbedder(dims=6).embed(texts))
    assert cosine_matrix(vectors)[0, 1] > 0.9


def test_tfidf_randomized_lsa_for_many_texts(monkeypatch):
    monkeypatch.setattr(embedders_module, "_EXACT_LSA_MAX_TEXTS", 5)
    texts = lsa_corpus()
    vectors = TfidfEmbedder(dims=6).embed(texts)
    assert vectors.shape == (len(texts), 6) and unit_rows(vectors).all()
    assert np.array_equal(vectors, TfidfEmbedder(dims=6).embed(texts))
    assert cosine_matrix(vectors)[0, 1] > 0.9


def test_tfidf_settings_are_stable_and_distinguish_settings():
    assert TfidfEmbedder().settings() == TfidfEmbedder().settings()
    variants = [
        TfidfEmbedder(),
        TfidfEmbedder(dims=128),
        TfidfEmbedder(ngram_range=(1, 1)),
        TfidfEmbedder(min_df=2),
        TfidfEmbedder(sublinear_tf=False),
        TfidfEmbedder(char_ngrams=True),
    ]
    keys = [e.settings() for e in variants]
    assert all(isinstance(k, str) and k for k in keys)
    assert len(set(keys)) == len(keys)
    assert TfidfEmbedder(ngram_range=[1, 2]).settings() == TfidfEmbedder().settings()


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"dims": 0}, "dims"),
        ({"dims": True}, "dims"),
        ({"dims": 2.5}, "dims"),
        ({"ngram_range": (2, 1)}, "ngram_range"),
        ({"ngram_range": (0, 1)}, "ngram_range"),
        ({"ngram_range": (1, 2, 3)}, "ngram_range"),
        ({"ngram_range": "12"}, "ngram_range"),
        ({"min_df": 0}, "min_df"),
        ({"sublinear_tf": "yes"}, "sublinear_tf"),
        ({"char_ngrams": 1}, "char_ngrams"),
    ],
)
def test_tfidf_rejects_bad_settings_at_construction(options, words):
    with pytest.raises(ConfigurationError, match=words) as info:
        TfidfEmbedder(**options)
    assert isinstance(info.value, ValueError)


def test_tfidf_without_scikit_learn_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'ctxfold\[semantic\]'") as info:
        TfidfEmbedder()
    assert isinstance(info.value, ImportError)


def test_the_semantic_extra_installs_what_the_semantic_strategy_imports():
    tomllib = pytest.importorskip("tomllib", reason="Python 3.11 reads pyproject.toml")
    project = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]
    named = {re.split(r"[<>=;\[ ]", r, maxsplit=1)[0] for r in extras["semantic"]}
    assert named == {"numpy", "scikit-learn"}
    assert "semantic" in extras["all"][0]


# ---------------------------------------------------------------------- cosine_matrix


def test_cosine_matrix():
    sims = cosine_matrix(np.array([[3.0, 4.0], [0.0, 0.0], [4.0, 3.0], [-3.0, -4.0]]))
    assert sims.shape == (4, 4) and sims.dtype == np.float32
    assert np.allclose(sims, sims.T)
    assert sims[0, 0] == pytest.approx(1.0) and sims[0, 2] == pytest.approx(0.96)
    assert sims[0, 3] == pytest.approx(-1.0)
    assert not sims[1].any() and not sims[:, 1].any()  # a zero row is like nothing
    assert cosine_matrix(np.zeros((0, 8))).shape == (0, 0)
    with pytest.raises(ConfigurationError, match="2-D"):
        cosine_matrix(np.ones(3))


# ---------------------------------------------------------------------- get_embedder


class Constant:
    """A user's embedder: any object with embed()."""

    def embed(self, texts):
        return np.ones((len(texts), 3), dtype=np.float32) / np.sqrt(3)


def test_get_embedder_forms():
    assert isinstance(get_embedder(), TfidfEmbedder)
    assert isinstance(get_embedder(None), TfidfEmbedder)
    assert isinstance(get_embedder("tfidf"), TfidfEmbedder)
    assert isinstance(get_embedder(" TFIDF "), TfidfEmbedder)
    mine = Constant()
    assert get_embedder(mine) is mine and isinstance(mine, Embedder)
    configured = TfidfEmbedder(dims=32)
    assert get_embedder(configured) is configured


@pytest.mark.parametrize("spec", ["bert", "", 42, object(), ["tfidf"]])
def test_get_embedder_errors_name_the_accepted_forms(spec):
    with pytest.raises(ConfigurationError, match="'tfidf', 'wordllama'") as info:
        get_embedder(spec)
    assert "embed(texts)" in str(info.value)


def test_get_embedder_rejects_a_class_and_says_to_instantiate():
    with pytest.raises(ConfigurationError, match=r"TfidfEmbedder\(\)"):
        get_embedder(TfidfEmbedder)


def test_importing_the_module_loads_no_heavy_package():
    heavy = ("numpy", "sklearn", "scipy", "wordllama")
    code = (
        "import sys, ctxfold.models.embedders\n"
        f"print(','.join(m for m in {heavy!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


# ------------------------------------------------------------------------- WordLlama


@needs_wordllama
def test_wordllama_defaults_dims_and_per_text_vectors():
    e = WordLlamaEmbedder()
    assert (e.name, e.per_text, e.config, e.dim) == ("wordllama", True, "l2_supercat", 256)
    batch = e.embed(TEXTS)
    assert batch.shape == (len(TEXTS), 256)
    alone = np.vstack([e.embed([t]) for t in TEXTS])
    assert np.allclose(batch, alone, atol=1e-6)  # a text's vector ignores the batch
    small = WordLlamaEmbedder(dim=64).embed(TEXTS)
    assert small.shape == (len(TEXTS), 64) and unit_rows(small).all()
    assert get_embedder("wordllama").settings() == e.settings()


@needs_wordllama
def test_wordllama_settings_are_stable_and_distinguish_dims():
    assert WordLlamaEmbedder().settings() == WordLlamaEmbedder().settings()
    assert WordLlamaEmbedder().settings() != WordLlamaEmbedder(dim=64).settings()
    assert WordLlamaEmbedder().settings() != TfidfEmbedder().settings()


@needs_wordllama
@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"config": "no_such_config"}, "available offline: l2_supercat"),
        ({"config": "l3_supercat"}, "never downloads"),  # known, but not shipped
        ({"dim": 1024}, r"dim must be one of \[64, 128, 256\]"),
        ({"dim": 100}, "dim must be one of"),
        ({"dim": 0}, "dim must be an integer"),
        ({"config": ""}, "config"),
    ],
)
def test_wordllama_rejects_bad_settings_at_construction(options, words):
    with pytest.raises(ConfigurationError, match=words):
        WordLlamaEmbedder(**options)


@needs_wordllama
def test_wordllama_import_leaves_the_root_logger_alone():
    code = (
        "import logging\n"
        "from ctxfold.models.embedders import WordLlamaEmbedder\n"
        "WordLlamaEmbedder().embed(['hello'])\n"
        "root = logging.getLogger()\n"
        "print(len(root.handlers), root.level)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["0", str(logging.WARNING)]


def test_wordllama_missing_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "wordllama", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'ctxfold\[wordllama\]'"):
        WordLlamaEmbedder()
    with pytest.raises(MissingDependencyError, match=r"ctxfold\[wordllama\]"):
        get_embedder("wordllama")


# ------------------------------------------------------------------------- real data


@pytest.mark.full_sweep
@pytest.mark.parametrize("make", embedders())
def test_exact_duplicates_in_a_real_conversation_score_one(make):
    data = find_data_dir(REPO)
    if data is None or not (data / "mini_swe_agent.jsonl").is_file():
        if os.environ.get("CTXFOLD_REQUIRE_DATA"):
            pytest.fail("CTXFOLD_REQUIRE_DATA is set but mini_swe_agent.jsonl is missing")
        pytest.skip("the shared conversations are not here: set CTXFOLD_DATA_DIR")
    _, messages = next(load_conversations(data / "mini_swe_agent.jsonl"))
    texts = [m.text for m in messages]
    vectors = make().embed(texts)
    assert vectors.shape[0] == len(texts) and vectors.dtype == np.float32
    sims = cosine_matrix(vectors)
    repeated = [t for t, n in Counter(texts).items() if n > 1 and t.strip()]
    assert repeated, "the first conversation should repeat some tool output"
    for text in repeated:
        rows = [i for i, t in enumerate(texts) if t == text]
        assert all(sims[rows[0], j] > 0.999 for j in rows[1:])
    empty = [i for i, t in enumerate(texts) if not t]
    assert not vectors[empty].any()
    filled = [i for i, t in enumerate(texts) if t.strip()]
    assert unit_rows(vectors[filled]).all()
