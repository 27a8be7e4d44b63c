"""Reference extraction, the reference index and its reconstruction block, event hooks."""

from __future__ import annotations

import json
import logging
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxfold
from conftest import DATA_DIR, SKIP_NO_DATA, example_conversations, shared_conversations
from ctxfold import Message, ReferenceIndex, ToolCall
from ctxfold.references import Reference, reference_id
from ctxfold.references.extractors import extract_commands, extract_snippets
from ctxfold.references.index import extract
from ctxfold.text.fences import FenceSyntax, fences

COUNTER = ctxfold.get_counter("o200k_base")


def found(text: str, type_: str) -> dict[str, str]:
    """value -> kind of every finding of ``type_`` in ``text``."""
    return {v: k for _, t, v, k, _ in extract([Message("user", text)]) if t == type_}


# (type, text, values that must be found with their kind (None: any), values that must not)
CASES = [
    # files
    ("file", "Edit src/auth/middleware.ts:40:2 now", {"src/auth/middleware.ts": "line 40:2"}, []),
    ("file", r"see C:\Users\me\app\main.py for it", {r"C:\Users\me\app\main.py": "path"}, []),
    (
        "file",
        "run ./scripts/build.sh then ../lib/util.js",
        {"./scripts/build.sh": None, "../lib/util.js": None},
        [],
    ),
    (
        "file",
        'open "C:\\Program Files\\My App\\config.ini" please',
        {"C:\\Program Files\\My App\\config.ini": "quoted"},
        ["C:\\Program"],
    ),
    (
        "file",
        "cat '/home/me/My Documents/report.pdf'",
        {"/home/me/My Documents/report.pdf": "quoted"},
        ["/home/me/My"],
    ),
    ("file", "(see docs/setup.md) and setup.py.", {"docs/setup.md": None, "setup.py": None}, []),
    ("file", "version 3.11 and 2.5/3 of it", {}, ["3.11", "2.5/3"]),
    (  # grep -A/-B context lines: the file, not the file glued to the line
        "file",
        "src/rules/L060.py:12:    x = 1\nsrc/rules/L060.py-from a import b\n"
        "test/t.py-40-    assert x\nsrc/rules/L061.py:class Rule_L061(BaseRule):",
        {"src/rules/L060.py": None, "test/t.py": None, "src/rules/L061.py": "path"},
        ["src/rules/L060.py-from", "test/t.py-40-", "src/rules/L061.py:class"],
    ),
    # URLs
    (
        "url",
        "Fixed in (https://github.com/psf/requests/pull/6432).",
        {"https://github.com/psf/requests/pull/6432": "github_pull"},
        [],
    ),
    (
        "url",
        "See [the issue](https://github.com/a/b/issues/12), then",
        {"https://github.com/a/b/issues/12": "github_issue"},
        [],
    ),
    (
        "url",
        "https://en.wikipedia.org/wiki/Foo_(bar).",
        {"https://en.wikipedia.org/wiki/Foo_(bar)": "web"},
        [],
    ),
    (
        "url",
        "Answer: https://stackoverflow.com/questions/11227809/why-is-it, thanks",
        {"https://stackoverflow.com/questions/11227809/why-is-it": "stackoverflow"},
        [],
    ),
    (
        "url",
        "read https://docs.python.org/3/library/re.html!",
        {"https://docs.python.org/3/library/re.html": "documentation"},
        [],
    ),
    # functions
    (
        "function",
        "def parse_config(path):\n    return cfg.load(path)",
        {"parse_config": "definition", "cfg.load": "call"},
        [],
    ),
    (
        "function",
        "export async function fetchUser(id) {}\nconst onClick = (e) => go(e);",
        {"fetchUser": "definition", "onClick": "definition"},
        [],
    ),
    (
        "function",
        "func (s *Server) ServeHTTP(w http.ResponseWriter) {}\nfn parse_args() {}",
        {"ServeHTTP": "definition", "parse_args": "definition"},
        [],
    ),
    ("function", "    public static void runTask(String name) {", {"runTask": "definition"}, []),
    ("function", "if (x) print(len(y)) and then (see below)", {}, ["if", "print", "len", "see"]),
    (
        "function",
        "!function(e){var t={};function n(r){if(t[r])return t[r].exports}}()",
        {},
        ["n", "e", "t"],
    ),
    # classes
    ("class", "class Config(BaseModel):\n    pass", {"Config": "definition"}, []),
    (
        "class",
        "export interface UserProps { id: string }\ntype Mode = 'a' | 'b'",
        {"UserProps": "definition", "Mode": "definition"},
        [],
    ),
    (
        "class",
        "type Server struct {\n}\nimpl Display for Point {}\nx = new Parser(src)",
        {"Server": "definition", "Point": "definition", "Parser": "construction"},
        [],
    ),
    # errors
    (
        "error",
        'Traceback (most recent call last):\n  File "/app/main.py", line 12, in handler\n'
        "    run()\nValueError: bad port 8080",
        {"ValueError: bad port 8080": "exception", "/app/main.py:12 in handler": "frame"},
        [],
    ),
    (
        "error",
        "TypeError: Cannot read properties of undefined (reading 'x')\n"
        "    at Object.handler (/srv/app/index.js:10:5)",
        {
            "TypeError: Cannot read properties of undefined (reading 'x')": "exception",
            "/srv/app/index.js:10 in Object.handler": "frame",
        },
        [],
    ),
    (
        "error",
        'Exception in thread "main" java.lang.NullPointerException: name is null\n'
        "\tat com.acme.App.run(App.java:42)",
        {
            "java.lang.NullPointerException: name is null": "exception",
            "App.java:42 in com.acme.App.run": "frame",
        },
        [],
    ),
    (
        "error",
        "panic: runtime error: index out of range\n\t/home/u/main.go:12 +0x1d",
        {"panic: runtime error: index out of range": "error_line", "/home/u/main.go:12": "frame"},
        [],
    ),
    (
        "error",
        "thread 'main' panicked at src/main.rs:5:9:\nerror[E0382]: borrow of moved value",
        {"error[E0382]: borrow of moved value": "error_line"},
        [],
    ),
    (
        "error",
        "Process exited with code 2; the retry finished with exit code 0",
        {"exit code 2": "exit_code"},
        ["exit code 0"],
    ),
    # commands
    (
        "command",
        "$ pytest -q tests/test_api.py\n3 passed",
        {"pytest -q tests/test_api.py": "prompt"},
        [],
    ),
    ("command", "```bash\n# install\npip install -e .\n```", {"pip install -e .": None}, []),
    ("command", "git commit -m 'fix parser'", {"git commit -m 'fix parser'": "cli"}, []),
    (
        "command",
        "make sure you find the file\ncat the output later",
        {},
        ["make sure you find the file"],
    ),
    ("command", "then run `npm run build` again", {"npm run build": "inline"}, []),
    # snippets
    (
        "snippet",
        "```python\ndef f(x):\n    return x + 1\n```",
        {"def f(x):\n    return x + 1": "python"},
        [],
    ),
    ("snippet", "```bash\nls -la\n```", {}, ["ls -la"]),
    # decisions
    (
        "decision",
        "We decided to pin requests==2.31.0 because of the bug. Nice day.",
        {"We decided to pin requests==2.31.0 because of the bug.": "decision"},
        ["Nice day."],
    ),
    ("decision", "I like pizza and the sea.", {}, ["I like pizza and the sea."]),
    # other identifiers
    (
        "identifier",
        "Flight HAT039 on 2024-05-16 via sys.argv",
        {"HAT039": "id", "2024-05-16": "date", "sys.argv": "name"},
        [],
    ),
    (
        "identifier",
        '{"reservation_id": "PUNERT", "cabin": "economy"}',
        {"PUNERT": "value"},
        ["economy"],
    ),
    (  # in JSON the keys are schema: only the values' names are references
        "identifier",
        '{"first_name": "Ivan", "payment_id": "credit_card_9659780", "flight_type": "one_way"}',
        {"credit_card_9659780": None, "one_way": None},
        ["first_name", "payment_id", "flight_type"],
    ),
]


