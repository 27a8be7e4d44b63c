"""A LangChain wrapper's settings checked as the core checks a strategy's options: a
misspelt one is a :class:`ctxfold.ConfigurationError` naming the closest setting and
every one, where Python would raise a ``TypeError`` from deep inside."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from ctxfold.session import CompactionOptions
from ctxfold.strategies.registry import check_options

__all__ = ["check_settings"]


def check_settings(maker: Callable[..., Any], given: Iterable[str]) -> None:
    """Raise :class:`ctxfold.ConfigurationError` when a name in ``given`` (the
    ``**options`` ``maker`` passes on to a session) is neither one of ``maker``'s named
    parameters nor a session's setting (:class:`ctxfold.session.CompactionOptions`)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    params = inspect.signature(maker).parameters.values()
    named = [p.name for p in params if p.kind in kinds and p.name != "self"]
    owner = maker.__qualname__.split(".")[0]
    check_options(owner, given, [*named, *CompactionOptions.__optional_keys__])
