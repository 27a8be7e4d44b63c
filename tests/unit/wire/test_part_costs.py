"""Every content part is counted as its provider counts it: thinking by its text,
documents by their text or pages, images by the providers' published rules, and
signatures and cache settings not at all."""

from __future__ import annotations

import base64
import struct

import pytest

import ctxfold
from ctxfold import ContentPart, Message, from_anthropic, from_openai
from ctxfold.wire.costs import (
    ANTHROPIC_IMAGE_UNKNOWN,
    OPENAI_IMAGE_UNKNOWN,
    PDF_PAGE,
    anthropic_image_tokens,
    image_size,
    openai_image_tokens,
    pdf_pages,
)

COUNTER = ctxfold.get_counter("o200k_base")
REASONING = " ".join(
    f"Step {k}: the failing test calls parse_date('2024-0{k % 9 + 1}-01') and gets None."
    for k in range(120)
)


def cost(part: dict, role: str = "user") -> int:
    """Tokens one part adds to a message."""
    [m] = from_anthropic([{"role": role, "content": [part]}])
    return COUNTER.count_message(m) - COUNTER.per_message


def within(count: int, expected: int, share: float = 0.05) -> bool:
    return abs(count - expected) <= share * expected


def png(width: int, height: int) -> str:
    raw = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR"
    return base64.b64encode(raw + struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)).decode()


def jpeg(width: int, height: int) -> str:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + b"\x00" * 9
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return base64.b64encode(b"\xff\xd8" + app0 + sof + b"\xff\xd9").decode()


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00" * 8


def webp(width: int, height: int) -> bytes:
    body = b"VP8X" + struct.pack("<I", 10) + b"\x00" * 4
    body += (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", len(body) + 4) + b"WEBP" + body


def pdf(pages: int) -> str:
    objs = [b"1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj"]
    objs.append(f"2 0 obj << /Type /Pages /Count {pages} >> endobj".encode())
    objs += [f"{3 + k} 0 obj << /Type /Page /Parent 2 0 R >> endobj".encode() for k in range(pages)]
    return base64.b64encode(b"%PDF-1.4\n" + b"\n".join(objs) + b"\n%%EOF").decode()


def test_a_thinking_block_counts_its_text_not_its_signature():
    part = {"type": "thinking", "thinking": REASONING, "signature": "EqQBCkgIARABGAIiQ" * 40}
    assert within(cost(part, "assistant"), COUNTER.count_text(REASONING))


def test_a_conversation_with_long_thinking_is_compressed_to_fit():
    """The issue's case: a 2,000-token thinking block counted 85 and compress at a
    1,000 budget returned it all."""
    run = [
        {"role": "user", "content": "Why does parse_date return None?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": REASONING * 2, "signature": "sig"},
                {"type": "text", "text": "Because of the month."},
            ],
        },
        {"role": "user", "content": "And how do I fix it?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Short.", "signature": "s2"},
                {"type": "text", "text": "Pad the month."},
            ],
        },
    ]
    result = ctxfold.compress(run, budget=1000)
    assert result.stats.tokens_before > 2 * COUNTER.count_text(REASONING) > 2000
    assert result.stats.fits and COUNTER.count_messages(from_anthropic(result.as_given())) <= 1000


def test_redacted_thinking_counts_by_the_length_of_what_it_hides():
    small, large = ({"type": "redacted_thinking", "data": "Ep8BCkYI" * n} for n in (100, 1000))
    assert 100 <= cost(small, "assistant") <= 300
    assert cost(large, "assistant") == pytest.approx(10 * cost(small, "assistant"), rel=0.01)


def test_cache_control_is_not_text():
    plain = cost({"type": "text", "text": REASONING})
    assert (
        cost({"type": "text", "text": REASONING, "cache_control": {"type": "ephemeral"}}) == plain
    )


def test_a_tool_result_counts_its_text_parts_and_its_images():
    text = "\n".join(f"E   AssertionError: expected {k}, got {k + 1}" for k in range(60))
    [_, result] = from_anthropic(
        [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "pytest", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t",
                        "is_error": True,
                        "content": [
                            {"type": "text", "text": text},
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/png",
                                    "data": png(1000, 1000),
                                },
                            },
                        ],
                    }
                ],
            },
        ]
    )
    expected = COUNTER.count_text(text) + anthropic_image_tokens(1000, 1000)
    assert within(COUNTER.count_message(result) - COUNTER.per_message, expected)


def test_a_text_document_counts_its_text_title_and_context():
    doc = {
        "type": "document",
        "title": "Runbook",
        "context": "On-call notes",
        "source": {"type": "text", "media_type": "text/plain", "data": REASONING},
    }
    expected = (
        COUNTER.count_text(REASONING)
        + COUNTER.count_text("Runbook")
        + COUNTER.count_text("On-call notes")
    )
    assert within(cost(doc), expected)


