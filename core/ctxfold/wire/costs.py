"""What a content part that is not plain text costs, as the providers count it.

Thinking and redacted thinking count by their content (a signature and a
``cache_control`` are not text the model reads); documents by their text, or a PDF by
its pages; images by the providers' published rules when their size is known, read
from the image's own header when it is inline; a server tool's blocks by the text
they carry. What cannot be known (an image or a document given by URL or file id) is a
documented estimate on the high side: a budget must hold.

Published rules, as of 2026 (the constants below):

- Anthropic images: scaled down, keeping the aspect ratio, until the long edge is at
  most 1,568 px and the image at most about 1,600 tokens; then width x height / 750
  (so 1,092 x 1,092, its largest square, is 1,590).
- OpenAI images (GPT-4o family): ``detail: "low"`` 85; otherwise scaled to fit 2,048 x
  2,048, then down until the short side is at most 768 px; 85 + 170 per 512 px tile.
- PDFs (Anthropic): each page is read as text and as an image, 1,500-3,000 tokens a
  page; counted at the top of that range.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
from collections.abc import Callable, Mapping
from typing import Any

from ..messages import ContentPart

__all__ = [
    "ANTHROPIC_IMAGE_UNKNOWN",
    "OPENAI_IMAGE_UNKNOWN",
    "PDF_PAGE",
    "anthropic_image_tokens",
    "image_size",
    "openai_image_tokens",
    "part_tokens",
    "pdf_pages",
]

Encode = Callable[[str], int]

#: An Anthropic image of unknown size: the most one costs after its scaling.
ANTHROPIC_IMAGE_UNKNOWN = 1_600
#: An OpenAI image of unknown size at high or auto detail: a 1,024 x 1,024 image.
OPENAI_IMAGE_UNKNOWN = 765
#: Tokens a PDF page costs (text and image), the top of Anthropic's stated range.
PDF_PAGE = 3_000
#: A PDF whose pages cannot be counted (given by URL or file id): one page.
PDF_UNKNOWN_PAGES = 1
#: Keys whose values are payloads or machine data the model does not read as text.
_NOT_TEXT = frozenset(
    {"signature", "cache_control", "data", "file_data", "encrypted_content", "file_id"}
)


def part_tokens(part: ContentPart, encode: Encode, fallback: int) -> int:
    """Tokens a non-text ``part`` costs (``encode``: tokens of a text; ``fallback``:
    the cost of a part that carries nothing countable, such as an audio clip)."""
    data = part.data
    kind = part.type
    if kind == "thinking":
        return _text(data.get("thinking"), encode)
    if kind == "redacted_thinking":
        # Encrypted: its base64 length, as the bytes it hides, at about 4 bytes a token.
        payload = data.get("data")
        return math.ceil(len(payload) * 3 / 16) if isinstance(payload, str) else fallback
    if kind == "image":
        return anthropic_image(data.get("source"))
    if kind in ("image_url", "input_image"):
        return openai_image(data, kind)
    if kind == "document":
        extra = _text(data.get("title"), encode) + _text(data.get("context"), encode)
        return extra + _document(data.get("source"), encode)
    if kind in ("input_audio", "audio"):
        return fallback
    if kind in ("file", "input_file"):
        inner = data.get("file", data)
        payload = inner.get("file_data") if isinstance(inner, Mapping) else None
        return PDF_PAGE * (pdf_pages(payload) if isinstance(payload, str) else 1)
    return _strings(data, encode) or fallback


def _text(value: Any, encode: Encode) -> int:
    return encode(value) if isinstance(value, str) and value else 0


def _strings(value: Any, encode: Encode) -> int:
    """Tokens of every string a block carries for the model to read (its payloads,
    signatures and cache settings left out)."""
    if isinstance(value, str):
        return encode(value) if value else 0
    if isinstance(value, Mapping):
        return sum(_strings(v, encode) for k, v in value.items() if k not in _NOT_TEXT)
    if isinstance(value, list):
        return sum(_strings(v, encode) for v in value)
    return 0


def _document(source: Any, encode: Encode) -> int:
    if not isinstance(source, Mapping):
        return PDF_PAGE * PDF_UNKNOWN_PAGES
    kind = source.get("type")
    if kind == "text":
        return _text(source.get("data"), encode)
    if kind == "content":  # text and image blocks
        blocks = source.get("content")
        if isinstance(blocks, str):
            return _text(blocks, encode)
        return sum(
            anthropic_image(b.get("source"))
            if b.get("type") == "image"
            else _text(b.get("text"), encode)
            for b in blocks or ()
            if isinstance(b, Mapping)
        )
    payload = source.get("data")
    pages = pdf_pages(payload) if kind == "base64" and isinstance(payload, str) else None
    return PDF_PAGE * (pages or PDF_UNKNOWN_PAGES)


# ------------------------------------------------------------------------------ images


def anthropic_image(source: Any) -> int:
    """An Anthropic ``image`` block's tokens, from its ``source``."""
    size = _inline_size(source.get("data")) if isinstance(source, Mapping) else None
    return anthropic_image_tokens(*size) if size else ANTHROPIC_IMAGE_UNKNOWN


