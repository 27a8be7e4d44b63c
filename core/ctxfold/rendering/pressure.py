"""The pressure-triggered renderer: the full history while it fits, a coalesced
rendering (or any compressor) once a token or turn trigger fires."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from ..contract import Compressor
from ..exceptions import ConfigurationError, CtxfoldError
from ..messages import Message
from ..result import from_user
from ..strategies.registry import normalize
from .base import (
    BaseRenderer,
    Check,
    Renderer,
    RenderStats,
    _counter,
    _for,
    _optional_count,
    _optional_positive,
    _paragraphs,
    _takes,
)
from .coalesced import SingleUserCoalesced
from .full import FullHistory
from .registry import normalize_renderer
from .turns import Turn

__all__ = ["PressureTriggered"]


def _renderer_or_compressor(value: Any) -> Renderer | Compressor:
    if isinstance(value, (Renderer, Compressor)) and not isinstance(value, type):
        return value
    try:
        found = normalize_renderer(value)
    except ConfigurationError as not_renderer:
        try:
            compressor = normalize(value)
        except ConfigurationError:
            raise TypeError(f"a renderer or a compressor ({not_renderer})") from None
        if compressor is None:
            raise TypeError("a renderer or a compressor, not None") from None
        return compressor
    if found is None:
        raise TypeError("a renderer or a compressor (a name, a class or an instance)")
    return found


def _renderer(value: Any) -> Renderer:
    found = normalize_renderer(value)
    if found is None:
        raise TypeError("a renderer (a name, a class or an instance)")
    return found


class PressureTriggered(BaseRenderer):
    """The full history while it fits; once a trigger fires, the ``fallback``.

    ``trigger_tokens``: switch when the full rendering takes more tokens than this.
    ``trigger_turns``: switch when there are more turns than this. At least one is
    needed. ``fallback`` is a renderer (default :class:`SingleUserCoalesced`) or a
    compressor (``"auto"``, any strategy) that compresses the full rendering to
    ``budget`` (default ``trigger_tokens``). ``full`` is the renderer used while no
    trigger fires (default :class:`FullHistory`). Other options (``mission``,
    ``tools``, ``max_turns``, ...) go to whichever renderer takes them.

    A compressor fallback is as pure as the compressor: ``auto`` writes the text it
    folds to its verbatim store unless ``reversible=False``.
    """

    label = "pressure"
    DEFAULTS = MappingProxyType(
        {
            "full": "full_history",
            "fallback": "single_user_coalesced",
            "trigger_tokens": None,
            "trigger_turns": None,
            "budget": None,
            "counter": "o200k_base",
        }
    )
    _OWN: ClassVar[Mapping[str, Check]] = MappingProxyType(
        {
            "full": _renderer,
            "fallback": _renderer_or_compressor,
            "trigger_tokens": _optional_positive,
            "trigger_turns": _optional_count,
            "budget": _optional_positive,
            "counter": _counter,
        }
    )

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        o = self._options
        if o["trigger_tokens"] is None and o["trigger_turns"] is None:
            raise ConfigurationError(
                "pressure: give trigger_tokens= and/or trigger_turns= (when to switch "
                "from the full history)"
            )
        if isinstance(o["fallback"], Compressor) and not (o["budget"] or o["trigger_tokens"]):
            raise ConfigurationError(
                "pressure: a compressor fallback needs budget= or trigger_tokens= (the "
                "budget it compresses to)"
            )

    def _checked(self, options: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in options.items():
            check = self._OWN.get(key)
            if check is None:  # an option for the renderers: checked as they check it
                check = SingleUserCoalesced.CHECKS.get(key) or FullHistory.CHECKS.get(key)
            if check is None:
                raise ConfigurationError(
                    f"pressure: unknown option {key!r}; it takes {sorted(self._OWN)} and "
                    "the options of its full and fallback renderers"
                )
            try:
                out[key] = check(value)
            except (TypeError, CtxfoldError) as exc:
                raise ConfigurationError(
                    f"pressure: option {key}={value!r} is not valid; use {exc}"
                ) from None
        return out

    @classmethod
    def accepts(cls, key: str) -> bool:
        return key in cls._OWN or any(_takes(r, key) for r in (SingleUserCoalesced, FullHistory))

    def _render(
        self, turns: tuple[Turn, ...], memory: Mapping[str, Any], opts: dict[str, Any]
    ) -> tuple[list[Message], RenderStats]:
        passed = {k: v for k, v in opts.items() if k not in self._OWN}
        passed["counter"] = opts["counter"]
        full: Renderer = opts["full"]
        messages, stats = full.to_messages(turns, memory, _for(full, passed))
        trigger = None
        if opts["trigger_turns"] is not None and len(turns) > opts["trigger_turns"]:
            trigger = "turns"
        elif opts["trigger_tokens"] is not None and stats.tokens > opts["trigger_tokens"]:
            trigger = "tokens"
        if trigger is None:
            return messages, stats
        fallback = opts["fallback"]
        if isinstance(fallback, Compressor):
            budget = opts["budget"] or opts["trigger_tokens"]
            result = fallback.compress(messages, budget=budget, counter=opts["counter"])
            out = list(result.messages)
            kept = set(out)
            said = [m for m in messages if from_user(m)][len(_paragraphs(passed.get("mission"))) :]
            return out, RenderStats(
                f"{self.label}:{type(fallback).__name__}",
                len(turns),
                len(out),
                result.stats.tokens_after,
                stats.tool_calls_total,
                sum(len(m.tool_calls) for m in out),
                stats.output_lines_total,
                min(
                    sum(len(m.text.split("\n")) for m in said if m in kept),
                    stats.output_lines_total,
                ),
                trigger=trigger,
            )
        if opts["budget"] is not None and _takes(fallback, "budget"):
            passed.setdefault("budget", opts["budget"])
        out, fstats = fallback.to_messages(turns, memory, _for(fallback, passed))
        return out, RenderStats(
            f"{self.label}:{fstats.renderer}",
            fstats.turns,
            fstats.messages,
            fstats.tokens,
            fstats.tool_calls_total,
            fstats.tool_calls_shown,
            fstats.output_lines_total,
            fstats.output_lines_shown,
            fstats.results_shortened,
            fstats.errors_recovered,
            trigger,
        )
