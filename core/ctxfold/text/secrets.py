"""Values shaped like credentials. They are never identifiers: a note never lists them,
the reference index never holds them, recall never searches for them
(:func:`secret_spans` is consulted where identifiers are found), and ``redact=True``
masks them.

Two rules find them:

* **By shape** (``_SHAPES``): a provider's published prefix with its alphabet and
  length, whatever surrounds it: OpenAI ``sk-``/``sk-proj-``, Anthropic ``sk-ant-``,
  Stripe ``sk_live_``/``rk_live_``/``sk_test_``/``whsec_``, GitHub ``ghp_``/``gho_``/
  ``ghu_``/``ghs_``/``ghr_``/``github_pat_``, GitLab ``glpat-`` (and its other token
  kinds), Slack ``xox[abposre]-``/``xapp-``, AWS ``AKIA``/``ASIA``/..., Google ``AIza``,
  ``GOCSPX-`` and ``ya29.``, Hugging Face ``hf_``, npm ``npm_``, SendGrid ``SG.x.y``,
  Twilio ``SK`` + 32 hex, DigitalOcean ``dop_v1_``, Shopify ``shpat_``, PyPI ``pypi-``,
  Databricks ``dapi``, Atlassian ``ATATT3``, Postman ``PMAK-``, Vault ``hvs.``,
  Sentry ``sntrys_``, Grafana ``glsa_``, Linear ``lin_api_``, Square ``sq0atp-``; JWTs,
  ``Bearer`` tokens, ``Authorization: Basic`` credentials, passwords in URLs, PEM and
  PGP private key blocks.
* **By name** (``_ASSIGNED``): a value assigned (``=`` or ``:``, quoted or not) to a
  name ending in ``key``, ``token``, ``secret``, ``passwd``, ``password``, ``pwd`` or
  ``credential``. The name and the value's shape decide (:func:`assigned_secret`):

  - the name is a *locator* (:class:`NameKind`) when one of its words (split at ``_``,
    ``-``, ``.`` and changes of case; for a bare ``key`` or ``token``, with the word
    before it: ``primary key``, ``S3 object key``) says the value finds something
    rather than opens it (``LOCATOR_WORDS``: primary, foreign, sort, cache, page, next,
    cursor, object, idempotency, public, ...) and none says it opens something
    (``CREDENTIAL_WORDS``: api, auth, access, secret, private, client, session,
    password, ...). A locator's value is never a secret by its name (a credential's
    own shape still is). Any other name is a *credential* name.
  - a credential name's value is a secret when it reads as generated: letters and
    digits mixed, at least 3 bits of entropy a character, and not a path (rooted, or
    whose last part has a file extension), a URL, a variable (``$X``) or a
    placeholder (``YOUR_API_KEY``).

  So ``API_KEY=Xy9kLm3pQr8s7tZ``, ``SECRET_KEY=<64 hex>`` and ``token: <uuid>`` are
  secrets; ``cache_key=<40-hex commit>``, ``primary key: <uuid>``, ``sort key``,
  ``foreign key``, ``S3 object key: uploads/2024/05/report-7f3a9c.pdf`` and
  ``next_page_token=...`` are not. Plain hashes, UUIDs, paths and order numbers under
  no such name are never secrets.

Every pattern here is linear in the text's length (each starts at a literal, and no two
quantifiers can take the same characters one after another);
``tests/unit/text/test_linear_patterns.py`` checks every pattern of the package.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from itertools import accumulate

from .wordlists import word_list

__all__ = ["NameKind", "assigned_secret", "is_secret", "marked", "mask", "overlaps", "secret_spans"]


@dataclass(frozen=True)
class _Shape:
    """A credential recognised by its own shape: its kind, the lower-cased markers one
    of which its match holds (it runs only on a text holding one: tried at every
    position, it costs as much as finding the identifiers), and its pattern (the
    credential is the group ``secret`` where the pattern has one, else the match)."""

    kind: str
    markers: tuple[str, ...]
    pattern: re.Pattern[str]

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        group = "secret" if "secret" in self.pattern.groupindex else 0
        return [(*m.span(group), self.kind) for m in self.pattern.finditer(text)]


def _shape(kind: str, markers: tuple[str, ...], pattern: str) -> _Shape:
    return _Shape(kind, markers, re.compile(pattern))


_B64 = r"[A-Za-z0-9_\-]"  # URL-safe base64: most providers' token alphabet
_SHAPES: tuple[_Shape, ...] = (
    _shape("openai", ("sk-",), rf"\bsk-(?:proj-|svcacct-|admin-)?{_B64}{{20,}}"),
    _shape("anthropic", ("sk-ant-",), rf"\bsk-ant-{_B64}{{20,}}"),
    _shape(
        "stripe",
        ("k_live_", "k_test_", "whsec_"),
        r"\b(?:[rsp]k_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})",
    ),
    _shape(
        "github",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
    ),
    _shape(
        "gitlab",
        ("glpat-", "gldt-", "glrt-", "glptt-", "glsoat-"),
        rf"\bgl(?:pat|dt|rt|ptt|soat)-{_B64}{{20,}}",
    ),
    _shape("slack", ("xox", "xapp-"), r"\b(?:xox[abposre]|xapp)-[A-Za-z0-9\-]{10,}"),
    _shape(
        "aws_key",
        ("akia", "asia", "agpa", "aida", "aroa"),
        r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[A-Z0-9]{16}\b",
    ),
    _shape(
        "google",
        ("aiza", "gocspx-", "ya29."),
        rf"\b(?:AIza{_B64}{{35}}|GOCSPX-{_B64}{{28}}|ya29\.{_B64}{{30,}})",
    ),
    _shape("huggingface", ("hf_",), r"\bhf_[A-Za-z0-9]{30,}"),
    _shape("npm", ("npm_",), r"\bnpm_[A-Za-z0-9]{36}\b"),
    _shape("sendgrid", ("sg.",), rf"\bSG\.{_B64}{{16,}}+\.{_B64}{{16,}}"),
    _shape("twilio", ("sk",), r"\bSK[0-9a-fA-F]{32}\b"),
    _shape("digitalocean", ("dop_v1_", "doo_v1_", "dor_v1_"), r"\bdo[opr]_v1_[a-f0-9]{64}\b"),
    _shape(
        "shopify",
        ("shpat_", "shpss_", "shpca_", "shppa_"),
        r"\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}\b",
    ),
    _shape("pypi", ("pypi-",), rf"\bpypi-AgE{_B64}{{50,}}"),
    _shape("databricks", ("dapi",), r"\bdapi[a-f0-9]{32}(?:-\d)?\b"),
    _shape("atlassian", ("atatt3",), r"\bATATT3[A-Za-z0-9_\-=]{50,}"),
    _shape("postman", ("pmak-",), r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}\b"),
    _shape("vault", ("hvs.", "hvb."), rf"\bhv[sb]\.{_B64}{{24,}}"),
    _shape("sentry", ("sntrys_", "sntryu_"), r"\bsntry[su]_[A-Za-z0-9+/=_]{40,}"),
    _shape("grafana", ("glsa_",), r"\bglsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}\b"),
    _shape("linear", ("lin_api_",), r"\blin_api_[A-Za-z0-9]{40}\b"),
    _shape("square", ("sq0atp-", "sq0csp-"), rf"\bsq0(?:atp|csp)-{_B64}{{22,}}"),
    # starts where a run of its alphabet starts: one scan of a run, not one a place
    _shape("jwt", ("eyj",), rf"(?<!{_B64})eyJ{_B64}{{8,}}+\.eyJ{_B64}{{8,}}+\.{_B64}{{8,}}"),
    _shape("bearer", ("bearer ",), r"(?<=[Bb]earer )[A-Za-z0-9_\-\.=+/]{16,}"),
    _shape(
        "basic_auth",
        ("authorization",),
        r"(?i:authorization)[\"']?[ \t]*+[:=][ \t]*+[\"']?(?i:basic)[ \t]++"
        r"(?P<secret>[A-Za-z0-9+/]{6,}+={0,2})",
    ),
    _shape("url_password", ("://",), r"(?<=://)[^\s:/@]++:[^\s/@]++(?=@)"),
    _shape(
        "private_key",
        ("private key",),
        r"-----BEGIN [A-Z ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
        r"(?:-----END [A-Z ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    ),
)
#: A name that says its value is secret, and what assigns the value to it
#: (``API_KEY=``, ``"client_secret": "``, ``password: ``); the value is the run of
#: ``_VALUE`` characters after it (``_VALUE_RUN``), found once per run however many
#: names stand in it. Anchored on the name's literal: no scan runs ahead of it.
_ASSIGNED = re.compile(
    r"(?i)(?P<name>key|token|secret|passwd|password|pwd|credential)\b[\"']?\s*+[:=]\s*+[\"']?"
)
_VALUE_RUN = re.compile(r"""[^\s"',;}\[\]()<>]*+""")
_MIN_VALUE = 12
#: The names an assigned secret's name holds (see ``_ASSIGNED``), lower-cased.
_NAMES = ("key", "token", "secret", "passw", "pwd", "credential")
_MARKERS = frozenset(m for shape in _SHAPES for m in shape.markers).union(_NAMES)
#: Each marker's first whitespace-free part: a text holding a marker has a word (as
#: ``str.split`` cuts it) holding its part, lower-cased.
_WORD_MARKERS = frozenset(m.split()[0] for m in _MARKERS)
_WORD_MARKER = re.compile("|".join(map(re.escape, sorted(_WORD_MARKERS))))


