"""Values shaped like credentials: provider API keys, cloud access keys, tokens,
passwords in URLs, private keys, and high-entropy values assigned to a name that says
they are secret (``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``PASSWORD``). They are never
identifiers: a note never lists them, the reference index never holds them, recall
never searches for them (:func:`secret_spans` is consulted where identifiers are
found). Ordinary identifiers (commit hashes, UUIDs, order numbers) are not secrets."""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections import Counter
from functools import lru_cache
from itertools import accumulate

__all__ = ["is_secret", "marked", "mask", "overlaps", "secret_spans"]

#: Credentials recognised by their own shape, whatever surrounds them: each kind with
#: the lower-cased markers one of which its match holds (a pattern runs only on a text
#: that holds one of its markers: tried at every position, it costs as much as finding
#: the identifiers), and its pattern.
_SHAPED: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = tuple(
    (kind, markers, re.compile(pattern))
    for kind, markers, pattern in (
        ("openai", ("sk-",), r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
        ("anthropic", ("sk-ant-",), r"\bsk-ant-[A-Za-z0-9_\-]{20,}"),
        ("stripe", ("k_live_", "k_test_"), r"\b[rsp]k_(?:live|test)_[A-Za-z0-9]{16,}"),
        (
            "github",
            ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
            r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
        ),
        ("gitlab", ("glpat-",), r"\bglpat-[A-Za-z0-9_\-]{20,}"),
        ("slack", ("xox",), r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
        (
            "aws_key",
            ("akia", "asia", "agpa", "aida", "aroa"),
            r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[A-Z0-9]{16}\b",
        ),
        ("google", ("aiza",), r"\bAIza[A-Za-z0-9_\-]{35}"),
        ("jwt", ("eyj",), r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
        ("bearer", ("bearer ",), r"(?<=[Bb]earer )[A-Za-z0-9_\-\.=+/]{16,}"),
        ("url_password", ("://",), r"(?<=://)[^\s:/@]+:[^\s/@]+(?=@)"),
        (
            "private_key",
            ("private key",),
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)",
        ),
    )
)
#: A value assigned to a name that says it is secret: ``API_KEY=...``,
#: ``"client_secret": "..."``, ``password: ...`` (the value is a secret when it does
#: not read as a word or a placeholder; see :func:`_random_enough`). ``_ASSIGNED``
#: finds them; ``_ASSIGNED_AT_NAME``, its name and what follows, is tried first only
#: where a name stands (it rules most texts out many times faster).
_SECRET_NAME = r"(?:key|token|secret|passwd|password|pwd|credential)\b"
_AFTER_NAME = r"""["']?\s*[:=]\s*["']?"""
_VALUE = r"""[^\s"',;}\[\]()<>]"""
_ASSIGNED = re.compile(rf"(?i)\b[a-z0-9_\-]*{_SECRET_NAME}{_AFTER_NAME}(?P<value>{_VALUE}{{12,}})")
_ASSIGNED_AT_NAME = re.compile(rf"(?i){_SECRET_NAME}{_AFTER_NAME}{_VALUE}{{12}}")
#: The names an assigned secret's name holds (see ``_ASSIGNED``), lower-cased.
_NAMES = ("key", "token", "secret", "passw", "pwd", "credential")
_MARKERS = frozenset(m for _, markers, _ in _SHAPED for m in markers).union(_NAMES)
#: Each marker's first whitespace-free part: a text holding a marker has a word (as
#: ``str.split`` cuts it) holding its part, lower-cased.
_WORD_MARKERS = frozenset(m.split()[0] for m in _MARKERS)
_WORD_MARKER = re.compile("|".join(map(re.escape, sorted(_WORD_MARKERS))))


def _random_enough(value: str) -> bool:
    """Whether an assigned value looks generated rather than typed: letters and
    digits mixed, of high entropy (a word, a path, a placeholder or a type is not)."""
    if value.startswith(("$", "/", "./", "http")) or "." in value[:1]:
        return False
    if not any(c.isdigit() for c in value) or not any(c.isalpha() for c in value):
        return False
    counts = Counter(value)
    entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())
    return entropy >= 3.0


@lru_cache(maxsize=256)
def secret_spans(text: str) -> tuple[tuple[int, int, str], ...]:
    """``(start, end, kind)`` of every credential-shaped value in ``text``."""
    low = text.lower()
    if not any(marker in low for marker in _MARKERS):
        return ()  # the common case, decided by substring searches alone
    spans = [
        (m.start(), m.end(), kind)
        for kind, markers, pattern in _SHAPED
        if any(marker in low for marker in markers)
        for m in pattern.finditer(text)
    ]
    if _may_assign(text, low):
        for m in _ASSIGNED.finditer(text):
            value = m.group("value")
            if _random_enough(value):
                spans.append((m.start("value"), m.end("value"), "assigned"))
    return tuple(sorted(spans))


def _may_assign(text: str, low: str) -> bool:
    """Whether ``text`` may hold a value assigned to a secret's name: a name stands
    somewhere followed by what ``_ASSIGNED`` needs. (Only for ASCII text, where the
    lower-cased text's places are the text's and case-blind matching is ASCII's; any
    other text holding a name is given to ``_ASSIGNED``.)"""
    if not text.isascii():
        return any(name in low for name in _NAMES)
    for name in _NAMES:
        at = low.find(name)
        while at >= 0:
            if _ASSIGNED_AT_NAME.match(text, at):
                return True
            at = low.find(name, at + 1)
    return False


def marked(words: list[str]) -> list[bool]:
    """Which of ``words`` (whitespace-free, as ``str.split`` gives them) hold part of
    a credential's marker. A text none of whose words does holds no credential
    (:func:`secret_spans` gives ``()``), so a caller who looks up the words of many
    texts once each can spare most texts the markers' substring searches."""
    out = [False] * len(words)
    low = "\n".join(words).lower()
    if not any(m in low for m in _WORD_MARKERS):
        return out  # the common case: one search of them all
    # Where: each word lower-cased alone (that may change its length, so the places
    # are the lower-cased words'). A marker holds no newline, so each match lies in
    # one word, and each word holding a marker holds a match's start.
    lows = list(map(str.lower, words))
    starts = list(accumulate(len(w) + 1 for w in lows))
    for found in _WORD_MARKER.finditer("\n".join(lows)):
        out[bisect_right(starts, found.start())] = True
    return out


def is_secret(value: str) -> bool:
    """Whether ``value`` holds a credential-shaped part."""
    return bool(secret_spans(value))


def overlaps(spans: tuple[tuple[int, int, str], ...], start: int, end: int) -> bool:
    """Whether ``[start, end)`` overlaps one of ``spans``."""
    return any(s < end and start < e for s, e, _ in spans)


def mask(text: str, mark: str = "[secret]") -> str:
    """``text`` with every credential-shaped value replaced by ``mark``."""
    spans = secret_spans(text)
    if not spans:
        return text
    out, at = [], 0
    for start, end, _ in spans:
        if start >= at:
            out += [text[at:start], mark]
            at = end
        elif end > at:  # overlapping spans: extend the one masked
            at = end
    return "".join([*out, text[at:]])