def openai_image(data: Mapping[str, Any], kind: str) -> int:
    """An OpenAI ``image_url`` (chat) or ``input_image`` (responses) part's tokens."""
    inner = data.get("image_url") if kind == "image_url" else data
    if isinstance(inner, str):  # responses: "image_url": "<url>"
        inner = {"url": inner, "detail": data.get("detail")}
    if not isinstance(inner, Mapping):
        return OPENAI_IMAGE_UNKNOWN
    if inner.get("detail") == "low":
        return 85
    url = inner.get("url") if kind == "image_url" else inner.get("image_url", inner.get("url"))
    size = _data_url_size(url) if isinstance(url, str) else None
    return openai_image_tokens(*size) if size else OPENAI_IMAGE_UNKNOWN


def anthropic_image_tokens(width: int, height: int) -> int:
    """Anthropic's count of a ``width`` x ``height`` image after its scaling."""
    area = ANTHROPIC_IMAGE_UNKNOWN * 750
    scale = min(1.0, 1568 / max(width, height, 1), math.sqrt(area / max(width * height, 1)))
    return max(1, math.ceil((width * scale) * (height * scale) / 750))


def openai_image_tokens(width: int, height: int) -> int:
    """OpenAI's count of a ``width`` x ``height`` image at high detail."""
    scale = min(1.0, 2048 / max(width, height, 1))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / max(min(w, h), 1))
    w, h = w * scale, h * scale
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def _data_url_size(url: str) -> tuple[int, int] | None:
    head, comma, _payload = url[:256].partition(",")
    if not (head.startswith("data:") and head.endswith(";base64") and comma):
        return None
    return _inline_size(url[len(head) + 1 :])


def _inline_size(payload: Any) -> tuple[int, int] | None:
    """The size of an inline (base64) image, read from its header."""
    if not isinstance(payload, str):
        return None
    size = image_size(_b64(payload[:65_536]))
    if size is None and len(payload) > 65_536:  # a JPEG's frame header can come late
        size = image_size(_b64(payload))
    return size


def _b64(text: str) -> bytes:
    cut = len(text) - len(text) % 4
    try:
        return base64.b64decode(text[:cut], validate=False)
    except (binascii.Error, ValueError):
        return b""


def image_size(raw: bytes) -> tuple[int, int] | None:
    """``(width, height)`` of a PNG, GIF, JPEG or WebP image, from its header; ``None``
    when ``raw`` is none of those (or too short to tell)."""
    if raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) >= 24:
        return struct.unpack(">II", raw[16:24])
    if raw[:6] in (b"GIF87a", b"GIF89a") and len(raw) >= 10:
        return struct.unpack("<HH", raw[6:10])
    if raw[:2] == b"\xff\xd8":
        return _jpeg_size(raw)
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return _webp_size(raw)
    return None


_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(raw: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 <= len(raw):
        if raw[at] != 0xFF:
            return None
        marker = raw[at + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length: skip the marker
            at += 2
            continue
        length = int.from_bytes(raw[at + 2 : at + 4], "big")
        if marker in _SOF:
            height, width = struct.unpack(">HH", raw[at + 5 : at + 9])
            return width, height
        at += 2 + length
    return None


def _webp_size(raw: bytes) -> tuple[int, int] | None:
    chunk = raw[12:16]
    if chunk == b"VP8 " and len(raw) >= 30:
        w, h = struct.unpack("<HH", raw[26:30])
        return w & 0x3FFF, h & 0x3FFF
    if chunk == b"VP8L" and len(raw) >= 25:
        bits = int.from_bytes(raw[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(raw) >= 30:
        return int.from_bytes(raw[24:27], "little") + 1, int.from_bytes(raw[27:30], "little") + 1
    return None


# -------------------------------------------------------------------------------- PDFs

_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z])")
_COUNT = re.compile(rb"/Type\s*/Pages\b[^>]{0,200}?/Count\s+(\d{1,6})")


def pdf_pages(payload: str) -> int:
    """Pages of a base64 PDF (its page objects; else its page tree's count; else one
    page per 100 KB, for a PDF that keeps its objects compressed)."""
    raw = _b64(payload.removeprefix("data:application/pdf;base64,"))
    pages = len(_PAGE.findall(raw))
    if pages:
        return pages
    counts = [int(c) for c in _COUNT.findall(raw)]
    return max(counts) if counts else max(1, math.ceil(len(raw) / 100_000))