class NameKind(Enum):
    """What the name a value is assigned to says of it (see the module's docstring)."""

    CREDENTIAL = "credential"  # the value opens something: a secret if it reads as one
    LOCATOR = "locator"  # the value finds something: never a secret by its name


#: Words of a name that make its value a locator (when no credential word is there).
# fmt: off
LOCATOR_WORDS = frozenset((
    "primary", "foreign", "sort", "partition", "range", "hash", "clustering", "composite",
    "unique", "natural", "surrogate", "row", "object", "s3", "bucket", "blob", "cache", "page",
    "pagination", "next", "continuation", "cursor", "sync", "idempotency", "dedup", "dedupe",
    "deduplication", "public", "lookup", "index", "routing", "shard", "group", "etag",
    "resume", "offset", "translation", "i18n", "message", "map", "dict",
))
# fmt: on
#: Words of a name that make its value a credential whatever else the name says.
# fmt: off
CREDENTIAL_WORDS = frozenset((
    "api", "apikey", "auth", "authorization", "access", "secret", "secrets", "private",
    "client", "session", "refresh", "bearer", "oauth", "signing", "master", "encryption",
    "password", "passwd", "pwd", "pass", "credential", "credentials", "bot", "webhook", "ssh",
    "deploy", "license",
))
# fmt: on
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")
_NAME_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z0-9]+(?![a-z])")
_LONGEST_NAME = 64  # characters of a name read before its key word
_EXTENSIONS = word_list("file_extensions")


