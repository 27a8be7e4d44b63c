"""``redact=True``: no credential reaches the model, the store keeps every original,
and ``expand`` gives the history back exactly."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxfold
from ctxfold import MemoryStore, Message, ToolCall
from ctxfold._json import loads as json_loads
from ctxfold.reversible.records import encode, entry_id, message_record
from ctxfold.reversible.redaction import SECRET_MARK, redact, unredact
from ctxfold.session import Session
from ctxfold.storage import SQLiteStore
from tests.unit.text.test_secrets import ENV_OUTPUT, ORDINARY, SECRETS


def _agent_run() -> list[dict[str, object]]:
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": ""}}
    call["function"]["arguments"] = json.dumps(  # type: ignore[index]
        {"command": f"curl -H 'Authorization: Bearer {SECRETS['bearer']}' https://api.x.io"}
    )
    return [
        {"role": "system", "content": "You are a deployment agent."},
        {"role": "user", "content": "Deploy release 4; check the environment first."},
        {"role": "assistant", "content": "Reading the environment.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": ENV_OUTPUT},
        *[
            {"role": r, "content": f"Step {k}: deploying release 4 to region {k}, all green. " * 4}
            for k in range(12)
            for r in ("user", "assistant")
        ],
    ]


def _seen(messages: list[dict[str, object]]) -> str:
    return json.dumps(messages, ensure_ascii=False)


def test_compress_masks_every_credential_and_expand_gives_the_originals(tmp_path) -> None:
    msgs = _agent_run()
    store = SQLiteStore(tmp_path / "s.db")
    for budget in (100_000, 700):  # fits as it is; compacted
        result = ctxfold.compress(msgs, budget=budget, redact=True, store=store)
        seen = _seen(result.to_openai())
        assert not [k for k, v in SECRETS.items() if v in seen], budget
        assert "[secret " in seen and result.stats.tokens_after <= budget
        if budget > 10_000:
            assert all(value in seen for value in ORDINARY)  # identifiers stay
            assert "redacted" in result.trace[3].flags
        back = ctxfold.expand(result, store=store)
        assert back.complete and back.to_openai() == msgs
        wire = ctxfold.expand(result.to_openai(), store=store)  # metadata lost
        assert wire.complete and wire.to_openai() == msgs


def test_a_session_that_redacts_never_shows_a_credential_and_keeps_the_history(
    tmp_path,
) -> None:
    msgs = ctxfold.from_openai(_agent_run())
    db = tmp_path / "s.db"
    session = Session("d", budget=700, store=SQLiteStore(db), redact=True)
    renders = []
    for m in msgs:
        if m.role == "assistant":
            renders.append(session.render())
        session.add(m)
    renders.append(session.render())
    for r in renders:
        seen = _seen(r.to_openai())
        assert not [k for k, v in SECRETS.items() if v in seen]
    assert session.history == tuple(msgs)  # the originals, unaltered
    again = Session.load("d", budget=700, store=SQLiteStore(db), redact=True)
    assert again.render().to_openai() == renders[-1].to_openai()
    back = ctxfold.expand(renders[-1], store=session.expand_tool().store)
    assert back.complete and back.to_openai() == ctxfold.to_openai(msgs)
    tool = session.expand_tool()
    ids = {
        part.split("]")[0]
        for m in (*renders[1].messages, *renders[-1].messages)
        for part in (m.text + "".join(c.arguments for c in m.tool_calls)).split("[secret ")[1:]
    }
    assert ids
    for entry in ids:  # the model asks for an original: it reads it masked
        answer = tool(entry)
        assert not [k for k, v in SECRETS.items() if v in answer], answer[:200]


def test_a_secret_mark_the_store_cannot_resolve_is_left_and_reported() -> None:
    """Not restored, never invented: the message stays as it is and its id is named
    (the wrong store, or a user's text that looks like a mark)."""
    said = [{"role": "user", "content": "my note says [secret 123456789012] somewhere"}]
    back = ctxfold.expand(said, store=MemoryStore())
    assert back.to_openai() == said and back.missing == ("123456789012",)


# --------------------------------------------------------- the structure is walked

STORE_KEY = b"k" * 32


def _call(arguments: str, name: str = "bash") -> Message:
    return Message("assistant", None, tool_calls=(ToolCall("c1", name, arguments),))


def _redacted(m: Message, store: MemoryStore | None = None) -> Message:
    masked, changed = redact([m], MemoryStore(key=STORE_KEY) if store is None else store)
    assert changed == [0]
    return masked[0]


def _valid_for_both_apis(m: Message) -> None:
    msgs = [Message("user", "go"), m, Message("tool", "ok", tool_call_id="c1")]
    ctxfold.to_anthropic(msgs)  # parses every call's arguments: raises on bad JSON
    for d in ctxfold.to_openai(msgs)[1]["tool_calls"]:
        assert isinstance(json_loads(d["function"]["arguments"]), dict)


PEM_NO_END = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq9xQp2f8kLm3nRt5vWz0yA1cE4gH6jK8m\n"
)


