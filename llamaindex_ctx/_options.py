"""A LlamaIndex wrapper's settings checked as the core checks a strategy's options: a
misspelt one is a :class:`ctxfold.ConfigurationError` naming the closest setting and
every one, before pydantic reads them."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel

from ctxfold.strategies.registry import check_options

__all__ = ["check_fields"]


def check_fields(model: type[BaseModel], given: Iterable[str]) -> None:
    """Raise :class:`ctxfold.ConfigurationError` when a name in ``given`` is no field
    of ``model`` (by name or alias)."""
    fields = model.model_fields
    names = {*fields, *(f.alias for f in fields.values() if f.alias)}
    check_options(model.__name__, given, names)
