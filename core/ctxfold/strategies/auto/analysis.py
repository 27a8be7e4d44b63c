"""Stage 1, analysis: what can be known of one message alone (its layers, adapter
pieces, segments and their features, tool calls, identifiers), memoized by content so
that the next turn re-analyses only new messages."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..._state import LRU, memo
from ...messages import Message, ToolCall, speaker_tag
from ...text.adapters import FormatAdapter, Piece, adapters, registry_version, split_message_text
from ...text.layers import (
    Layers,
    looks_indentation_sensitive,
    maybe_whitespace,
    minify_json,
    normalize_whitespace,
    truncate_observation,
)
from ...text.primitives import find_identifiers, json_strings, json_values
from ...text.scoring import ALL_FLAGS, Features, Flags, features, segments_of

__all__ = ["Analysis", "Analyzer"]


@dataclass(frozen=True)
class Analysis:
    """The part of a plan that depends on the message alone (cached across calls)."""

    tag: str
    pieces: tuple[Piece, ...]
    segments: tuple[tuple[str, ...], ...]
    features: tuple[tuple[Features, ...], ...]
    calls: tuple[ToolCall, ...]
    call_features: tuple[Features, ...]
    reasons: tuple[str, ...]
    cpt: float
    identifiers: tuple[tuple[str, str], ...]
    echo: float
    savings: Mapping[str, int]
    words: frozenset[str]  # content words, for the conversation's word rarity


_ANALYSES: LRU[Analysis] = memo(5_000)


class Analyzer:
    """Analyses messages with one set of layers and adapters."""

    def __init__(self, layers: Layers, adapters: Sequence[FormatAdapter] | None) -> None:
        self.layers = layers
        self.adapters = adapters

    def __call__(self, m: Message, tok: int) -> Analysis:
        """What does not depend on the rest of the conversation, cached by content."""
        key = (m.fingerprint, tok, self.layers, self._adapter_key())
        hit = _ANALYSES.get(key)
        if hit is None:
            hit = self._analyse(m, tok)
            _ANALYSES.put(key, hit)
        return hit

    def _adapter_key(self) -> tuple[Any, ...]:
        if self.adapters is not None:
            return tuple(self.adapters)
        return ("registry", registry_version())

    def _analyse(self, m: Message, tok: int) -> Analysis:
        layers = self.layers
        reasons: list[str] = []
        savings: Counter[str] = Counter()
        calls = m.tool_calls
        if layers.json and calls:
            calls = tuple(
                ToolCall(c.id, c.name, minify_json(c.arguments) or c.arguments, c.type)
                for c in calls
            )
        call_texts = [f"{c.name}({c.arguments})" for c in calls]
        identifiers: list[tuple[str, str]] = []
        for c in calls:  # what the assistant acted on counts twice
            acted = [(k, v) for k, v, _, _ in find_identifiers(json_strings(c.arguments))]
            acted += json_values(c.arguments, names=True)
            identifiers += acted + acted  # what the assistant acted on counts twice
        call_features = tuple(features(t[:1500]) for t in call_texts)
        text = m.content if isinstance(m.content, str) else m.text
        cpt = max(len(text) + sum(len(t) for t in call_texts), 1) / max(tok - 3, 1)
        cpt = max(cpt, 1.0)
        strings = json_strings(text) if text[:1] in "[{" else text
        is_json = strings is not text
        if is_json:  # ids live in the values; the keys are schema
            identifiers += json_values(text)
            identifiers += [(k, v) for k, v, _, _ in find_identifiers(strings)]
        if layers.json:
            mini = minify_json(text)
            if mini is not None:
                savings["json"] += round((len(text) - len(mini)) / cpt)
                text = mini
                reasons.append("layer:json")
        truncated = False
        if layers.truncate and m.role == "tool":
            cut = truncate_observation(
                text,
                max_lines=layers.truncate_lines,
                head=layers.truncate_head,
                tail=layers.truncate_tail,
            )
            if cut is not None:
                identifiers += [(k, v) for k, v, _, _ in find_identifiers(text)]
                truncated = True
                savings["truncate"] += round((len(text) - len(cut)) / cpt)
                text = cut
                reasons.append("layer:truncate")
        if layers.whitespace and maybe_whitespace(text):
            norm = normalize_whitespace(text, prose=not looks_indentation_sensitive(text))
            if norm != text:
                savings["whitespace"] += round((len(text) - len(norm)) / cpt)
                text = norm
                reasons.append("layer:whitespace")
        builtin_only = self.adapters is None and registry_version() == 0
        if builtin_only and "\n" not in text and text[:1] not in "[{<":
            pieces, used = [Piece(text, keep=False)], list[str]()  # one line: no format
        else:
            pieces, used = split_message_text(text, self.adapters or adapters())
        rebuilt = "".join(p.text for p in pieces)
        if len(rebuilt) > len(text):  # an adapter must never make things bigger
            pieces = [Piece(text, keep=False)]
            reasons.append(f"adapter_reverted:{'+'.join(used)}")
        else:
            reasons.extend(f"adapter:{a}" for a in used if a != "prose")
            if rebuilt != text:
                savings["adapters"] += round((len(text) - len(rebuilt)) / cpt)
        segments: list[tuple[str, ...]] = []
        feats: list[tuple[Features, ...]] = []
        # One identifier scan for the whole text when the pieces tile it exactly.
        whole = list(find_identifiers(text)) if rebuilt == text and len(pieces) > 1 else None
        offset = 0
        next_id = 0
        for p in pieces:
            segs = (
                segments_of(p)
                if not p.keep
                else (p.text.splitlines(keepends=True) if "\n" in p.text.rstrip("\n") else [p.text])
            )
            if whole is None:
                found = list(find_identifiers(p.text))
            else:
                stop = offset + len(p.text)
                found = []
                while next_id < len(whole) and whole[next_id][2] < stop:
                    k, v, a, b = whole[next_id]
                    found.append((k, v, a - offset, b - offset))
                    next_id += 1
                offset = stop
            if not truncated and not is_json:
                identifiers += [(kind, value) for kind, value, _, _ in found]
            flags = Flags.of(p.text) if len(segs) > 4 else ALL_FLAGS
            weight = p.weight * (2.0 if p.keep else 1.0)
            if not found:
                seg_feats = [features(seg, (), flags, weight) for seg in segs]
            else:
                seg_feats = []
                pos = 0
                at = 0
                for seg in segs:
                    end = pos + len(seg)
                    kinds: list[str] = []
                    while at < len(found) and found[at][2] < end:
                        kinds.append(found[at][0])
                        at += 1
                    seg_feats.append(features(seg, kinds, flags, weight))
                    pos = end
            segments.append(tuple(segs))
            feats.append(tuple(seg_feats))
        echo = 1.0 if m.role == "tool" else 2.0  # ids a person or the agent repeats matter
        tag = speaker_tag(m)
        words: frozenset[str] = frozenset().union(*(f.content for fs in feats for f in fs))
        return Analysis(
            tag,
            tuple(pieces),
            tuple(segments),
            tuple(feats),
            calls,
            call_features,
            tuple(reasons),
            cpt,
            tuple(identifiers),
            echo,
            dict(savings),
            words,
        )