def test_a_content_document_counts_its_blocks():
    doc = {
        "type": "document",
        "source": {
            "type": "content",
            "content": [{"type": "text", "text": REASONING}, {"type": "text", "text": "More."}],
        },
    }
    assert within(cost(doc), COUNTER.count_text(REASONING) + COUNTER.count_text("More."))


@pytest.mark.parametrize("pages", [1, 3, 12])
def test_a_pdf_counts_its_pages(pages):
    assert pdf_pages(pdf(pages)) == pages
    doc = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": pdf(pages)},
    }
    assert cost(doc) == pages * PDF_PAGE
    [m] = from_openai(
        [
            {
                "role": "user",
                "content": [
                    {
                        "type": "file",
                        "file": {
                            "filename": "a.pdf",
                            "file_data": "data:application/pdf;base64," + pdf(pages),
                        },
                    }
                ],
            }
        ]
    )
    assert COUNTER.count_message(m) - COUNTER.per_message == pages * PDF_PAGE


@pytest.mark.parametrize(
    ("raw", "size"),
    [
        (base64.b64decode(png(640, 480)), (640, 480)),
        (base64.b64decode(jpeg(1920, 1080)), (1920, 1080)),
        (gif(32, 16), (32, 16)),
        (webp(800, 600), (800, 600)),
        (b"not an image", None),
    ],
)
def test_an_image_size_is_read_from_its_header(raw, size):
    assert image_size(raw) == size


@pytest.mark.parametrize(
    ("width", "height", "tokens"),
    [(200, 200, 54), (1000, 1000, 1334), (1092, 1092, 1590), (4000, 3000, 1600)],
)
def test_anthropic_images_follow_the_published_rule(width, height, tokens):
    """Anthropic's vision page: width x height / 750 after scaling to at most 1,568 px
    and about 1,600 tokens (its table: 200x200 ~54, 1000x1000 ~1334, 1092x1092 ~1590)."""
    assert within(anthropic_image_tokens(width, height), tokens, 0.01)
    source = {"type": "base64", "media_type": "image/jpeg", "data": jpeg(width, height)}
    assert cost({"type": "image", "source": source}) == anthropic_image_tokens(width, height)


@pytest.mark.parametrize(
    ("width", "height", "tokens"), [(1024, 1024, 765), (2048, 4096, 1105), (512, 512, 255)]
)
def test_openai_images_follow_the_published_rule(width, height, tokens):
    """OpenAI's vision guide: 85 + 170 per 512 px tile after fitting 2,048 px and a
    short side of at most 768 px (1024x1024: 765; 2048x4096: 1105); low detail 85."""
    assert openai_image_tokens(width, height) == tokens
    url = f"data:image/png;base64,{png(width, height)}"
    for detail, expected in (("high", tokens), ("low", 85)):
        [m] = from_openai(
            [
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": url, "detail": detail}}],
                }
            ]
        )
        assert COUNTER.count_message(m) - COUNTER.per_message == expected


def test_an_image_of_unknown_size_is_a_documented_estimate():
    by_url = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    assert cost(by_url) == ANTHROPIC_IMAGE_UNKNOWN
    [m] = from_openai(
        [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
                ],
            }
        ]
    )
    assert COUNTER.count_message(m) - COUNTER.per_message == OPENAI_IMAGE_UNKNOWN


def test_a_server_tool_block_counts_the_text_it_carries():
    query = "linear regex engines for adversarial input"
    block = {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_search",
        "input": {"query": query},
    }
    assert within(
        cost(block, "assistant"), COUNTER.count_text("srvtoolu_1web_search" + query), 0.25
    )


def test_a_part_with_nothing_to_count_costs_the_fallback():
    part = ContentPart(
        "input_audio", extra='{"input_audio": {"data": "UklGRg==", "format": "wav"}}'
    )
    msg = Message("user", (ContentPart("text", "listen"), part))
    counter = ctxfold.TiktokenCounter("o200k_base", per_non_text_part=100)
    assert counter.count_message(msg) == 3 + counter.count_text("listen") + 100


def test_a_tool_use_block_written_beside_its_call_counts_once():
    """LangChain's messages from Anthropic's models keep each call twice, as a
    ``tool_use`` block and in ``tool_calls``; the provider is sent it once."""
    call = ctxfold.ToolCall("toolu_1", "Read", '{"file_path": "src/app/views.py"}')
    block = ContentPart("tool_use", extra='{"id": "toolu_1", "name": "Read", "input": {}}')
    both = Message("assistant", (ContentPart("text", "Reading."), block), tool_calls=(call,))
    once = Message("assistant", (ContentPart("text", "Reading."),), tool_calls=(call,))
    assert COUNTER.count_message(both) == COUNTER.count_message(once)
