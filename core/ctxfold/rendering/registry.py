"""Turn rendering: an agent's turns (and memory) become the messages of its next call.

Rendering happens at the start of every turn, never at storage time: the turns are the
record, the messages a view of them. A renderer is a pure function of
``(turns, memory, options)``: the same input gives the same messages, nothing is
written anywhere, the input is not touched.

- :class:`FullHistory`: the turns as the ordinary chat history they came from.
- :class:`SingleUserCoalesced`: a system message and one user message holding the task,
  the tools and data, the expected output, the newest tool calls with their results,
  the newest printed lines, the last turn's error, and the turns left.
- :class:`PressureTriggered`: the full history while it fits, a coalesced rendering (or
  any compressor) once a token or turn trigger fires.

A renderer option is normalized like a strategy option (:func:`normalize_renderer`);
a sub-agent's renderer inherits its parent's options (:meth:`BaseRenderer.child`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._registry import Registry, factories, normalize_option
from ..exceptions import ConfigurationError
from ..messages import Message
from .base import BaseRenderer, Renderer, RenderStats, _takes
from .coalesced import SingleUserCoalesced
from .turns import Turn, as_turns

__all__ = ["normalize_renderer", "register_renderer", "render", "renderers"]

# ------------------------------------------------------------------ registry, normalize


RendererFactory = Callable[..., Renderer]

#: The renderers by name; plug-ins register in ``ctxfold.renderers``.
REGISTRY: Registry[RendererFactory] = Registry(
    "renderer",
    {
        "single_user_coalesced": "ctxfold.rendering.coalesced:SingleUserCoalesced",
        "full_history": "ctxfold.rendering.full:FullHistory",
        "pressure": "ctxfold.rendering.pressure:PressureTriggered",
    },
    group="ctxfold.renderers",
    check=factories("renderer"),
)


def renderers() -> Mapping[str, RendererFactory]:
    """A read-only view of the registered renderer names and their factories."""
    return REGISTRY.view()


def register_renderer(name: str, factory: RendererFactory, *, replace: bool = False) -> None:
    """Make ``factory`` (a renderer class or a function returning one) available by
    ``name``. Raises :class:`ConfigurationError` if the name is taken, unless ``replace``."""
    REGISTRY.register(name, factory, replace=replace)


_RENDER_FORMS = (
    "None/False (off), True (single_user_coalesced), a renderer name "
    "(single_user_coalesced, full_history, pressure, or one registered), a renderer class "
    "or instance, (renderer, {options}), or a dict {'renderer': ..., **options}"
)


def normalize_renderer(
    option: Any, *, parent: Renderer | None = None, **overrides: Any
) -> Renderer | None:
    """Turn a rendering option into a renderer, or ``None`` for off.

    ``None``/``False`` -> ``None`` (the default: no rendering); ``True`` ->
    :class:`SingleUserCoalesced` with its defaults; a name or a class -> that renderer
    with its defaults; an instance -> itself; ``(renderer, options)`` or
    ``{"renderer": renderer, **options}`` -> options merged over the defaults
    (``overrides`` over those). With ``parent`` (a sub-agent's parent's renderer), the
    parent's options that the new renderer takes come between its defaults and the
    options given: a sub-agent inherits what it does not set.
    """

    def resolve(target: Any, options: dict[str, Any]) -> Renderer:
        if target is True:
            target = SingleUserCoalesced
        if isinstance(target, str):
            target = REGISTRY.require(target)
        if isinstance(target, Renderer) and not isinstance(target, type):
            if not options:
                return target
            if isinstance(target, BaseRenderer):
                return target.child(**options)
            raise ConfigurationError(
                "options were given with a renderer instance; configure the instance "
                "instead, or pass its class or name with the options"
            )
        if callable(target):
            inherited = dict(getattr(parent, "options", {}) or {})
            options = {
                **{k: v for k, v in inherited.items() if _takes(target, k)},
                **options,
            }
            try:
                made = target(**options)
            except TypeError as exc:
                raise ConfigurationError(
                    f"renderer {target!r} rejected its options: {exc}"
                ) from None
            if not isinstance(made, Renderer):
                raise ConfigurationError(f"{target!r} did not produce a renderer")
            return made
        raise ConfigurationError(
            f"cannot use {target!r} as a rendering option; use {_RENDER_FORMS}"
        )

    return normalize_option(option, overrides, resolve, keys=("renderer",))


def render(
    turns: Sequence[Turn | Mapping[str, Any]],
    memory: Mapping[str, Any] | None = None,
    *,
    renderer: Any = True,
    **options: Any,
) -> tuple[list[Message], RenderStats]:
    """Render an agent's turns into the messages of its next call.

    Args:
        turns: :class:`Turn` objects (or dicts of their fields), oldest first.
        memory: the mapping the agent keeps between turns (shown as data).
        renderer: any form :func:`normalize_renderer` takes (default: coalesced).
        **options: this call's options (``mission``, ``tools``, ``max_turns``, ...).

    Returns:
        ``(messages, stats)``; ``ctxfold.to_openai(messages)`` gives OpenAI dicts.
    """
    chosen = normalize_renderer(renderer)
    if chosen is None:
        raise ConfigurationError("render() needs a renderer; renderer=None turns rendering off")
    return chosen.to_messages(as_turns(turns), memory, options)
