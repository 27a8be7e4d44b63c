"""The reference index: references deduplicated by type and value across messages,
scored for relevance to the current goal and recent topics, queryable by type, text
and id, and written as the reconstruction block that tells the model how to get each
one back."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from ..exceptions import ConfigurationError
from ..hooks import emit
from ..messages import Message
from ..text.primitives import TokenSet
from ..tokens import TokenCounter, get_counter
from ..wire.openai import as_messages
from .extractors import BUILTIN_TYPES, Reference, extract, reference_id

__all__ = ["BLOCK_HEADER", "RETRIEVAL", "ReferenceIndex", "check_max_references"]

#: How the model can get each type back, for the reconstruction block; ``{expand}``
#: marks the types whose full text only the verbatim store holds.
RETRIEVAL: Mapping[str, str] = MappingProxyType(
    {
        "file": "read the file",
        "url": "fetch the URL",
        "function": "search the code",
        "class": "search the code",
        "error": "re-run to reproduce{expand}",
        "command": "run again if needed",
        "snippet": "first lines shown{expand}",
        "decision": "as decided",
        "identifier": "search the conversation or the code",
    }
)
_LABELS = {
    "file": "Files",
    "url": "URLs",
    "function": "Functions",
    "class": "Classes and types",
    "error": "Errors",
    "command": "Commands",
    "snippet": "Snippets",
    "decision": "Decisions",
    "identifier": "Names and ids",
}
_TYPE_WEIGHT = {
    "file": 1.0,
    "error": 0.9,
    "url": 0.8,
    "decision": 0.8,
    "command": 0.7,
    "function": 0.6,
    "class": 0.6,
    "snippet": 0.4,
    "identifier": 0.7,
}
_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|\d+")
_SHOWN_WITH_ID = frozenset({"error", "snippet", "decision"})
BLOCK_HEADER = "[ctxfold references: mentioned in earlier messages; how to get each back]"


def _words(text: str) -> frozenset[str]:
    return frozenset(w.lower() for w in _WORD.findall(text) if len(w) > 2 or w.isdigit())


def check_max_references(value: object) -> int | None:
    """A ``max_references`` option: an integer >= 1, or ``None`` for no cap."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigurationError(f"max_references must be an integer >= 1 or None, got {value!r}")
    return value