@pytest.mark.parametrize(
    ("arguments", "secret"),
    [
        (json.dumps({"command": 'echo "API_KEY=Xy9kLm3pQr8s7tZ" >> .env'}), "Xy9kLm3pQr8s7tZ"),
        (json.dumps({"path": "id_rsa", "content": PEM_NO_END}), "MIIEowIBAAKCAQEA7bq9xQp2"),
        (json.dumps({"key": PEM_NO_END, "mode": 384}, indent=2), "MIIEowIBAAKCAQEA7bq9xQp2"),
    ],
)
def test_redacted_arguments_stay_the_json_they_were(arguments: str, secret: str) -> None:
    """The reproducers: a quoted assignment in a shell command, a PEM key without its
    END line. Masked as text, the first lost its escaping backslash and the second ate
    the closing quote and brace; the arguments are now masked string by string."""
    store = MemoryStore(key=STORE_KEY)
    original = _call(arguments)
    masked = _redacted(original, store)
    args = masked.tool_calls[0].arguments
    assert secret not in args and "[secret " in args
    assert isinstance(json_loads(args), dict)
    _valid_for_both_apis(masked)
    assert unredact([masked], store) == ([original], [])


def test_arguments_without_a_credential_are_kept_byte_for_byte() -> None:
    styles = [
        '{ "path" : "a\\/b.py",\n  "text": "caf\\u00e9 \\"quoted\\"" }',
        '{"q":"東京","n":1e3,"deep":[[[{"x":null}]]]}',
        "not json at all: echo hi",
        '"just a string"',
    ]
    m = Message(
        "assistant", None, tool_calls=tuple(ToolCall(f"c{k}", "f", a) for k, a in enumerate(styles))
    )
    out, changed = redact([m], MemoryStore())
    assert changed == [] and out[0] is m


def test_only_the_literal_that_held_a_credential_is_written_again() -> None:
    arguments = '{ "a" : [1, 2.50, "x\\/y"],\n  "token": "Xy9kLm3pQr8s7tZ9",  "b": "\\u00e9" }'
    args = _redacted(_call(arguments)).tool_calls[0].arguments
    mark = SECRET_MARK.search(args)
    assert mark is not None
    assert args == arguments.replace("Xy9kLm3pQr8s7tZ9", mark.group())
    deep = json.dumps({"env": {"OPENAI_API_KEY": SECRETS["openai"]}, "list": [SECRETS["github"]]})
    masked = json_loads(_redacted(_call(deep)).tool_calls[0].arguments)
    assert SECRETS["openai"] not in json.dumps(masked) and SECRETS["github"] not in json.dumps(
        masked
    )
    keyed = json.dumps({SECRETS["openai"]: 1, "x": "y"})  # a key that is a credential
    assert SECRETS["openai"] not in _redacted(_call(keyed)).tool_calls[0].arguments


