"""A lexical index over a history's passages (a short message whole, a long one in
runs of sentences or lines, a tool call by its name and arguments), scored BM25-style
against a query's terms; built once and extended as a conversation grows."""

from __future__ import annotations

import math
import struct
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Collection, Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from itertools import islice
from typing import TYPE_CHECKING, overload

from .._column import Column
from .._state import LRU, memo
from ..messages import Message, speaker_tag
from ..models.embedders import Embedder, embed
from ..text.adapters import Piece
from ..text.primitives import split_lines, split_sentences
from ..text.scoring import elide, features, says_little
from ..tokens import TokenCounter
from ..validity import SYSTEM_ROLES
from .periods import Period, day_of
from .stamps import metadata_stamp, split_stamp
from .terms import terms

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["PASSAGE_CHARS", "Passage", "RecallIndex"]

#: A passage holds about this many characters (about 80 tokens): a chat message is
#: one, a long one is cut in runs of whole sentences or lines this long.
PASSAGE_CHARS = 320
_K1, _B = 1.2, 0.75  # BM25's term saturation and length normalization
#: Past this many postings a query's terms hold, :meth:`RecallIndex.search` sums them
#: in arrays (at 600 messages a query holds a few hundred, where a loop is faster).
SCAN_IN_ARRAYS = 4_000
#: :meth:`RecallIndex.extend` reads the passages of at most this many messages as it
#: indexes them (what each carries, its brief text): a turn's few cost a fraction of
#: a millisecond then, where a query reaching hundreds of unread ones waits a tenth
#: of a second; a long history indexed at once is read as queries reach it.
READ_AHEAD = 64


@dataclass(frozen=True, slots=True)
class Passage:
    """A piece of history message ``message``: its ``text`` and whether that is the
    message's whole text (``whole``); ``call`` when it shows a tool call."""

    message: int
    text: str
    whole: bool
    call: bool = False


_WHOLE, _CALL = 1, 2  # a passage's flags, one byte each
_POSTING = struct.Struct("II").pack  # a posting: passage, count, as ``array("I")`` reads it


class Passages(Sequence[Passage]):
    """The index's passages, kept as columns (their messages, texts and flags) and
    made :class:`Passage` objects when read: a long history's hundreds of thousands
    of passages are then nothing the garbage collector walks, not an object each."""

    def __init__(self) -> None:
        self.messages = array("I")
        self.texts: Column[str] = Column()
        self.flags = bytearray()

    def append(self, message: int, text: str, whole: bool, call: bool) -> None:
        """Add the next passage."""
        self.messages.append(message)
        self.texts.append(text)
        self.flags.append((_WHOLE if whole else 0) | (_CALL if call else 0))

    def __len__(self) -> int:
        return len(self.texts)

    @overload
    def __getitem__(self, pid: int) -> Passage: ...

    @overload
    def __getitem__(self, pid: slice) -> list[Passage]: ...

    def __getitem__(self, pid: int | slice) -> Passage | list[Passage]:
        if isinstance(pid, slice):
            return [self[k] for k in range(*pid.indices(len(self)))]
        flags = self.flags[pid]
        return Passage(
            self.messages[pid], self.texts[pid], bool(flags & _WHOLE), bool(flags & _CALL)
        )


_SPLIT: LRU[tuple[tuple[str, bool, bool], ...]] = memo(20_000)


def passages_of(m: Message) -> tuple[tuple[str, bool, bool], ...]:
    """``(text, whole, call)`` of each passage of ``m`` (memoized by content)."""
    return _SPLIT.cached(m.fingerprint, _passages, m)


def _passages(m: Message) -> tuple[tuple[str, bool, bool], ...]:
    return tuple(_split(m))


