"""Wire formats of other clients: Anthropic's Messages API (``anthropic``), what shape
a list of message dicts has (``shapes``: OpenAI's or Anthropic's, detected, never
guessed), and a coding assistant's session logs (``claude_code``)."""

from __future__ import annotations

from .anthropic import from_anthropic, to_anthropic
from .shapes import Shape, shape_of_list

__all__ = ["Shape", "from_anthropic", "shape_of_list", "to_anthropic"]