def test_non_json_arguments_are_masked_as_text() -> None:
    masked = _redacted(_call(f"echo {SECRETS['github']} | gh auth login --with-token"))
    assert SECRETS["github"] not in masked.tool_calls[0].arguments


# Credentials as they appear inside strings, each with what must not survive.
_EMBEDDED = [
    *[
        (SECRETS[k], SECRETS[k])
        for k in ("openai", "anthropic", "github", "stripe", "jwt", "aws_key")
    ],
    (f"Authorization: Bearer {SECRETS['bearer']}", SECRETS["bearer"]),
    (f"postgres://admin:{SECRETS['db_password']}@db:5432/app", SECRETS["db_password"]),
    ('API_KEY="Xy9kLm3pQr8s7tZ"', "Xy9kLm3pQr8s7tZ"),
    ("export GITHUB_TOKEN='Ab3dEf6hIj9kLm2n'", "Ab3dEf6hIj9kLm2n"),
    (PEM_NO_END, "MIIEowIBAAKCAQEA7bq9xQp2"),
    (PEM_NO_END + "-----END RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEA7bq9xQp2"),
]
_NOISE = st.text(
    alphabet=st.sampled_from(
        ['"', "\\", "\n", "\t", "'", " ", "é", "東", "😀", "\u2028", "a", "{", "}", ":", "="]
    ),
    max_size=6,
)


@st.composite
def _hostile_arguments(draw: st.DrawFn) -> tuple[dict[str, object], list[str]]:
    """A JSON object with credentials embedded in its strings, between quotes,
    backslashes, newlines and non-ASCII text, at any depth; and the credentials."""
    chosen = draw(st.lists(st.sampled_from(_EMBEDDED), min_size=1, max_size=3))
    strings = [f"{draw(_NOISE)} {shown} {draw(_NOISE)}" for shown, _ in chosen]
    plain = st.one_of(st.text(max_size=8), st.integers(), st.booleans(), st.none())
    tree = st.recursive(
        plain,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
        ),
        max_leaves=8,
    )
    doc: dict[str, object] = draw(st.dictionaries(st.text(max_size=5), tree, max_size=3))
    for k, s in enumerate(strings):
        where = draw(st.sampled_from(["value", "nested", "list"]))
        doc[f"f{k}"] = s if where == "value" else {"inner": [s]} if where == "nested" else [1, s]
    return doc, [hidden for _, hidden in chosen]


@settings(max_examples=200, deadline=None)
@given(_hostile_arguments(), st.booleans(), st.sampled_from([None, 2]))
def test_redacted_arguments_are_always_valid_json(case, ascii_only, indent) -> None:
    doc, hidden = case
    arguments = json.dumps(doc, ensure_ascii=ascii_only, indent=indent)
    store = MemoryStore(key=STORE_KEY)
    original = _call(arguments)
    masked = _redacted(original, store)
    args = masked.tool_calls[0].arguments
    readable = json.dumps(json_loads(args), ensure_ascii=False)
    assert not [h for h in hidden if h in args or h in readable]
    _valid_for_both_apis(masked)
    assert unredact([masked], store) == ([original], [])


