"""Reversible compaction: a layer around a strategy that stores every original it
folds (:mod:`.rounds`, :mod:`.records`), gives them back (:mod:`.expand`) and lets a
model read them on demand (:mod:`.tool`)."""

from .expand import Expansion, expand, uncompress
from .rounds import Round, RoundSettings, RoundShare, make_round, round_share
from .tool import ExpandTool, expand_tool

__all__ = [
    "ExpandTool",
    "Expansion",
    "Round",
    "RoundSettings",
    "RoundShare",
    "expand",
    "expand_tool",
    "make_round",
    "round_share",
    "uncompress",
]
