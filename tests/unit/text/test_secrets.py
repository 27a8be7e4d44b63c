"""Credential-shaped values are never identifiers: not in a note's list, not in the
reference index; ordinary identifiers (commit hashes, UUIDs, order numbers) still are.
The values below are made up in the providers' formats (the AWS pair is AWS's own
documentation example)."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import ctxfold
from ctxfold.references.index import ReferenceIndex
from ctxfold.text.primitives import find_identifiers
from ctxfold.text.secrets import is_secret, mask
from tests.unit.text.test_primitives import _one_scan

SECRETS = {
    "openai": "sk-proj-4fJ9kL2mN8pQ1rS5tU7vW3xY6zA0bC2dE4fG6hI8jK0lM2nO",
    "anthropic": "sk-ant-api03-Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9Ed8Cb7Aa6",
    "aws_key": "AKIAIOSFODNN7EXAMPLE",
    "aws_secret": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "github": "ghp_R8sT2uV4wX6yZ8aB0cD2eF4gH6iJ8kL0mN2o",
    "slack": "xoxb-2048-4096-Tz7Qm3Wp9Lx2Rv5",
    "stripe": "sk_live_51HbQ2eLp8XvT3kWm9RzA7cYd",
    "jwt": (
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
    ),
    "bearer": "Qm9vdGNhbXAtVG9rZW4tOTg3NjU0MzIx",
    "db_password": "S3cr3tP4ssw0rd!x",
}
ENV_OUTPUT = f"""OPENAI_API_KEY={SECRETS["openai"]}
ANTHROPIC_API_KEY={SECRETS["anthropic"]}
AWS_ACCESS_KEY_ID={SECRETS["aws_key"]}
AWS_SECRET_ACCESS_KEY={SECRETS["aws_secret"]}
GITHUB_TOKEN={SECRETS["github"]}
SLACK_BOT_TOKEN={SECRETS["slack"]}
STRIPE_KEY={SECRETS["stripe"]}
DATABASE_URL=postgres://admin:{SECRETS["db_password"]}@db.internal:5432/app
curl -H "Authorization: Bearer {SECRETS["bearer"]}" https://api.example.com/v1/orders
session={SECRETS["jwt"]}
-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEA7bq9xQp2f8kLm3nRt5vWz0yA1cE4gH6jK8mN0pQ2sT4uV6wX
-----END RSA PRIVATE KEY-----
HOME=/home/dev
DEPLOY_COMMIT=9fceb02d0ae598e95dc970b74767f19372d61af8
REQUEST_ID=123e4567-e89b-12d3-a456-426614174000
RESERVATION=ZFA04Y FLIGHT=HAT039 CONFIG=deploy/release_4.yaml"""
ORDINARY = [
    "9fceb02d0ae598e95dc970b74767f19372d61af8",
    "123e4567-e89b-12d3-a456-426614174000",
    "ZFA04Y",
    "HAT039",
    "deploy/release_4.yaml",
]


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_each_credential_format_is_recognised_in_its_setting(kind: str) -> None:
    line = next(x for x in ENV_OUTPUT.splitlines() if SECRETS[kind] in x)
    assert is_secret(line), line
    assert SECRETS[kind] not in mask(line)


def test_ordinary_identifiers_are_not_secrets() -> None:
    for value in [*ORDINARY, "max_tokens=4000", '"api_key": "YOUR_API_KEY"', "password reset"]:
        assert not is_secret(value), value
    found = {v for _, v, _, _ in find_identifiers(ENV_OUTPUT)}
    assert set(ORDINARY) <= found


def test_no_credential_is_an_identifier_a_note_or_a_reference() -> None:
    """The reproducer: an ``env`` output folded into a note (auto lists identifiers)
    and into a reversible round's reference block (sliding_window), with the index
    of references built over it."""
    msgs = [
        {"role": "system", "content": "You are a deployment agent."},
        {"role": "user", "content": "Deploy release 4; check the environment first."},
        {
            "role": "assistant",
            "content": "Reading the environment.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "env"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": ENV_OUTPUT},
        *[
            {"role": r, "content": f"Step {k}: deploying release 4 to region {k}, all green. " * 4}
            for k in range(12)
            for r in ("user", "assistant")
        ],
    ]
    found = {v for _, v, _, _ in find_identifiers(ENV_OUTPUT)}
    index = ReferenceIndex.from_messages(ctxfold.from_openai(msgs))
    held = "\n".join(f"{r.value} {r.context}" for r in index)
    for strategy in ("auto", "sliding_window"):
        out = ctxfold.compress(msgs, budget=500, strategy=strategy, reversible=True)
        for value in SECRETS.values():
            assert value not in found
            assert value not in held
            note = next(m.text for m in out.messages if m.text.startswith("[ctxfold"))
            listed = note.split("Also mentioned:", 1)[-1] if "Also mentioned:" in note else note
            assert value not in listed, (strategy, value)
    assert set(ORDINARY) & found == set(ORDINARY)


_PIECES = st.sampled_from(
    [
        "api_key",
        "KEY",
        "-token",
        "Password",
        "passwd",
        "pwd",
        "my_secret",
        "credential",
        "=",
        ":",
        " ",
        "\n",
        "'",
        '"',
        "a8F3kQ9zX2mP7vL1",
        "value",
        "-",
        "x",
        "é",
        "monkey",
    ]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_PIECES, max_size=12).map("".join))
def test_values_assigned_to_secret_names_are_all_found(text: str) -> None:
    """The quick look at the names' places finds every value the full pattern does."""
    from ctxfold.text.secrets import _ASSIGNED, _random_enough, secret_spans

    full = [
        (m.start("value"), m.end("value"))
        for m in _ASSIGNED.finditer(text)
        if _random_enough(m.group("value"))
    ]
    found = [(s, e) for s, e, kind in secret_spans(text) if kind == "assigned"]
    assert found == sorted(full)


