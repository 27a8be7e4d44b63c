"""Credential-shaped values are never identifiers: not in a note's list, not in the
reference index; ordinary identifiers (commit hashes, UUIDs, order numbers) still are.
The values below are made up in the providers' formats (the AWS pair is AWS's own
documentation example)."""

from __future__ import annotations

import re
import time

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
        "primary ",
        "cache_",
        "next_page_",
        "&",
        "a1/b2/c.pdf",
    ]
)


_NAIVE_ASSIGNED = re.compile(
    r"""(?i)(?=(key|token|secret|passwd|password|pwd|credential)\b["']?\s*[:=]\s*["']?"""
    r"""([^\s"',;}\[\]()<>]{12,}))"""
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_PIECES, max_size=12).map("".join))
@example("cache_key=abc123def456&api_key=Xy9kLm3pQr8s7tZ")  # a secret after a locator
@example("primary key=a8F3kQ9zX2mP7vL1 token=a8F3kQ9zX2mP7vL1")
def test_every_value_assigned_to_a_credential_name_is_masked(text: str) -> None:
    """Every place a name stands with a value assigned (found by a naive, quadratic
    look at every position, names inside other values included) whose name and value
    make a secret lies inside one of the spans: one pass over the names misses none."""
    from ctxfold.text.secrets import _name_kind, assigned_secret, secret_spans

    spans = secret_spans(text)
    for m in _NAIVE_ASSIGNED.finditer(text):
        if assigned_secret(_name_kind(text, m.start(1), m.end(1)), m.group(2)):
            assert any(s <= m.start(2) and m.end(2) <= e for s, e, _ in spans), m.group(2)


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