def _every_field_holds_a_credential() -> Message:
    image = {
        "type": "image_url",
        "image_url": {"url": f"https://img.example/a.png?api_key={SECRETS['openai']}"},
    }
    return ctxfold.from_openai(
        [
            {
                "role": "assistant",
                "name": f"agent {SECRETS['github']}",
                "content": [{"type": "text", "text": "Looking."}, image],
                "reasoning_content": f"The env says STRIPE_KEY={SECRETS['stripe']}, use it.",
                "refusal": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": f"fetch-{SECRETS['slack']}", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "done"},
        ]
    )[0]


def test_every_field_a_message_carries_is_masked_and_given_back() -> None:
    """The reproducer: ``reasoning_content`` (a provider extra) and an ``image_url``
    part's URL reached the render unmasked; so did a tool's name and the message's."""
    original = _every_field_holds_a_credential()
    store = MemoryStore(key=STORE_KEY)
    masked = _redacted(original, store)
    wire = json.dumps(ctxfold.to_openai([masked]), ensure_ascii=False)
    shown = json.dumps(ctxfold.to_anthropic([masked, Message("tool", "done", tool_call_id="c1")]))
    for secret in ("openai", "github", "stripe", "slack"):
        assert SECRETS[secret] not in wire and SECRETS[secret] not in shown, secret
    assert wire.count("[secret ") == 4  # the URL, the extra, the tool's name, the name
    assert masked.content[0] == original.content[0]  # the text part had none
    assert unredact([masked], store) == ([original], [])
    # marks are found in every field: a mark only in an extra is put back too
    only_extra = Message(
        "user", "hi", extras=(("reasoning_content", json.dumps(f"token {SECRETS['github']}")),)
    )
    hidden = _redacted(only_extra, store)
    assert hidden.content == "hi" and SECRETS["github"] not in str(hidden.extras)
    assert unredact([hidden], store) == ([only_extra], [])


def test_compress_masks_extras_and_parts_and_expand_gives_them_back() -> None:
    original = _every_field_holds_a_credential()
    msgs = [Message("user", "go"), original, Message("tool", "done", tool_call_id="c1")]
    store = MemoryStore()
    result = ctxfold.compress(msgs, budget=100_000, redact=True, store=store)
    seen = json.dumps(result.to_openai(), ensure_ascii=False)
    assert not [k for k, v in SECRETS.items() if v in seen]
    assert ctxfold.expand(result.to_openai(), store=store).to_openai() == ctxfold.to_openai(msgs)


def test_a_forged_mark_in_an_extra_is_left_as_it_is() -> None:
    """Unredact still verifies: the original must mask to the message as it is."""
    store = MemoryStore(key=STORE_KEY)
    masked = _redacted(Message("user", f"key {SECRETS['github']}"), store)
    entry = SECRET_MARK.search(masked.text).group(1)
    forged = Message(
        "user", "hello", extras=(("reasoning_content", json.dumps(f"[secret {entry}]")),)
    )
    assert unredact([forged], store) == ([forged], [])


# ---------------------------------------------------------------- marks are keyed


def test_the_mark_is_keyed_so_a_guess_cannot_be_confirmed() -> None:
    """The reproducer: under a memory store the mark was the plain content id of the
    message, which anyone can compute for a guessed credential."""
    guess = Message("tool", f"OPENAI_API_KEY={SECRETS['openai']}", tool_call_id="c1")
    plain = entry_id(hashlib.sha256(encode(message_record(guess))).digest(), 12)
    store = MemoryStore()
    masked = _redacted(guess, store)
    entry = SECRET_MARK.search(masked.text).group(1)
    assert entry != plain and plain not in masked.text
    assert unredact([masked], store) == ([guess], [])  # stored under the keyed id
    assert SECRETS["openai"] in ctxfold.expand(entry, store=store)


def test_marks_depend_on_the_store_key_and_only_on_it() -> None:
    m = Message("user", f"use {SECRETS['anthropic']}")
    one, two = MemoryStore(key=b"a" * 32), MemoryStore(key=b"b" * 32)
    assert _redacted(m, one) != _redacted(m, two)
    assert _redacted(m, one) == _redacted(m, MemoryStore(key=b"a" * 32))
    msgs = _agent_run()
    runs = [
        ctxfold.compress(msgs, budget=700, redact=True, store=MemoryStore(key=k)).to_openai()
        for k in (b"a" * 32, b"a" * 32, b"b" * 32)
    ]
    assert runs[0] == runs[1] != runs[2]


def test_marks_in_a_persistent_store_are_keyed_by_its_key(tmp_path) -> None:
    m = Message("user", f"use {SECRETS['anthropic']}")
    first, second = SQLiteStore(tmp_path / "a.db"), SQLiteStore(tmp_path / "b.db")
    assert _redacted(m, first) != _redacted(m, second)
    masked = _redacted(m, first)
    assert unredact([masked], SQLiteStore(tmp_path / "a.db")) == ([m], [])
