"""Encoding layers: whitespace, JSON, truncation, and codebooks that decode exactly."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxfold import ConfigurationError, Layers, decode, get_counter
from ctxfold.text import Codebook
from ctxfold.text.layers import (
    REPEATED_LINE,
    CodebookError,
    build_codebook,
    distinctness,
    minify_json,
    normalize_whitespace,
    truncate_observation,
)
from ctxfold.text.scoring import goal_names


def test_whitespace_keeps_indentation_and_collapses_prose_runs():
    code = "def f():\n    x  =  1   \n\n\n\n    return x\n"
    out = normalize_whitespace(code, prose=False)
    assert out == "def f():\n    x  =  1\n\n    return x\n"
    assert normalize_whitespace("a   b  c  \n", prose=True) == "a b c\n"
    yaml = "key:\n  - a\n  - b   \n"
    assert normalize_whitespace(yaml, prose=False) == "key:\n  - a\n  - b\n"


def test_json_minify_keeps_the_value_and_strings_untouched():
    text = json.dumps({"msg": "two  spaces   here", "n": [1, 2]}, indent=4)
    out = minify_json(text)
    assert out is not None and json.loads(out) == json.loads(text)
    assert "two  spaces   here" in out
    assert minify_json('{"a":1}') is None  # already minimal
    assert minify_json("not json") is None


def test_truncation_keeps_head_tail_and_errors_with_a_marker():
    lines = [f"line {i}\n" for i in range(300)]
    lines[150] = "ERROR: disk full at /var/data\n"
    out = truncate_observation("".join(lines), max_lines=100, head=10, tail=5)
    assert out is not None
    assert out.startswith("line 0\n") and out.endswith("line 299\n")
    assert "ERROR: disk full at /var/data" in out
    assert "[... 284 lines like the others cut (" in out
    assert truncate_observation("short\n", max_lines=100, head=10, tail=5) is None


def _access_log(n: int = 600) -> list[str]:
    """Request-log lines alike but for their numbers and ids, as a service prints them."""
    routes = ("billing/{}/rates", "orders/{}/items", "notify/{}/schedules")
    return [
        f"2025-03-11T02:{k % 60:02d}:17Z INFO [{k * 7919:012x}] GET /api/v1/"
        + routes[k % 3].format(10_000 + k * 37)
        + f" 200 {k % 900}ms\n"
        for k in range(n)
    ]


def test_truncation_keeps_the_lines_unlike_the_rest_and_cuts_those_alike():
    """A log of 600 lines alike hides one odd line with no error word in it and one
    naming what the task asks about: both survive the cut, the alike lines do not."""
    lines = _access_log()
    lines[233] = "2025-03-11T02:13:17Z WARN pool exhausted: retrying upstream connection\n"
    lines[411] = lines[411].replace("GET", "GET budget_batch")
    out = truncate_observation(
        "".join(lines), max_lines=150, head=10, tail=5, named=goal_names("read `budget_batch`")
    )
    assert out is not None
    assert lines[233] in out and lines[411] in out
    assert lines[300] not in out  # an alike line from the middle
    assert out.count("\n") < 40  # head, tail, marker and the two
    without = truncate_observation("".join(lines), max_lines=150, head=10, tail=5)
    assert without is not None and lines[411] not in without  # named only by the task


def test_distinctness_ranks_an_odd_line_above_its_many_alike_neighbours():
    lines = _access_log(200)
    lines[50] = "Traceback: KeyError merchant token missing in handler\n"
    weights = distinctness(lines)
    assert weights[50] == 1.0
    assert max(w for k, w in enumerate(weights) if k != 50) == REPEATED_LINE


def _compiler_output(n: int) -> list[str]:
    """A build's warnings, each a block of a header, a ``-->`` place and code."""
    out: list[str] = []
    for k in range(n):
        out += [
            f"warning: unused variable: `v{k}`\n",
            f"  --> src/mod_{k % 7}/lib.rs:{100 + k}:{k % 40}\n",
            "   |\n",
            f"{100 + k}|     let v{k} = compute();\n",
        ]
    return out


