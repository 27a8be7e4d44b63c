"""Every strategy form ``ctxfold.normalize`` documents (names, profiles, classes,
instances, ``(name, options)``, ``{"strategy": name, ...}``) is taken alike by
``ctxfold.compress``, ``ctxfold.Session`` and ``resolve_strategy``: one resolution path,
with the options given beside a form merged over the form's own."""

from __future__ import annotations

from typing import Any

import pytest

import ctxfold
from ctxfold import ConfigurationError, HybridCompressor, SlidingWindow, SummarizingCompressor
from ctxfold.strategies import resolve_strategy

FORMS: list[tuple[Any, type]] = [
    ("fast", SlidingWindow),
    ("balanced", ctxfold.AutoCompressor),
    ("quality", HybridCompressor),
    ("cost", SummarizingCompressor),
    (("sliding_window", {"keep_first": 3}), SlidingWindow),
    ((SlidingWindow, {"keep_first": 3}), SlidingWindow),
    ({"strategy": "sliding_window", "keep_first": 3}, SlidingWindow),
    ({"profile": "fast"}, SlidingWindow),
    (True, ctxfold.AutoCompressor),
]


def _chat() -> list[dict[str, str]]:
    out = [{"role": "system", "content": "You track parcels for a courier."}]
    for k in range(20):
        out.append({"role": "user", "content": f"Where is parcel P-{k:04d} now, please?"})
        out.append({"role": "assistant", "content": f"Parcel P-{k:04d} is in depot {k}. " * 4})
    return out


@pytest.mark.parametrize(("form", "kind"), FORMS)
def test_compress_and_session_take_every_documented_form(form: Any, kind: type) -> None:
    assert isinstance(resolve_strategy(form), kind)
    result = ctxfold.compress(_chat(), budget=300, strategy=form, query=False)
    assert result.stats.fits and result.stats.tokens_after <= 300
    session = ctxfold.Session(budget=300, strategy=form)
    assert isinstance(session.strategy, kind)


def test_options_beside_a_form_go_over_its_own() -> None:
    given = resolve_strategy(("sliding_window", {"keep_first": 3}), keep_first=2)
    assert isinstance(given, SlidingWindow) and given.keep_first == 2
    kept = ctxfold.compress(
        _chat(), budget=300, strategy={"strategy": "sliding_window", "keep_first": 3}
    )
    assert [m.text for m in kept.messages[:3]] == [m["content"] for m in _chat()[:3]]


def test_a_misspelt_profile_is_named_and_off_is_no_strategy_for_compress() -> None:
    with pytest.raises(ConfigurationError) as err:
        ctxfold.compress(_chat(), budget=300, strategy="qualty")
    assert "(did you mean 'quality'?)" in str(err.value)
    assert "profiles: fast, balanced, quality, cost" in str(err.value)
    for off in (None, False):
        with pytest.raises(ConfigurationError, match="strategy must be a strategy or profile"):
            ctxfold.compress(_chat(), budget=300, strategy=off)
