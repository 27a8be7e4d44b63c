"""Which client's wire format a list of message dicts is in, told by its shape.

OpenAI's chat dicts and Anthropic's Messages-API dicts look alike for plain text, and
differ where it matters: tool calls (``tool_calls`` and ``tool`` messages against
``tool_use`` and ``tool_result`` blocks), reasoning (``thinking`` blocks), media
(``image_url`` against ``image`` with a ``source``). A list is read in the format its
messages show; one that shows both is refused, never guessed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..exceptions import InvalidMessageError

__all__ = ["Evidence", "Shape", "shape_of", "shape_of_list"]


class Shape(Enum):
    """A message dict's wire format, as far as its shape tells."""

    EITHER = "plain"  # text only: both formats read it alike
    OPENAI = "OpenAI"
    ANTHROPIC = "Anthropic"


@dataclass(frozen=True)
class Evidence:
    """What gave a message's shape away: ``shape`` and, for the error that names it,
    the message's ``index`` and the ``sign`` seen (``"a 'tool_use' block"``)."""

    shape: Shape
    index: int = -1
    sign: str = ""
    strong: bool = True  # structure only this format has; else a part it alone makes


#: Content block types only Anthropic's API has (a server tool's blocks end in
#: ``tool_use`` / ``tool_result``, so new ones are known by their suffix).
ANTHROPIC_BLOCKS = frozenset({"document", "search_result", "container_upload"})
#: Blocks Anthropic's models write that OpenAI-shaped messages carry too (LangChain's,
#: a gateway's, ctxfold's own ``to_openai``): a sign of Anthropic only where nothing
#: in the list is OpenAI's.
REASONING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
#: Content part types only OpenAI's APIs have.
OPENAI_PARTS = frozenset(
    {"image_url", "input_audio", "file", "refusal", "input_text", "input_image", "input_file"}
)
#: Message keys only OpenAI's chat format has.
OPENAI_KEYS = ("tool_calls", "tool_call_id", "function_call", "name")

_PLAIN = Evidence(Shape.EITHER)


def shape_of(raw: Mapping[str, Any], index: int = -1) -> Evidence:
    """The wire format ``raw``'s shape shows (:attr:`Shape.EITHER` when it shows none)."""
    if raw.get("role") == "tool":
        return Evidence(Shape.OPENAI, index, "role 'tool'")
    key = next((k for k in OPENAI_KEYS if raw.get(k) is not None), None)
    if key is not None:
        return Evidence(Shape.OPENAI, index, f"key {key!r}")
    content = raw.get("content")
    if not isinstance(content, list):
        return _PLAIN
    weak = _PLAIN
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if not isinstance(kind, str):
            continue
        if kind in OPENAI_PARTS:
            return Evidence(Shape.OPENAI, index, f"an {kind!r} part")
        if (
            kind in ANTHROPIC_BLOCKS
            or kind.endswith(("tool_use", "tool_result"))
            or (kind == "image" and "source" in part)
        ):
            return Evidence(Shape.ANTHROPIC, index, f"a {kind!r} block")
        if kind in REASONING_BLOCKS and weak is _PLAIN:
            weak = Evidence(Shape.ANTHROPIC, index, f"a {kind!r} block", strong=False)
    return weak


def shape_of_list(messages: Iterable[Any]) -> Shape:
    """The wire format of a list of messages: the one its dicts show (other items, such
    as :class:`ctxfold.Message` objects, show none; a thinking block shows Anthropic's
    only where nothing shows OpenAI's), :attr:`Shape.EITHER` when none shows one.
    Raises :class:`InvalidMessageError` naming a message of each format when the list
    shows both."""
    seen: dict[Shape, Evidence] = {}
    weak: Evidence | None = None
    for i, raw in enumerate(messages):
        if not isinstance(raw, Mapping):
            continue
        found = shape_of(raw, i)
        if not found.strong:
            weak = weak or found
        elif found.shape is not Shape.EITHER:
            seen.setdefault(found.shape, found)
            if len(seen) == 2:
                raise _mixed(seen[Shape.OPENAI], seen[Shape.ANTHROPIC])
    if seen:
        return next(iter(seen))
    return Shape.ANTHROPIC if weak is not None else Shape.EITHER


def _mixed(openai: Evidence, anthropic: Evidence) -> InvalidMessageError:
    first, second = sorted((openai, anthropic), key=lambda e: e.index)
    return InvalidMessageError(
        f"the messages mix two formats: message {first.index} is {first.shape.value}'s "
        f"({first.sign}) and message {second.index} is {second.shape.value}'s "
        f"({second.sign}); pass one format: OpenAI chat dicts, Anthropic Messages-API "
        "dicts, or convert each part with ctxfold.from_openai / ctxfold.from_anthropic"
    )
