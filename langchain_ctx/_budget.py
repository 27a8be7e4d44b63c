"""The agent middleware's budget: a number of tokens, or a share of the context window
of the model each call goes to, in ``SummarizationMiddleware``'s form
(``("fraction", 0.8)``, ``("tokens", 8000)``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ctxfold.exceptions import ConfigurationError
from ctxfold.tokens import check_budget

__all__ = ["Budget", "BudgetSpec"]

#: What ``budget=`` takes: tokens, ``("tokens", n)`` or ``("fraction", share)``.
BudgetSpec = int | tuple[Literal["tokens"], int] | tuple[Literal["fraction"], float]

_FORMS = "budget=8000, budget=('tokens', 8000) or budget=('fraction', 0.8)"
#: The expand tool's longest page by default, and the share of a token budget it takes
#: at most, so that an answer fits the view it comes back into.
PAGE_TOKENS, PAGE_SHARE = 4000, 0.25
_MIN_PAGE = 64  # the expand tool's smallest page


@dataclass(frozen=True)
class Budget:
    """A budget of ``tokens``, or of ``fraction`` of the model's context window (its
    profile's ``max_input_tokens``, read at each call); exactly one is set."""

    tokens: int | None = None
    fraction: float | None = None

    @classmethod
    def of(cls, spec: object) -> Budget:
        """The budget ``spec`` names; a :class:`ctxfold.ConfigurationError` that shows
        the forms for any other value."""
        if not isinstance(spec, tuple):
            return cls(tokens=check_budget(spec))
        if len(spec) != 2 or spec[0] not in ("tokens", "fraction"):
            raise ConfigurationError(f"budget takes tokens or a fraction: {_FORMS}")
        kind, value = spec
        if kind == "tokens":
            return cls(tokens=check_budget(value))
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok or not 0 < value <= 1:
            raise ConfigurationError(
                "a budget's fraction of the context window is a number above 0 and at "
                f"most 1, got {value!r} ({_FORMS})"
            )
        return cls(fraction=float(value))

    def page_tokens(self) -> int:
        """The expand tool's page by default: :data:`PAGE_SHARE` of a token budget, at
        most :data:`PAGE_TOKENS` (a fraction's budget: :data:`PAGE_TOKENS`)."""
        if self.tokens is None:
            return PAGE_TOKENS
        return max(_MIN_PAGE, min(PAGE_TOKENS, int(PAGE_SHARE * self.tokens)))

    def for_model(self, model: object) -> int:
        """The tokens a call to ``model`` may take: :attr:`tokens`, or :attr:`fraction`
        of the model's ``profile["max_input_tokens"]`` (a
        :class:`ctxfold.ConfigurationError` saying to pass tokens when it has none)."""
        if self.tokens is not None:
            return self.tokens
        assert self.fraction is not None
        profile = getattr(model, "profile", None)
        window = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ConfigurationError(
                f"budget=('fraction', {self.fraction}) needs the model's context window, "
                f"and the model {type(model).__name__} has no profile['max_input_tokens']: "
                "pass a token count instead (budget=8000 or ('tokens', 8000)), or give the "
                "model a profile"
            )
        return max(1, int(self.fraction * window))
