"""Values shaped like credentials: provider API keys, cloud access keys, tokens,
passwords in URLs, private keys, and high-entropy values assigned to a name that says
they are secret (``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``PASSWORD``). They are never
identifiers: a note never lists them, the reference index never holds them, recall
never searches for them (:func:`secret_spans` is consulted where identifiers are
found). Ordinary identifiers (commit hashes, UUIDs, order numbers) are not secrets."""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache

__all__ = ["is_secret", "mask", "overlaps", "secret_spans"]

#: Credentials recognised by their own shape, whatever surrounds them.
_SHAPED = re.compile(
    "|".join(
        (
            r"(?P<openai>\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,})",
            r"(?P<anthropic>\bsk-ant-[A-Za-z0-9_\-]{20,})",
            r"(?P<stripe>\b[rsp]k_(?:live|test)_[A-Za-z0-9]{16,})",
            r"(?P<github>\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}))",
            r"(?P<gitlab>\bglpat-[A-Za-z0-9_\-]{20,})",
            r"(?P<slack>\bxox[abposr]-[A-Za-z0-9\-]{10,})",
            r"(?P<aws_key>\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[A-Z0-9]{16}\b)",
            r"(?P<google>\bAIza[A-Za-z0-9_\-]{35})",
            r"(?P<jwt>\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,})",
            r"(?P<bearer>(?<=[Bb]earer )[A-Za-z0-9_\-\.=+/]{16,})",
            r"(?P<url_password>(?<=://)[^\s:/@]+:[^\s/@]+(?=@))",
            r"(?P<private_key>-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?"
            r"(?:-----END [A-Z ]*PRIVATE KEY-----|\Z))",
        )
    )
)
#: A value assigned to a name that says it is secret: ``API_KEY=...``,
#: ``"client_secret": "..."``, ``password: ...`` (the value is a secret when it does
#: not read as a word or a placeholder; see :func:`_random_enough`).
_ASSIGNED = re.compile(
    r"""(?ix)
    \b[a-z0-9_\-]*(?:key|token|secret|passwd|password|pwd|credential)\b
    ["']?\s*[:=]\s*["']?
    (?P<value>[^\s"',;}\[\]()<>]{12,})
    """
)
_MAYBE = re.compile(
    r"sk-|[rsp]k_|gh[pousr]_|github_pat_|glpat-|xox|AKIA|ASIA|AGPA|AIDA|AROA|AIza|eyJ|"
    r"[Bb]earer |://[^\s/@]+:|PRIVATE KEY|key|token|secret|passw|pwd|credential",
    re.IGNORECASE,
)


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
    if not _MAYBE.search(text):
        return ()
    spans = [(m.start(), m.end(), m.lastgroup or "secret") for m in _SHAPED.finditer(text)]
    for m in _ASSIGNED.finditer(text):
        value = m.group("value")
        if _random_enough(value):
            spans.append((m.start("value"), m.end("value"), "assigned"))
    return tuple(sorted(spans))


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