# Issue 47 item 10. Made-up values in the providers' published formats (never real
# keys): ``(label, text, the credential in it)``.
_HEX32, _HEX64 = "9b2f4e1c7a3d8f60" * 2, "4e1c7a3d8f609b2f" * 4
_B62 = "Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9Ed8Cb7Aa6Bc5De4Fg3Hi2"
_PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq9xQp2f8kLm3nRt5vWz0yA1cE4gH6j\n"
    "-----END RSA PRIVATE KEY-----"
)
_PGP = (
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGYx2a0BCADk3mZ8pQ1rS5tU7vW3xY6z\n=Xy9k\n"
    "-----END PGP PRIVATE KEY BLOCK-----"
)
_SSH = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
    "-----END OPENSSH PRIVATE KEY-----"
)
# Rows whose text is a template have ``{}`` where the value stands.
CREDENTIALS: list[tuple[str, str, str]] = [
    ("openai project", "key {} in use", "sk-proj-4fJ9kL2mN8pQ1rS5tU7vW3xY6zA0bC2d"),
    ("openai legacy", "using sk-" + _B62[:48], "sk-" + _B62[:48]),
    ("anthropic", "x=sk-ant-api03-" + _B62, "sk-ant-api03-" + _B62),
    ("stripe live", "charge with {}", "sk_live_51HbQ2eLp8XvT3kWm9RzA7cYd"),
    ("stripe restricted", "{} ok", "rk_live_51HbQ2eLp8XvT3kWm9RzA7cYd"),
    ("stripe test", "{}", "sk_test_4eC39HqLyjWDarjtT1zdp7dc"),
    ("stripe webhook", "signing whsec_" + _B62[:32], "whsec_" + _B62[:32]),
    ("github classic", "push {}", "ghp_R8sT2uV4wX6yZ8aB0cD2eF4gH6iJ8kL0mN2o"),
    ("github oauth", "gho_" + _B62[:36], "gho_" + _B62[:36]),
    ("github user", "gh auth: ghu_" + _B62[:36], "ghu_" + _B62[:36]),
    ("github server", "ghs_" + _B62[:36] + " expires", "ghs_" + _B62[:36]),
    ("github refresh", "ghr_" + _B62[:36], "ghr_" + _B62[:36]),
    (
        "github fine-grained",
        "github_pat_11ABCDEFG0_" + _B62[:59],
        "github_pat_11ABCDEFG0_" + _B62[:59],
    ),
    ("gitlab", "CI uses {}", "glpat-Xy9kLm3pQr8s7tZ2wV4u"),
    ("slack bot", "{}", "xoxb-2048-4096-Tz7Qm3Wp9Lx2Rv5"),
    ("slack user", "{}", "xoxp-1234567890-0987654321-Tz7Qm3Wp9L"),
    ("slack app", "xapp-1-A0123BCDE-4567890123-" + _HEX32, "xapp-1-A0123BCDE-4567890123-" + _HEX32),
    ("aws access key", "id {}", "AKIAIOSFODNN7EXAMPLE"),
    ("aws session key", "{} was used", "ASIAJEXAMPLEXEG2JICE"),
    ("google api", "{}", "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"),
    ("google oauth secret", "GOCSPX-" + _B62[:28], "GOCSPX-" + _B62[:28]),
    ("google access token", "ya29.a0AfH6SMB" + _B62[:40], "ya29.a0AfH6SMB" + _B62[:40]),
    ("hugging face", "{}", "hf_kLmNoPqRsTuVwXyZaBcDeFgHiJkLmNoPqR"),
    ("npm", "//registry/:_authToken npm_" + _B62[:36], "npm_" + _B62[:36]),
    ("sendgrid", "{}", "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"),
    ("twilio", "api key SK" + _HEX32 + " created", "SK" + _HEX32),
    ("digitalocean", "doctl dop_v1_" + _HEX64, "dop_v1_" + _HEX64),
    ("shopify", "X-Shopify: shpat_" + _HEX32, "shpat_" + _HEX32),
    ("pypi", "password = pypi-AgEIcHlwaS5vcmc" + _B62, "pypi-AgEIcHlwaS5vcmc" + _B62),
    ("databricks", "host token dapi" + _HEX32, "dapi" + _HEX32),
    ("atlassian", "ATATT3xFfGF0" + _B62 + "=0A1B2C3D", "ATATT3xFfGF0" + _B62 + "=0A1B2C3D"),
    (
        "postman",
        "PMAK-" + _HEX32[:24] + "-" + _HEX32 + "ab",
        "PMAK-" + _HEX32[:24] + "-" + _HEX32 + "ab",
    ),
    ("vault", "VAULT hvs.CAESIJ" + _B62[:30], "hvs.CAESIJ" + _B62[:30]),
    ("sentry", "sntrys_" + _B62 + "Qx", "sntrys_" + _B62 + "Qx"),
    ("grafana", "glsa_" + _B62[:32] + "_" + _HEX32[:8], "glsa_" + _B62[:32] + "_" + _HEX32[:8]),
    ("linear", "lin_api_" + _B62[:40], "lin_api_" + _B62[:40]),
    ("square", "sq0atp-" + _B62[:22], "sq0atp-" + _B62[:22]),
    ("jwt", "session=" + SECRETS["jwt"], SECRETS["jwt"]),
    ("bearer", "Authorization: Bearer {}", "Qm9vdGNhbXAtVG9rZW4tOTg3NjU0MzIx"),
    ("basic auth", "curl -H 'Authorization: Basic {}' api", "dXNlcjpQNHNzdzByZDEyMw=="),
    (
        "basic auth json",
        '{"authorization": "Basic YWxhZGRpbjpvcGVuc2VzYW1l"}',
        "YWxhZGRpbjpvcGVuc2VzYW1l",
    ),
    ("url password", "postgres://admin:{}@db.internal:5432/app", "S3cr3tP4ssw0rd!x"),
    ("pem", "key:\n" + _PEM + "\nthen", _PEM),
    ("pgp", "exported:\n" + _PGP, _PGP),
    ("openssh", _SSH, _SSH),
    ("api key assigned", "API_KEY={}", "Xy9kLm3pQr8s7tZ"),
    ("secret key hex", "SECRET_KEY=" + _HEX64, _HEX64),
    ("client secret json", '{"client_secret": "a8F3kQ9zX2mP7vL1"}', "a8F3kQ9zX2mP7vL1"),
    ("password", "password: {}", "S3cr3tP4ssw0rd!x"),
    ("aws secret", "aws_secret_access_key = {}", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("api key uuid", "X-Api-Key: {}", "8e03978e-40d5-43e8-bc93-6894a57f9324"),
    ("bare token", "token: {}", "123e4567-e89b-12d3-a456-426614174000"),
    ("locator then secret", "s3 cache_key=abc123def456&api_key={}", "Xy9kLm3pQr8s7tZ"),
]
# ``(label, text, the ordinary identifier in it)``: never masked, and found as an
# identifier wherever one scan of the text finds it.
ORDINARY_IDS: list[tuple[str, str, str]] = [
    ("primary key uuid", "primary key: {}", "123e4567-e89b-12d3-a456-426614174000"),
    ("primary key sql", "PRIMARY KEY = {}", "550e8400-e29b-41d4-a716-446655440000"),
    ("sort key", "sort key: {}", "created_at#2024-05-01T10:00:00Z"),
    ("foreign key", "foreign key: {}", "orders_customer_id_fk_3f9a2b7c"),
    ("s3 object key", "S3 object key: {}", "uploads/2024/05/report-7f3a9c.pdf"),
    ("cache key commit", "cache_key={}", "9fceb02d0ae598e95dc970b74767f19372d61af8"),
    ("next page token", "next_page_token={}", "CiAKGjBpNDd2Nmp2Zml2cXRpYTMSAggBEgIIAQ"),
    (
        "page token json",
        '{"nextPageToken": "CjEKEHNvbWUtcGFnZS10b2tlbhId5"}',
        "CjEKEHNvbWUtcGFnZS10b2tlbhId5",
    ),
    ("aws next token", "NextToken: {}", "AAEAAc3Rvcm5leHQ9MjAyNC0wNS0wMQ2"),
    ("continuation token", "continuation_token={}", "1a2b3c4d5e6f7a8b9c0d"),
    ("pagination token", "pagination_token: {}", "20240501T100000Z-7f3a9c"),
    ("idempotency key", "Idempotency-Key: {}", "8e03978e-40d5-43e8-bc93-6894a57f9324"),
    ("idempotency key snake", "idempotency_key={}", "ord_2024_05_01_7f3a9c1b"),
    (
        "public key hex",
        "public_key: {}",
        "3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1b",
    ),
    ("partition key", "partition key = {}", "tenant-42/2024-05"),
    ("hash key", "hash key: {}", "user#8f14e45fceea167a5a36dedd4bea2543"),
    ("row key", "row key: {}", "20240501#device-7f3a9c"),
    ("dedup key", "dedup_key={}", "sha1:2fd4e1c67a2d28fced849ee1bb76e7391b93eb12"),
    ("translation key", "translation_key = {}", "errors.e4012.title"),
    ("sha256", "sha256: {}", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    ("commit", "commit {} (HEAD)", "9fceb02d0ae598e95dc970b74767f19372d61af8"),
    ("md5", "md5 {}  dist.tar.gz", "d41d8cd98f00b204e9800998ecf8427e"),
    ("request id", "request_id={}", "123e4567-e89b-12d3-a456-426614174000"),
    ("wheel path", "{}", "/home/dev/.cache/pip/wheels/ab/cd/ef0123456789abcdef.whl"),
    ("source path", "see {}", "./src/ctxfold/text/secrets.py:42"),
    ("object path", "uploaded {}", "uploads/2024/05/report-7f3a9c.pdf"),
    ("order number", "order {} shipped", "ORDER-2024-000123"),
    ("flight", "FLIGHT={} RESERVATION=ZFA04Y", "HAT039"),
    ("config", "CONFIG={}", "deploy/release_4.yaml"),
    ("i18n key", "i18n key: {}", "checkout.payment.card_declined_2"),
    ("ssh key path", "ssh key: {}", "~/.ssh/id_ed25519"),
    ("tls key path", "ssl key: {}", "/etc/ssl/private/server-2024.key"),
    ("key file", "KEY_FILE={}", "/etc/ssl/private/server-2024.key"),
    ("placeholder", '"api_key": "{}"', "YOUR_API_KEY"),
    ("max tokens", "{}=4000", "max_tokens"),
    ("task word", "ask the task runner: disk check {}", "SKIPPED_7"),
    ("etag", 'ETag: "{}"', "33a64df551425fcc55e4d42a148795d9f25f89d4"),
]


CREDENTIALS = [(label, text.replace("{}", value), value) for label, text, value in CREDENTIALS]
ORDINARY_IDS = [(label, text.replace("{}", value), value) for label, text, value in ORDINARY_IDS]


def test_the_tables_are_large_enough() -> None:
    assert len(CREDENTIALS) >= 30 and len(ORDINARY_IDS) >= 30
    assert len({label for label, _, _ in CREDENTIALS + ORDINARY_IDS}) == len(CREDENTIALS) + len(
        ORDINARY_IDS
    )


@pytest.mark.parametrize(("label", "text", "secret"), CREDENTIALS, ids=[c[0] for c in CREDENTIALS])
def test_a_credential_is_masked_and_never_an_identifier(label: str, text: str, secret: str) -> None:
    from ctxfold.text.secrets import secret_spans

    assert secret in text, label
    at = text.index(secret)
    assert is_secret(text)
    assert any(s <= at and at + len(secret) <= e for s, e, _ in secret_spans(text)), label
    assert secret not in mask(text)
    for kind, value, start, end in find_identifiers(text):
        assert end <= at or start >= at + len(secret), (label, kind, value)


@pytest.mark.parametrize(("label", "text", "value"), ORDINARY_IDS, ids=[c[0] for c in ORDINARY_IDS])
def test_an_ordinary_identifier_is_never_masked(label: str, text: str, value: str) -> None:
    from ctxfold.text.primitives import _scan

    assert value in text, label
    assert not is_secret(text), label
    assert mask(text) == text
    scanned = {v for _, v, _, _ in _scan(text)}
    assert scanned <= {v for _, v, _, _ in find_identifiers(text)}, label


def test_compress_of_a_hostile_tool_result_takes_linear_time() -> None:
    """Issue 47 item 5: one 20 KB tool result of ``a-`` runs and an assignment took
    26 s to compress; at 100 KB it must take well under a second or two."""
    tail = " api_key=abcdefghijkl1234"
    result = "a-" * 50_000 + tail
    msgs = [
        {"role": "user", "content": "Read the log."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": result},
        {"role": "user", "content": "Summarise it."},
    ]
    start = time.perf_counter()
    ctxfold.compress(msgs, budget=2_000)
    assert time.perf_counter() - start < 5.0
