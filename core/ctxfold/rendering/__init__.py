"""Turn rendering: an agent's turns (:mod:`.turns`) become the messages of its next
call through a renderer (:mod:`.base`): the full history (:mod:`.full`), one coalesced
user message (:mod:`.coalesced`), or the full history until pressure triggers a
fallback (:mod:`.pressure`). :mod:`.registry` names them and normalizes options."""

from .base import DEFAULT_SYSTEM, BaseRenderer, Renderer, RenderStats
from .coalesced import SingleUserCoalesced
from .full import FullHistory
from .pressure import PressureTriggered
from .registry import normalize_renderer, register_renderer, render, renderers
from .turns import ToolUse, Turn, as_turns, turns_from_messages

__all__ = [
    "DEFAULT_SYSTEM",
    "BaseRenderer",
    "FullHistory",
    "PressureTriggered",
    "RenderStats",
    "Renderer",
    "SingleUserCoalesced",
    "ToolUse",
    "Turn",
    "as_turns",
    "normalize_renderer",
    "register_renderer",
    "render",
    "renderers",
    "turns_from_messages",
]