# Whole credentials, their markers and parts of them, with any whitespace between.
_MARKED_PIECES = st.sampled_from(
    [
        *SECRETS.values(),
        "Bearer",
        "bearer ",
        "BEGIN RSA PRIVATE",
        "PRIVATE KEY-----",
        "postgres://u:",
        "@host",
        "api_",
        "KEY=",
        "\u212aey=",  # KELVIN SIGN: lower-cases to an ASCII "k"
        "\u0130",  # lower-cases to two characters: places shift
        "token",
        "sk-",
        "ghp_",
        "AKIA",
        "eyJ",
        "x",
        "0",
        " ",
        "\n",
        "\u00a0",
        "\u2028",
        "\t",
    ]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_MARKED_PIECES, max_size=10).map("".join))
@example(f"Authorization: Bearer {SECRETS['bearer']}")  # a marker holding a space
@example("\u0130" * 6 + " x token y z")  # lower-cased words longer than the words
def test_a_text_no_word_of_which_is_marked_holds_no_secret(text: str) -> None:
    """find_identifiers asks secret_spans only of texts holding a marked word: the
    others must hold no credential. A word is marked when it holds a marker's part,
    whatever the words beside it."""
    from ctxfold.text.secrets import _WORD_MARKERS, marked, secret_spans

    words = text.split()
    flags = marked(words)
    assert flags == [any(m in w.lower() for m in _WORD_MARKERS) for w in words]
    if not any(flags):
        assert secret_spans(text) == ()


@settings(max_examples=300, deadline=None)
@given(st.lists(_MARKED_PIECES, max_size=10).map("".join))
def test_identifiers_beside_credentials_are_what_one_scan_leaves(text: str) -> None:
    """Words looked up once, secrets asked for only where a word is marked: the
    identifiers are those one scan of the text finds outside its credentials."""
    from ctxfold import clear_caches

    expected = _one_scan(text)
    for _ in range(2):  # words made, then words found
        assert list(find_identifiers(text)) == expected
    clear_caches()