def test_where_an_error_happened_is_kept_with_it_though_it_reads_like_the_rest():
    """A compiler's error among 150 warnings: its ``-->`` place reads like every
    warning's, yet it is where the error is (a Python traceback's last frame, before
    its exception, too): worth an odd line, and kept by the cut."""
    lines = _compiler_output(150)
    error = [
        "error[E0382]: borrow of moved value: `receipt`\n",
        "  --> src/mod_3/lib.rs:510:59\n",
    ]
    lines[300:300] = error
    weights = distinctness(lines)
    assert weights[301] == 1.0 and weights[305] == REPEATED_LINE  # another warning's place
    out = truncate_observation("".join(lines), max_lines=150, head=10, tail=5)
    assert out is not None and "src/mod_3/lib.rs:510:59" in out
    frames = [f'  File "app/pay.py", line {k}, in charge\n' for k in range(200)]
    frames[150:150] = ["    total = rates[merchant]\n", "KeyError: 'merchant_7'\n"]
    weights = distinctness(frames)
    assert weights[149] == 1.0 and weights[100] == REPEATED_LINE  # the frame that raised it


def test_lines_whose_lower_case_is_longer_do_not_move_an_error_to_another_line():
    """``"İ".lower()`` is two characters: an error found in the lower-cased lines is
    placed on its own line however many such letters stand before it."""
    lines = [ln.replace("compute", "İİİİİİİİİİ") for ln in _compiler_output(150)]
    lines[300:300] = ["error[E0382]: borrow of moved value\n", "  --> src/mod_3/lib.rs:510:59\n"]
    weights = distinctness(lines)
    assert weights[301] == 1.0 and weights[305] == REPEATED_LINE  # the error's place only


def test_layer_settings_are_checked():
    with pytest.raises(ConfigurationError, match="truncate_head"):
        Layers(truncate_lines=10, truncate_head=8, truncate_tail=5)
    with pytest.raises(ConfigurationError, match="truncate_lines"):
        Layers(truncate_lines=0)


def test_codebook_encodes_at_word_boundaries_and_lists_only_used_codes():
    book = Codebook({"D0": "marshmallow", "D1": "unused_phrase"})
    encoded, used = book.encode("marshmallow.fields and marshmallows")
    assert encoded == "§D0.fields and marshmallows"
    assert used == {"D0"}
    assert "§D0 = marshmallow" in book.header(used) and "D1" not in book.header(used)
    assert book.decode(encoded) == "marshmallow.fields and marshmallows"


def test_dynamic_codebook_and_path_aliases_save_tokens_and_decode():
    counter = get_counter("o200k_base")
    text = "\n".join(
        f"/testbed/src/sqlfluff/rules/L0{i}.py: SomeVeryLongIdentifierName used here"
        for i in range(20)
    )
    book = build_codebook([text], counter.count_text, dynamic=True, paths=True)
    assert any(v.startswith("/testbed/src/sqlfluff/") for v in book.entries.values())
    encoded, used = book.encode(text)
    assert counter.count_text(encoded) + counter.count_text(book.header(used)) < (
        counter.count_text(text)
    )
    assert book.decode(encoded) == text


def test_unknown_code_is_a_clear_error():
    with pytest.raises(CodebookError, match="unknown code §ZZ"):
        decode("a §ZZ b", {"D0": "x"})
    assert decode("a §ZZ b", {}) == "a §ZZ b"  # nothing was encoded


PHRASES = st.lists(
    st.text(
        st.characters(codec="utf-8", categories=("L", "N", "P", "Zs")), min_size=2, max_size=12
    ).filter(lambda p: "§" not in p and p.strip() == p and p),
    min_size=1,
    max_size=6,
    unique=True,
)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400), PHRASES)
def test_decode_of_encode_is_exact_even_with_code_like_text(text, phrases):
    # text may already hold "§", "§§", "§D0" and the like
    book = Codebook({f"D{k}": p for k, p in enumerate(phrases)})
    encoded, _ = book.encode(text)
    assert book.decode(encoded) == text


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["§", "§§", "§D0", "/usr/lib/python3/", "marshmallow", " ", "\n", "x", "§P0/"]
        ),
        max_size=40,
    ).map("".join)
)
def test_round_trip_on_adversarial_text(text):
    book = Codebook({"D0": "marshmallow", "P0": "/usr/lib/python3/"})
    encoded, _ = book.encode(text)
    assert book.decode(encoded) == text


def test_spaced_minify_writes_arguments_as_chat_clients_do():
    pretty = '{\n  "path": "src/app.py",\n  "line": 12\n}'
    assert minify_json(pretty, spaced=True) == '{"path": "src/app.py", "line": 12}'
    assert minify_json('{"path": "src/app.py"}', spaced=True) is None  # no shorter
    assert minify_json('{"path":"src/app.py"}', spaced=True) is None  # already compact