class ReferenceIndex:
    """References deduplicated by ``(type, value)``, queryable by type, text and id.

    Adding a reference seen before merges the sightings (``first_seen``,
    ``last_seen``, ``count``; the first context stays) and emits
    ``reference_deduplicated``; a new one emits ``reference_extracted``.
    :meth:`score` sets every reference's relevance to the current goal and recent
    topics and, with ``max_references``, keeps only the most relevant.
    :meth:`block` writes the reconstruction block for the model.
    """

    def __init__(
        self, references: Iterable[Reference] = (), *, max_references: int | None = None
    ) -> None:
        self.max_references = check_max_references(max_references)
        self._by_key: dict[tuple[str, str], Reference] = {}
        self._by_id: dict[str, Reference] = {}
        for ref in references:
            self.add(ref)

    @classmethod
    def from_messages(
        cls,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        goal: str | None = None,
        max_references: int | None = None,
    ) -> ReferenceIndex:
        """Extract every reference of ``messages`` and score them against ``goal``
        (default: the last user message) and the newest messages."""
        msgs = as_messages(messages)
        index = cls(max_references=max_references)
        index.add_messages(msgs)
        if goal is None:
            goal = next((m.text for m in reversed(msgs) if m.role == "user"), "")
        index.score(goal=goal, recent=[m.text for m in msgs[-4:]], now=len(msgs) - 1)
        return index

    # ---------------------------------------------------------------- building

    def add_messages(self, messages: Sequence[Message], *, start: int = 0) -> None:
        """Extract and add the references of ``messages`` (indexes from ``start``)."""
        by_key = self._by_key
        for i, type_, value, kind, context in extract(messages, start=start):
            old = by_key.get((type_, value))
            ref_id = reference_id(type_, value) if old is None else old.id
            self.add(Reference(ref_id, type_, value, kind, context, i, i, i))

    def add(self, ref: Reference) -> Reference:
        """Add ``ref``, merged with an earlier sighting of the same type and value."""
        key = (ref.type, ref.value)
        old = self._by_key.get(key)
        if old is None:
            self._by_key[key] = self._by_id[ref.id] = ref
            emit("reference_extracted", reference=ref)
            return ref
        merged = Reference(  # the constructor: dataclasses.replace is ten times slower
            old.id,
            old.type,
            old.value,
            old.kind if _kind_rank(old.kind) >= _kind_rank(ref.kind) else ref.kind,
            old.context or ref.context,
            old.source,
            min(old.first_seen, ref.first_seen),
            max(old.last_seen, ref.last_seen),
            old.count + ref.count,
            old.relevance,
        )
        self._by_key[key] = self._by_id[ref.id] = merged
        emit("reference_deduplicated", reference=merged, duplicate=ref)
        return merged

    # ---------------------------------------------------------------- queries

    def __len__(self) -> int:
        return len(self._by_key)

    def __iter__(self) -> Iterator[Reference]:
        """In order of first sighting, then type and value."""
        return iter(sorted(self._by_key.values(), key=lambda r: (r.first_seen, r.type, r.value)))

    def __contains__(self, ref_id: object) -> bool:
        return ref_id in self._by_id

    def get(self, ref_id: str) -> Reference | None:
        """The reference with this id, or ``None``."""
        return self._by_id.get(ref_id)

    def by_type(self, type_: str) -> list[Reference]:
        """The references of one type, in order of first sighting."""
        return [r for r in self if r.type == type_]

    def types(self) -> list[str]:
        """The types present: built-in ones in their order, then custom ones."""
        present = {r.type for r in self._by_key.values()}
        return [t for t in BUILTIN_TYPES if t in present] + sorted(present - set(BUILTIN_TYPES))

    def search(self, text: str, *, type: str | None = None, limit: int = 10) -> list[Reference]:
        """References matching ``text``, best first: the exact value, then values that
        contain it, then shared words; ties go to the more relevant, then the older."""
        needle = text.strip().lower()
        if not needle:
            return []
        words = _words(text)
        ranked: list[tuple[float, float, int, str, Reference]] = []
        for r in self._by_key.values():
            if type is not None and r.type != type:
                continue
            low = r.value.lower()
            match = 10.0 if low == needle else 5.0 if needle in low else 0.0
            match += len(words & _words(r.value)) + 0.25 * len(words & _words(r.context))
            if match > 0:
                ranked.append((-match, -r.relevance, r.first_seen, r.id, r))
        ranked.sort(key=lambda t: t[:4])
        return [t[4] for t in ranked[: max(limit, 0)]]

    # ---------------------------------------------------------------- relevance

    def score(
        self, *, goal: str = "", recent: Sequence[str] | str = (), now: int | None = None
    ) -> None:
        """Set every reference's relevance: its type, words shared with ``goal`` (the
        task or the last question) and with ``recent`` (the newest messages' text),
        how often and how lately it was seen (``now``: the newest message index).
        With ``max_references``, only that many of the most relevant are kept."""
        goal_words = _words(goal)
        recent_words = _words(recent if isinstance(recent, str) else " ".join(recent))
        refs = list(self._by_key.values())
        if now is None:
            now = max((r.last_seen for r in refs), default=0)
        span = max(now, 1)
        for r in refs:
            words = _words(r.value)
            rel = _TYPE_WEIGHT.get(r.type, 0.8)
            rel += 1.5 * min(len(words & goal_words), 3) / 3
            rel += 1.0 * min(len(words & recent_words), 3) / 3
            rel += 0.4 * math.log1p(r.count)
            rel += 0.8 * max(r.last_seen, 0) / span
            scored = Reference(
                *(r.id, r.type, r.value, r.kind, r.context),
                *(r.source, r.first_seen, r.last_seen, r.count, round(rel, 6)),
            )
            self._by_key[(r.type, r.value)] = self._by_id[r.id] = scored
        if self.max_references is not None and len(self._by_key) > self.max_references:
            keep = self.top(self.max_references)
            self._by_key = {(r.type, r.value): r for r in keep}
            self._by_id = {r.id: r for r in keep}

    def top(self, n: int | None = None) -> list[Reference]:
        """The ``n`` most relevant references (all with ``None``), most relevant first."""
        ranked = sorted(
            self._by_key.values(), key=lambda r: (-r.relevance, r.first_seen, r.type, r.value)
        )
        return ranked if n is None else ranked[:n]

    # ---------------------------------------------------------------- the block

    def block(
        self,
        *,
        max_tokens: int,
        counter: TokenCounter | str | None = None,
        shown: str = "",
        expand_ids: Mapping[str, str] | None = None,
    ) -> str:
        """The reconstruction block: the most relevant references that fit in
        ``max_tokens``, grouped by type, each group saying how to get its references
        back (read the file, fetch the URL, search the code, ...). References whose
        value is already in ``shown`` (the text the model sees anyway) are left out.
        ``expand_ids`` maps reference ids to the stored id of their source message:
        errors, snippets and decisions then carry an ``[expand <id>]`` marker and the
        groups say so. Returns ``""`` when nothing fits or nothing is left to list."""
        expandable = expand_ids is not None
        count = get_counter(counter).count_text
        visible = TokenSet(shown) if shown else None
        chosen: dict[str, list[Reference]] = {}
        used = count(BLOCK_HEADER) + 1
        if used > max_tokens:
            return ""
        for r in self.top():
            if visible is not None and (r.value in visible or r.value in shown):
                continue
            cost = count(self._show(r, expand_ids)) + 1
            if r.type not in chosen:
                cost += count(self._label(r.type, expandable)) + 1
            if used + cost > max_tokens:
                continue
            chosen.setdefault(r.type, []).append(r)
            used += cost
        while chosen:
            text = self._render(chosen, expand_ids)
            if count(text) <= max_tokens:
                return text
            worst = min(
                (r for refs in chosen.values() for r in refs),
                key=lambda r: (r.relevance, -r.first_seen),
            )
            chosen[worst.type].remove(worst)
            if not chosen[worst.type]:
                del chosen[worst.type]
        return ""

    def _render(
        self, chosen: Mapping[str, list[Reference]], expand_ids: Mapping[str, str] | None
    ) -> str:
        lines = [BLOCK_HEADER]
        for type_ in [t for t in self.types() if t in chosen]:
            refs = sorted(chosen[type_], key=lambda r: (r.first_seen, r.value))
            items = "; ".join(self._show(r, expand_ids) for r in refs)
            lines.append(f"{self._label(type_, expand_ids is not None)} {items}")
        return "\n".join(lines)

    @staticmethod
    def _label(type_: str, expandable: bool) -> str:
        how = RETRIEVAL.get(type_, "look it up")
        how = how.format(expand=", or expand(id)" if expandable else "")
        return f"{_LABELS.get(type_, type_.replace('_', ' ').capitalize())} ({how}):"

    @staticmethod
    def _show(r: Reference, expand_ids: Mapping[str, str] | None) -> str:
        value = r.value
        if r.type == "snippet":
            first = value.strip().splitlines()[0] if value.strip() else value
            value = first if first == value.strip() else f"{first} ..."
        target = expand_ids.get(r.id) if expand_ids is not None else None
        if target and r.type in _SHOWN_WITH_ID:
            return f"{value} [expand {target}]"
        return value


_KIND_ORDER = ("definition", "exception")


def _kind_rank(kind: str) -> int:
    """A definition outranks a call, an exception a frame: the stronger kind stays."""
    return 1 if kind in _KIND_ORDER else 0
