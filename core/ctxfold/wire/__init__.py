"""Wire formats: OpenAI's chat completions (``openai``, ctxfold's own dict form),
Anthropic's Messages API (``anthropic``), what shape
a list of message dicts has (``shapes``: OpenAI's or Anthropic's, detected, never
guessed), and a coding assistant's session logs (``claude_code``)."""

from __future__ import annotations

from .anthropic import from_anthropic, to_anthropic
from .openai import as_messages, from_openai, to_openai
from .shapes import Shape, shape_of_list

__all__ = [
    "Shape",
    "as_messages",
    "from_anthropic",
    "from_openai",
    "shape_of_list",
    "to_anthropic",
    "to_openai",
]
