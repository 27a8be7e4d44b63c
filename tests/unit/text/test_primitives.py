"""Identifier finding and sentence splitting: the primitives the engine relies on."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxfold.text.primitives import find_identifiers, json_strings, json_values, split_sentences

CASES = [
    ("Fix src/auth/middleware.ts now.", [("path", "src/auth/middleware.ts")]),
    ("see (https://github.com/a/b/issues/12).", [("url", "https://github.com/a/b/issues/12")]),
    (
        'File "/testbed/src/marshmallow/schema.py", line 12',
        [("path", "/testbed/src/marshmallow/schema.py")],
    ),
    ("open C:\\Users\\me\\report.docx please", [("path", "C:\\Users\\me\\report.docx")]),
    ("edit ./a/b.py:12:4 and ../x/y.js", [("path", "./a/b.py:12:4"), ("path", "../x/y.js")]),
    ("the README.md and setup.cfg", [("path", "README.md"), ("path", "setup.cfg")]),
    (
        "call sch.validate() then self._do_load",
        [("dotted", "sch.validate"), ("dotted", "self._do_load")],
    ),
    ("user mia_li_3668 flight HAT039", [("id", "mia_li_3668"), ("id", "HAT039")]),
    ("on 2024-05-20 at noon", [("date", "2024-05-20")]),
    ("a one_way trip", [("snake", "one_way")]),
    ("raises TypeError in getUser", [("camel", "TypeError"), ("camel", "getUser")]),
    ("run `pip install -e .` first", [("code", "pip install -e .")]),
    ("use `hexdump` or `xxd`", []),  # a single word in backticks is not a command
    ("e.g. this, i.e. that, and/or Y/n, 100it/s, 9999/9999", []),
    ("costs 3.50 in 60s at 385p", []),
    ("</output> and </instructions>", []),
    ("x = 5; log(a / b) >= 0", []),
    (
        "var a=document.getElementById('x');a.addEventListener('click',f)",
        [("dotted", "document.getElementById"), ("dotted", "a.addEventListener")],
    ),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_identifiers_table(text, expected):
    assert [(k, v) for k, v, _, _ in find_identifiers(text)] == expected


def test_grep_output_gives_files_and_keeps_node_ids_lines_and_urls():
    text = "a/b.py:class X\na/c.py-12-  y\nt/d.py::test_e\ne.py:3:1 https://h.io/f.html-x"
    assert [v for _, v, _, _ in find_identifiers(text) if "." in v] == [
        "a/b.py",
        "a/c.py",
        "t/d.py::test_e",
        "e.py:3:1",
        "https://h.io/f.html-x",
    ]


def test_identifier_offsets_point_at_the_value():
    text = "x src/a.py, and HAT039."
    for _, value, start, end in find_identifiers(text):
        assert text[start:end] == value


def test_json_helpers():
    args = (
        '{"reservation_id": "PUNERT", "cabin": "economy", "n": 2, "name": "Mia", "t": "22:00:00"}'
    )
    # a code-like value, and a word whose key says it is a name; not other words
    assert json_values(args) == [("value", "PUNERT"), ("value", "Mia")]
    person = '{"name": {"first_name": "Omar", "lastName": "Rossi"}, "city": "Houston"}'
    assert json_values(person) == [("value", "Omar"), ("value", "Rossi")]
    assert json_values('{"tags": ["Houston"], "usernames": ["Kevin"]}') == [("value", "Kevin")]
    assert json_strings('{"command": "cat a.py\\nls"}') == "cat a.py\nls"
    assert json_strings("not json") == "not json"


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        (
            "Open src/auth/middleware.ts. Then run it!",
            ["Open src/auth/middleware.ts. ", "Then run it!"],
        ),
        ("Version 3.14 is out. Pi is 3.14159.", ["Version 3.14 is out. ", "Pi is 3.14159."]),
        ('He said "Stop. Now." and left. Done.', ['He said "Stop. Now." and left. ', "Done."]),
        ("See https://x.io/a.b?c=d. Next.", ["See https://x.io/a.b?c=d. ", "Next."]),
        ("line one\nline two", ["line one\n", "line two"]),
    ],
)
def test_sentences_never_cut_identifiers_numbers_or_quotes(text, sentences):
    assert split_sentences(text) == sentences


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_sentences_concatenate_to_the_text(text):
    assert "".join(split_sentences(text)) == text


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_identifier_finding_never_crashes_and_values_are_substrings(text):
    for _, value, start, end in find_identifiers(text):
        assert text[start:end] == value and value


def test_token_set_finds_identifiers_shown_as_tokens():
    from ctxfold.text.primitives import TokenSet

    text = 'Edited "src/app.py:12", see https://x.org/a (PR #42); ran `pip install -e .` now.'
    ts = TokenSet(text)
    for value in ("src/app.py:12", "src/app.py", "https://x.org/a", "#42", "pip install -e ."):
        assert value in ts, value
    for value in ("app", "src/other.py", "x.org", "app.py", 42):
        assert value not in ts, value  # whole tokens only
    assert "install -e" in ts  # a value holding a space: a substring test


# Characters that make identifiers, with their edges: a dot or colon inside a token or
# at its end, slashes, digits, inner capitals, delimiters.
_ID_ALPHABET = st.sampled_from([*"aZbY.:/\\_09 -()`'\"<>,;~#@?!\n", "ab", "Cd", "py"])


def _one_scan(text: str) -> list[tuple[str, str, int, int]]:
    """The reference: what one scan of the whole text finds outside its credentials."""
    from ctxfold.text.primitives import _scan
    from ctxfold.text.secrets import overlaps, secret_spans

    spans = secret_spans(text)
    return [t for t in _scan(text) if not overlaps(spans, t[2], t[3])]


def _by_words(text: str) -> list[tuple[str, str, int, int]]:
    """find_identifiers without inline code: the words' identifiers, placed."""
    return [t for t in find_identifiers(text) if t[0] != "code"]