def _name_start(text: str, end: int) -> int:
    """Where the name ending at ``end`` starts (at most ``_LONGEST_NAME`` back)."""
    start, stop = end, max(0, end - _LONGEST_NAME)
    while start > stop and text[start - 1] in _NAME_CHARS:
        start -= 1
    return start


def _name_kind(text: str, at: int, end: int) -> NameKind:
    """What the name whose key word (``key``, ``token``, ...) is ``text[at:end]`` says:
    its words, and for a bare key word the word before it (``primary key``)."""
    start = _name_start(text, at)
    name = text[start:end]
    if start == at:  # a bare key word: the word before it qualifies it
        gap = start
        while gap > max(0, start - 3) and text[gap - 1] in " \t":
            gap -= 1
        if gap < start:
            name = f"{text[_name_start(text, gap) : gap]} {name}"
    words = {w.lower() for w in _NAME_WORD.findall(name)}
    if words & CREDENTIAL_WORDS or not words & LOCATOR_WORDS:
        return NameKind.CREDENTIAL
    return NameKind.LOCATOR


def _random_enough(value: str) -> bool:
    """Whether an assigned value looks generated rather than typed: letters and digits
    mixed, of high entropy (a word, a path, a URL, a variable or a placeholder is not)."""
    if value.startswith(("$", "/", "~/", "http")) or "." in value[:1]:
        return False
    if "/" in value and value.rsplit("/", 1)[1].rpartition(".")[2].lower() in _EXTENSIONS:
        return False  # a relative path to a file: uploads/2024/05/report-7f3a9c.pdf
    if not any(c.isdigit() for c in value) or not any(c.isalpha() for c in value):
        return False
    counts = Counter(value)
    entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())
    return entropy >= 3.0


def assigned_secret(kind: NameKind, value: str) -> bool:
    """Whether ``value``, assigned to a name of ``kind``, is a secret."""
    return kind is NameKind.CREDENTIAL and _random_enough(value)


def _assigned(text: str) -> list[tuple[int, int, str]]:
    """The secrets assigned to names in ``text``. A name inside another's value that
    was not a secret is read too (``cache_key=abc&api_key=...``); the value's run is
    found once however many names stand in it."""
    out: list[tuple[int, int, str]] = []
    run_start = run_end = masked_to = -1
    for m in _ASSIGNED.finditer(text):
        start = m.end()
        if m.start() < masked_to:
            continue  # inside a value masked already
        if not run_start <= start < run_end:  # a new run of value characters
            run_start, run_end = start, _VALUE_RUN.match(text, start).end()  # type: ignore[union-attr]
        if run_end - start < _MIN_VALUE:
            continue
        if assigned_secret(_name_kind(text, m.start(), m.end("name")), text[start:run_end]):
            out.append((start, run_end, "assigned"))
            masked_to = run_end
    return out


@lru_cache(maxsize=256)
def secret_spans(text: str) -> tuple[tuple[int, int, str], ...]:
    """``(start, end, kind)`` of every credential-shaped value in ``text``."""
    low = text.lower()
    if not any(marker in low for marker in _MARKERS):
        return ()  # the common case, decided by substring searches alone
    spans = [
        span
        for shape in _SHAPES
        if any(marker in low for marker in shape.markers)
        for span in shape.spans(text)
    ]
    if any(name in low for name in _NAMES):
        spans += _assigned(text)
    return tuple(sorted(spans))


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
