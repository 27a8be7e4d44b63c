"""Reversible compaction: a layer around a strategy that stores every original it
folds (:mod:`.rounds`, :mod:`.records`), gives them back (:mod:`.expand`) and lets a
model read them on demand (:mod:`.tool`)."""

from .expand import Expansion, expand, uncompress
from .rounds import RoundSettings, compact_reversibly
from .tool import ExpandTool, expand_tool

__all__ = [
    "ExpandTool",
    "Expansion",
    "RoundSettings",
    "compact_reversibly",
    "expand",
    "expand_tool",
    "uncompress",
]
