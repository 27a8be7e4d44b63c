"""Word lists kept as data (``text/words/*.txt``: one entry a line, ``#`` comments),
not as literals in the middle of logic."""

from __future__ import annotations

from functools import cache
from importlib.resources import files

__all__ = ["ordered_word_list", "word_list"]


@cache
def ordered_word_list(name: str) -> tuple[str, ...]:
    """The entries of ``words/<name>.txt``, in file order."""
    text = files(__package__).joinpath("words").joinpath(f"{name}.txt").read_text(encoding="utf-8")
    return tuple(ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#"))


def word_list(name: str) -> frozenset[str]:
    """The entries of ``words/<name>.txt`` as a set."""
    return frozenset(ordered_word_list(name))