@pytest.mark.parametrize(("type_", "text", "want", "unwanted"), CASES)
def test_extractors_on_real_world_strings(type_, text, want, unwanted):
    got = found(text, type_)
    for value, kind in want.items():
        assert value in got, (value, got)
        assert kind is None or got[value] == kind, (value, got[value])
    for value in unwanted:
        assert value not in got


def test_commands_in_tool_call_arguments_and_names_the_agent_acted_on():
    call = ToolCall("c1", "bash", json.dumps({"command": "cd /testbed && pytest -x"}))
    lookup = ToolCall("c2", "get_user", json.dumps({"user_id": "omar_rossi_1241"}))
    refs = ReferenceIndex.from_messages([Message("assistant", "", tool_calls=(call, lookup))])
    assert {r.value for r in refs.by_type("command")} == {"cd /testbed && pytest -x"}
    assert "omar_rossi_1241" in {r.value for r in refs.by_type("identifier")}


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=400))
def test_extraction_never_fails_is_deterministic_and_values_come_from_the_text(text):
    msgs = [Message("user", text)]
    first = list(extract(msgs))
    assert first == list(extract(msgs))
    for _, type_, value, _, _ in first:
        if type_ in ("file", "url", "identifier", "function", "class"):
            assert value in text


def test_findings_in_the_shared_data_keep_the_probe_identifiers():
    if DATA_DIR is None:
        pytest.skip(SKIP_NO_DATA)
    total = kept = 0
    for name in ("mini_swe_agent", "swe_agent"):
        lines = (DATA_DIR / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
        for line in lines[:10]:
            rec = json.loads(line)
            msgs = ctxfold.from_openai(rec["messages"])
            values = " ".join(r.value for r in ReferenceIndex.from_messages(msgs))
            full = "\n".join(m.text + " ".join(c.arguments for c in m.tool_calls) for m in msgs)
            for probe in rec["probes"]["identifiers"]:
                if probe in full:
                    total += 1
                    kept += probe in values
    assert total > 50 and kept / total >= 0.97


# --------------------------------------------------------------------------- the index


def history() -> list[Message]:
    return [
        Message("system", "You fix bugs."),
        Message("user", "The login fails with KeyError: 'token' in src/auth/session.py"),
        Message("assistant", "Let's read src/auth/session.py and src/auth/tokens.py first."),
        Message(
            "tool", "def load_session(req):\n    return req.cookies['token']", tool_call_id="c1"
        ),
        Message("assistant", "See https://github.com/acme/app/issues/77. Now src/db/pool.py."),
        Message("user", "Also check the session cookie handling in src/auth/session.py"),
    ]


def test_references_are_deduplicated_with_their_sightings_and_stable_ids():
    index = ReferenceIndex.from_messages(history())
    session = next(r for r in index.by_type("file") if r.value == "src/auth/session.py")
    assert (session.first_seen, session.last_seen, session.count) == (1, 5, 3)
    assert session.id == reference_id("file", "src/auth/session.py") == index.get(session.id).id
    assert re.fullmatch(r"[0-9a-f]{12}", session.id)
    again = ReferenceIndex.from_messages(history())
    assert [(r.id, r.relevance) for r in again] == [(r.id, r.relevance) for r in index]
    assert session.id in index and "nope" not in index and index.get("nope") is None
    assert index.types()[:2] == ["file", "url"]


def test_query_by_type_text_and_id_ranks_exact_matches_first():
    index = ReferenceIndex.from_messages(history())
    hits = index.search("src/auth/session.py")
    assert hits[0].value == "src/auth/session.py"
    assert [r.value for r in index.search("auth", type="file")] == [
        "src/auth/session.py",
        "src/auth/tokens.py",
    ]
    assert index.search("") == [] and index.search("zzz") == []
    assert index.by_type("url")[0].kind == "github_issue"


def test_relevance_follows_the_goal_and_the_cap_keeps_the_most_relevant():
    index = ReferenceIndex.from_messages(history(), goal="the database pool is slow")
    files = {r.value: r.relevance for r in index.by_type("file")}
    assert files["src/db/pool.py"] > files["src/auth/tokens.py"]
    capped = ReferenceIndex.from_messages(history(), goal="database pool", max_references=3)
    full = ReferenceIndex.from_messages(history(), goal="database pool")
    assert len(capped) == 3 and "src/db/pool.py" in {r.value for r in capped}
    assert [r.id for r in capped.top()] == [r.id for r in full.top(3)]  # the most relevant
    with pytest.raises(ctxfold.ConfigurationError, match="max_references"):
        ReferenceIndex(max_references=0)


def test_the_block_groups_by_type_says_how_to_retrieve_and_fits_its_allowance():
    index = ReferenceIndex.from_messages(history())
    block = index.block(max_tokens=120, counter=COUNTER)
    assert block.startswith("[ctxfold references")
    assert "Files (read the file):" in block and "URLs (fetch the URL):" in block
    assert COUNTER.count_text(block) <= 120
    small = index.block(max_tokens=40, counter=COUNTER)
    assert COUNTER.count_text(small) <= 40 and len(small) < len(block)
    assert index.block(max_tokens=5, counter=COUNTER) == ""
    shown = index.block(max_tokens=120, counter=COUNTER, shown="we read src/auth/tokens.py")
    files = next(line for line in shown.splitlines() if line.startswith("Files"))
    assert "src/auth/tokens.py" not in files and "src/auth/session.py" in files
    key_error = index.by_type("error")[0]
    ids = {r.id: f"m{r.source}" for r in index}
    expandable = index.block(max_tokens=200, counter=COUNTER, expand_ids=ids)
    assert f"{key_error.value} [expand m1]" in expandable and "expand(id)" in expandable
    assert "[expand" not in block


def test_custom_extractors_by_regex_or_function():
    try:
        ctxfold.register_extractor("ticket", r"\b([A-Z]{2,5}-\d+)\b")
        ctxfold.register_extractor(
            "mood", lambda text: [("happy", "feeling")] if ":)" in text else []
        )
        index = ReferenceIndex.from_messages([Message("user", "JIRA-42 and OPS-7 are done :)")])
        assert {r.value for r in index.by_type("ticket")} == {"JIRA-42", "OPS-7"}
        assert index.by_type("mood")[0].kind == "feeling"
        with pytest.raises(ctxfold.ConfigurationError, match="already"):
            ctxfold.register_extractor("ticket", r"x")
        ctxfold.register_extractor("mood", lambda text: [42], replace=True)
        with pytest.raises(ctxfold.ConfigurationError, match="yielded 42"):
            ReferenceIndex.from_messages([Message("user", "hello there")])
        ctxfold.references.unregister_extractor("mood")
        assert "mood" not in ctxfold.references.extractors()
        with pytest.raises(ctxfold.ConfigurationError, match="no reference type is registered"):
            ctxfold.references.unregister_extractor("mood")
        with pytest.raises(ctxfold.ConfigurationError, match="bad pattern"):
            ctxfold.register_extractor("broken", "(")
    finally:
        ctxfold.references.reset_extractors()
    assert set(ctxfold.references.extractors()) == set(ctxfold.references.index.BUILTIN_TYPES)


def test_the_example_conversations_yield_their_files():
    for name, msgs in example_conversations():
        index = ReferenceIndex.from_messages(msgs)
        assert len(index) > 0, name
        assert all(isinstance(r, Reference) and r.type and r.value for r in index)


# --------------------------------------------------------------------------- hooks


def test_hooks_report_compaction_and_references_and_never_break_it(caplog):
    seen: list[ctxfold.hooks.Event] = []

    def broken(event: ctxfold.hooks.Event) -> None:
        raise RuntimeError("a broken callback")

    offs = [ctxfold.on(name, seen.append) for name in ctxfold.hooks.EVENTS]
    offs.append(ctxfold.on("compaction_started", broken))
    try:
        msgs = history() * 4
        with caplog.at_level(logging.ERROR, logger="ctxfold"):
            result = ctxfold.compress(msgs, budget=COUNTER.count_messages(msgs) // 2)
            ReferenceIndex.from_messages(history())
    finally:
        for off in offs:
            off()
    names = [e.name for e in seen]
    assert names[0] == "compaction_started" and "compaction_completed" in names
    assert seen[0]["budget"] == COUNTER.count_messages(msgs) // 2
    done = next(e for e in seen if e.name == "compaction_completed")
    assert done["result"] is result
    extracted = [e for e in seen if e.name == "reference_extracted"]
    merged = [e for e in seen if e.name == "reference_deduplicated"]
    assert extracted and merged and merged[0]["reference"].count >= 2
    assert "a broken callback" in caplog.text
    seen.clear()
    ctxfold.compress(msgs, budget=COUNTER.count_messages(msgs) // 2)
    assert seen == []  # all removed
    with pytest.raises(ctxfold.ConfigurationError, match="unknown event"):
        ctxfold.on("compaction_exploded", print)


# ------------------------------------------------------ fenced code, in linear time

#: The lazy pattern the extractors ran before (quadratic in the number of unclosed
#: openings, and in the length of an unterminated fence run), kept as the reference the
#: linear scan must agree with.
OLD_FENCE = re.compile(
    r"^[ \t]*(```+|~~~+)[ \t]*([\w+#.-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S
)
#: Fences of every length, indents, info strings, carriage returns, shell languages.
FRAGMENTS = (
    *("```", "~~~", "````", "~~~~", "`````", "`", "~", " ", "\t", "\n", "\n", "\r"),
    *("python", "sh", "bash", "a", "x y", "+#.-", "é", "$ ls", "\n```\n", "\n~~~\n"),
    *("\n  ```", "\n```python\n", "```` ", "\n````\n", "\n\t~~~~ sh\n", "\n  ````\n"),
)


def old_and_new_blocks(text: str) -> tuple[list[tuple[int, str, str, int]], ...]:
    """``(start, language, body, body start)`` of each block, as the old pattern found
    them and as :func:`fences` does."""
    old = [(m.start(), m.group(2), m.group(3), m.start(3)) for m in OLD_FENCE.finditer(text)]
    new = [
        (b.start, b.info, text[b.body_start : b.body_end], b.body_start)
        for b in fences(text, FenceSyntax.INDENTED)
    ]
    return old, new


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=60).map("".join))
def test_fenced_blocks_are_what_the_lazy_pattern_found(text: str) -> None:
    old, new = old_and_new_blocks(text)
    assert new == old


def test_fenced_blocks_are_unchanged_on_the_shared_conversations() -> None:
    texts = [m.text for _, msgs in shared_conversations() for m in msgs if m.text]
    assert sum("```" in t for t in texts) >= 10  # the sample holds fenced code
    for text in texts:
        old, new = old_and_new_blocks(text)
        assert new == old, text[:200]


@pytest.mark.parametrize(
    ("text", "snippets"),
    [
        ("  ````py\nx\n  ````\n", {"x": "py"}),
        ("````py\nx\n```\n", {"x": "code"}),  # closed by a shorter run: no language
        ("````py\nx\n```\ny\n````\n", {"x\n```\ny": "py"}),  # the longest run first
        ("```\nopen\n~~~ts\nx\n~~~\n", {"x": "ts"}),  # unclosed: the next line tries
        ("```\nx\n```\r\n", {}),  # a carriage return is not a closing line's space
    ],
)
def test_fenced_blocks_close_on_the_same_run_or_a_shorter_one(
    text: str, snippets: dict[str, str]
) -> None:
    assert {v: k for v, k, _ in extract_snippets(text)} == snippets


@pytest.mark.parametrize(
    "body",
    [
        "```1\n",
        "~",  # one unterminated run: every shorter run was tried to the end
        "```sh\n$ ls\n",
        "  ~~~~\n```\n",
        "".join("~" * k + "\n" for k in range(3, 200)) + "~" * 400 + "\n",
    ],
)
def test_unclosed_fences_are_extracted_in_linear_time(body: str) -> None:
    """Issue 47, item 5's build line: 100 KB of unclosed openings took 88 s (``"```1\\n"``)
    and 9 s (``"~"``) in the command and snippet extractors; now well under a second."""
    text = (body * (100_000 // len(body) + 1))[:100_000]
    best = float("inf")
    for _ in range(3):  # the best of three: the machine is shared
        start = time.perf_counter()
        list(extract_commands(text))
        list(extract_snippets(text))
        best = min(best, time.perf_counter() - start)
    assert best < 0.4