def _split(m: Message) -> Iterable[tuple[str, bool, bool]]:
    text = split_stamp(m.text)[1].strip()  # a block shows the date on a line of its own
    calls = [f"{c.name}({c.arguments})" for c in m.tool_calls]
    if text and len(text) <= PASSAGE_CHARS * 3 // 2:
        yield text, not calls, False
    elif text:
        lines = text.count("\n") >= 3
        run = ""
        for seg in split_lines(text) if lines else split_sentences(text):
            if run and len(run) + len(seg) > PASSAGE_CHARS:
                yield run.strip(), False, False
                run = ""
            run += seg
        if run.strip():
            yield run.strip(), False, False
    for call in calls:
        yield call[: PASSAGE_CHARS * 2], False, True


class RecallIndex:
    """BM25 over the passages of a growing history (system messages are not indexed:
    they are always shown). :meth:`extend` adds messages; :meth:`search` scores the
    passages of the messages before a point."""

    def __init__(
        self, messages: Sequence[Message] = (), *, embedder: Embedder | None = None
    ) -> None:
        self.embedder = embedder
        self._vectors: list[npt.NDArray[np.float32]] = []  # blocks of passage rows
        self._embedded = 0  # passages embedded so far
        self.passages = Passages()
        self.speakers: Column[str] = Column()  # per message
        self.names: set[str] = set()  # the speakers' names, as terms
        # what reading a passage finds, kept as atoms (a dict of them is nothing the
        # collector walks): whether it was read, its brief text where that is not its
        # text, the terms the brief text leaves out where there are any
        self._read = bytearray()
        self._briefs: dict[int, str] = {}
        self._left: dict[int, tuple[str, ...]] = {}
        self.stamps: Column[str | None] = Column()  # per message: its time context
        self.days: Column[date | None] = Column()  # per message: the day its stamp names
        self.opens = bytearray()  # per message: whether it opens with its stamp
        self._first = array("I", [0])  # per message: its first passage; then the count
        # per term: the passages holding it, in order, each with how often it does,
        # as pairs of 4-byte ints in one byte string (a million postings take 8 MB,
        # not 64 as tuples would; a byte string is nothing the garbage collector
        # walks, and a dict of strings and byte strings is not walked either)
        self._postings: dict[str, bytearray] = {}
        self._lengths = array("I")
        self._total = 0
        self._costs: dict[str, dict[int, int]] = {}  # per counter: 2 * pid + full
        self._carries: dict[int, float] = {}
        #: What a caller derived from the index as it is (a query's ranking), dropped
        #: when it grows.
        self.derived: dict[Hashable, object] = {}
        self.extend(messages)

    def __len__(self) -> int:
        return len(self.speakers)

    def extend(self, messages: Iterable[Message]) -> None:
        """Index ``messages``, the history's next ones. A few at once (a turn's) are
        read as well (see :data:`READ_AHEAD`)."""
        start, had = len(self.passages), len(self)
        self._add(messages)
        if len(self) - had <= READ_AHEAD:
            for pid in range(start, len(self.passages)):
                self.carries(pid)
                self._read_brief(pid)

    def _add(self, messages: Iterable[Message]) -> None:
        self.derived.clear()
        k, pid = len(self.speakers), len(self.passages)
        stamp, day = (self.stamps[-1], self.days[-1]) if k else (None, None)
        for m in messages:
            head = split_stamp(m.text)[0]  # stamp_of, with whether the text opens with it
            own = head or metadata_stamp(m.metadata)
            if own:  # else the time context of the message before
                stamp, day = own, day_of(own)
            self.opens.append(head is not None)
            self.stamps.append(stamp)
            self.days.append(day)
            self.speakers.append(speaker_tag(m))
            if m.role not in SYSTEM_ROLES:
                pid = self._add_passages(m, k, pid)
            self._first.append(pid)
            k += 1
        self._read.extend(bytes(pid - len(self._read)))  # none read yet

    def _add_passages(self, m: Message, k: int, pid: int) -> int:
        """Index the passages of message ``k``, ``m``, the first as ``pid``: the id
        of the passage after them."""
        postings, pack = self._postings, _POSTING
        name = (m.name or "").lower()
        if name and name not in self.names:
            self.names.add(name)
            self._forget_briefs()  # a sentence that only names them says little
        for text, whole, call in passages_of(m):
            self.passages.append(k, text, whole, call)
            found = terms(text)
            counts = Counter(found)
            if name:
                counts[name] += 1
            for term, tf in counts.items():
                posting = postings.get(term)
                if posting is None:
                    posting = postings[term] = bytearray()
                posting.extend(pack(pid, tf))
            size = len(found) + (1 if name else 0)
            self._lengths.append(size)
            self._total += size
            pid += 1
        return pid

    def _forget_briefs(self) -> None:
        self._read = bytearray(len(self._read))  # a batch being added: see _add
        self._briefs.clear()
        self._left.clear()
        self._costs.clear()

    def cost(self, pid: int, counter: TokenCounter, full: bool = False) -> int:
        """The tokens passage ``pid`` takes in a recall block (counted once), shown
        brief or ``full`` (see :meth:`shown`)."""
        costs = self._costs.get(counter.name)
        if costs is None:
            costs = self._costs[counter.name] = {}
        key = 2 * pid + full
        hit = costs.get(key)
        if hit is None:
            hit = costs[key] = counter.count_text(self.line(pid, full)) + 1
        return hit

    def carries(self, pid: int) -> float:
        """What passage ``pid`` carries besides its words (identifiers, numbers,
        errors, decisions: the engine's base score of a sentence), found once."""
        hit = self._carries.get(pid)
        if hit is None:
            hit = self._carries[pid] = features(self.passages.texts[pid]).base
        return hit

    def shown(self, pid: int, full: bool = False) -> str:
        """Passage ``pid``'s text as a recall block shows it: ``full``, or brief: in
        prose, the sentences that say next to nothing ("Wow, Mel!", "Thanks!") left
        out (marked ``...``) when another says something."""
        text = self.passages.texts[pid]
        if full:
            return text
        self._read_brief(pid)
        return self._briefs.get(pid, text)

    def leaves_out(self, pid: int) -> tuple[str, ...]:
        """The terms of the sentences the brief text of passage ``pid`` leaves out (a
        query that asks for one of them shows the passage in full)."""
        self._read_brief(pid)
        return self._left.get(pid, ())

    def line(self, pid: int, full: bool = False) -> str:
        """A passage as a recall block shows it alone: ``speaker: text``."""
        p = self.passages[pid]
        return f"{self.speakers[p.message]}{' ->' if p.call else ':'} {self.shown(pid, full)}"

    def _read_brief(self, pid: int) -> None:
        """Find passage ``pid``'s brief text and what it leaves out, once."""
        if not self._read[pid]:
            p = self.passages[pid]
            brief, left = _brief(p, self.names)
            if brief != p.text:
                self._briefs[pid] = brief
            if left:
                self._left[pid] = left
            self._read[pid] = 1

    def similar(self, query: str, *, before: int) -> dict[int, float]:
        """The embedder's cosine similarity of ``query`` to each passage of the
        messages before ``before`` (empty without an embedder); passages are embedded
        once, as they are first needed (with the query, each time, by an embedder
        whose vectors depend on their batch, such as TF-IDF)."""
        end = self._first[min(before, len(self.speakers))]
        if self.embedder is None or not end:
            return {}
        import numpy as np

        if not getattr(self.embedder, "per_text", True):  # vectors of one batch (TF-IDF)
            rows = embed(self.embedder, [query, *self.passages.texts[:end]], cache=None)
            sims = rows[1:] @ rows[0]
            return {pid: float(v) for pid, v in enumerate(sims) if v > 0}
        if self._embedded < end:
            texts = self.passages.texts[self._embedded : end]
            self._vectors.append(embed(self.embedder, texts, cache=None))
            self._embedded = end
        rows = np.concatenate(self._vectors) if len(self._vectors) > 1 else self._vectors[0]
        self._vectors = [rows]
        q = embed(self.embedder, [query], cache=None)[0]
        sims = rows[:end] @ q
        return {pid: float(v) for pid, v in enumerate(sims) if v > 0}

    def of_message(self, k: int) -> range:
        """The ids of message ``k``'s passages."""
        return range(self._first[k], self._first[k + 1])

    def during(self, spans: Sequence[Period], *, before: int) -> dict[int, float]:
        """A score for each passage of the messages before ``before`` said during one
        of ``spans``: what :meth:`search` gives a query term that exactly those
        passages hold, once each (the fewer they are, the more it is worth)."""
        upto = min(before, len(self.speakers))
        if not spans or not upto:
            return {}
        pids = [
            pid
            for k, day in enumerate(islice(self.days, upto))
            if day is not None and any(p.holds(day) for p in spans)
            for pid in self.of_message(k)
        ]
        if not pids:
            return {}
        n, df = len(self.passages), len(pids)
        return dict.fromkeys(pids, math.log(1.0 + (n - df + 0.5) / (df + 0.5)))

    def search(self, query: Iterable[str], *, before: int) -> dict[int, float]:
        """The BM25 score of each passage of the messages before ``before`` that holds
        a term of ``query`` (each term counted once)."""
        end = self._first[min(before, len(self.speakers))]
        n = len(self.passages)
        if not end or not n:
            return {}
        held: list[tuple[float, bytearray]] = []  # (idf, posting)
        for term in dict.fromkeys(query):
            posting = self._postings.get(term)
            if posting is not None:
                df = len(posting) // 8
                held.append((math.log(1.0 + (n - df + 0.5) / (df + 0.5)), posting))
        avg = self._total / n
        if sum(len(posting) for _, posting in held) > 8 * SCAN_IN_ARRAYS:
            return self._search_arrays(held, end, avg)
        lengths = self._lengths
        scores: dict[int, float] = {}
        for idf, posting in held:
            both = array("I")  # a copy: a view would pin the bytes
            both.frombytes(posting)
            pids, tfs = both[0::2], both[1::2]
            stop = bisect_left(pids, end)
            for pid, tf in zip(pids[:stop], tfs[:stop], strict=True):
                norm = tf + _K1 * (1.0 - _B + _B * lengths[pid] / avg)
                scores[pid] = scores.get(pid, 0.0) + idf * tf * (_K1 + 1.0) / norm
        return scores

    def _search_arrays(
        self,
        held: list[tuple[float, bytearray]],
        end: int,
        avg: float,
    ) -> dict[int, float]:
        """:meth:`search` over postings of many passages: the same sums, term by
        term in the same order (so the same floats), a term's passages at once."""
        import numpy as np

        lengths = np.array(self._lengths[:end], dtype=np.float64)
        scores = np.zeros(end)
        for idf, posting in held:
            both = np.frombuffer(bytes(posting), dtype=np.uintc).reshape(-1, 2)
            stop = int(np.searchsorted(both[:, 0], end))
            pids = both[:stop, 0]
            tf = both[:stop, 1].astype(np.float64)
            norm = tf + _K1 * (1.0 - _B + _B * lengths[pids] / avg)
            scores[pids] += idf * tf * (_K1 + 1.0) / norm
        hit = np.flatnonzero(scores)
        return dict(zip(hit.tolist(), scores[hit].tolist(), strict=True))


def _brief(p: Passage, names: Collection[str]) -> tuple[str, tuple[str, ...]]:
    """``p``'s text less its sentences that say next to nothing (a speaker's name
    says nothing new; cut ones marked ``...``), when it is prose and another sentence
    says something; and the terms of those left out."""
    if p.call or p.text.count("\n") >= 3:
        return p.text, ()
    segments = split_sentences(p.text)
    keep = [not says_little(features(s), names) for s in segments]
    if all(keep) or not any(keep):
        return p.text, ()
    left = dict.fromkeys(t for s, k in zip(segments, keep, strict=True) if not k for t in terms(s))
    return elide(Piece(p.text, keep=False, mode="prose"), segments, keep).strip(), tuple(left)