@settings(max_examples=400, deadline=None)
@given(st.lists(_ID_ALPHABET, max_size=40).map("".join))
def test_the_quick_gate_never_hides_an_identifier(text):
    """find_identifiers skips its token scan when one quick search finds no character an
    identifier needs; the scan on such a text finds nothing either."""
    from ctxfold.text.primitives import _MAYBE_IDENTIFIER, _scan

    if not _MAYBE_IDENTIFIER.search(text):
        assert list(_scan(text)) == []


def test_the_bundled_conversations_give_what_one_scan_gives(examples):
    """The quick gate, the words found once and placed: every identifier one scan of
    each text finds, words made and then found."""
    from ctxfold import clear_caches

    clear_caches()
    for _ in range(2):
        for _, messages in examples:
            for m in messages:
                assert _by_words(m.text) == _one_scan(m.text)


_SPACES = st.sampled_from([" ", "\n", "\t", "\x1c", "\u00a0", "\u2028", "\u3000"])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_ID_ALPHABET, _SPACES), max_size=60).map("".join))
def test_words_found_once_place_identifiers_as_one_scan_of_the_text(text):
    """Each whitespace-separated word's identifiers are found once per process and
    placed; that is what one scan of the whole text finds, in order, at its offsets
    (any Unicode whitespace; the same word again; a word inside a longer word)."""
    assert _by_words(text) == _one_scan(text)
    doubled = f"{text} x{text} {text}"
    assert _by_words(doubled) == _one_scan(doubled)


def test_a_word_seen_again_is_placed_where_it_stands():
    text = "</src/a.py> then src/a.py, again src/a.py and\u00a0src/a.py"
    found = [(v, s) for _, v, s, _ in find_identifiers(text)]
    starts = [k for k in range(len(text)) if text.startswith("src/a.py", k)][1:]
    assert found == [("src/a.py", k) for k in starts]  # not the closing tag's


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.sampled_from([*"ab.:/\"'`<>()[]{},;|*=-#@~", "src/a.py:12", "http://x.org", " ", "\n"]),
        max_size=40,
    ).map("".join)
)
@example("a.b " * 400 + "\nsrc/a.py:12 x\n" + "(y)" * 500)  # long lines: not kept
def test_a_token_set_found_line_by_line_is_the_whole_texts(text: str) -> None:
    """Tokens found once per line, then read back: what one split of the whole text
    finds (its tokens, stripped, without a :line suffix), the empty value in none."""
    from ctxfold import clear_caches
    from ctxfold.text.primitives import _DELIMITERS, _EDGES, TokenSet

    whole = set(_DELIMITERS.split(text))
    whole |= {t.strip(_EDGES) for t in whole}
    whole |= {t.split(":", 1)[0] for t in whole if ":" in t and "://" not in t}
    whole.discard("")
    clear_caches()
    for _ in range(2):  # lines made, then found
        ts = TokenSet(text)
        assert ts._tokens == whole
        for probe in ("", "a", "b.", "src/a.py", "x.org", "a\nb", "a b", "zz"):
            shown = probe in whole or (_DELIMITERS.search(probe) is not None and probe in text)
            assert (probe in ts) == shown, probe
