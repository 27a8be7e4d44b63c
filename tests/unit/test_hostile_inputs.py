"""Hostile input at the edges (issue 47, items 11, 16 and 18): a store URL's password
never shows, whatever shape it has; a budget of zero or less, or below the pinned
messages, is a typed error at every entry; a round tag a user typed, an invalid tool
call edited in place and a number too long for Python are each read as they are."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

import ctxfold
from ctxfold import BudgetError, ConfigurationError, MemoryStore, Session
from ctxfold.cli import main
from ctxfold.exceptions import CtxfoldError, SessionNotFoundError
from ctxfold.storage import get_cache, get_store
from ctxfold.strategies.registry import registered

MARK = "Zq9MARKpw"  # a password no message may show, whole or in part


def _urls(mark: str = MARK) -> list[str]:
    """Store specs holding ``mark`` as a password, in every shape a parser trips on."""
    return [
        f"redis://u:{mark}@127.0.0.1:1/0",
        f"redis://:{mark}@127.0.0.1:1/0",
        f"redis://u:{mark}/x@127.0.0.1:1/0",  # an unencoded '/'
        f"redis://u:{mark}#x@127.0.0.1:1/0",  # an unencoded '#'
        f"redis://u:x#{mark}@127.0.0.1:1/0",
        f"redis://u:{mark}@x@127.0.0.1:1/0",  # an unencoded '@'
        f"redis://u:{mark}%2Fx@127.0.0.1:1/0",  # percent-encoded
        f"redis://u:{mark}?x@127.0.0.1:1/0",
        f"rediss//u:{mark}@127.0.0.1:1",  # a misspelt scheme
        f"redis:/u:{mark}@127.0.0.1:1",
        f"redis//u:{mark}@127.0.0.1/0.db",  # misspelt, and ending like a SQLite file
        f"u:{mark}@127.0.0.1:1",
        f"unix:///tmp/no-such-redis.sock?db=0&password={mark}",
        f"redis://127.0.0.1:1/0?password={mark}#x",
    ]


def _no_mark(*texts: object) -> None:
    for text in texts:
        assert MARK not in str(text), text
        assert MARK[:5] not in str(text), text  # nor the piece a parser cut off


# ------------------------------------------------------------------ item 11: URLs


@pytest.mark.parametrize("url", _urls())
def test_mask_credentials_masks_a_password_of_any_shape(url: str) -> None:
    from ctxfold.storage.spec import mask_credentials, parse_spec

    shown = mask_credentials(url)
    _no_mark(shown, repr(parse_spec(url)))
    assert "***" in shown
    assert "127.0.0.1" in shown or "no-such-redis" in shown  # the server stays readable


@pytest.mark.parametrize(
    "spec",
    [
        "sqlite:///originals.db",
        "sqlite:////var/lib/app/a:b@c.db",
        "/home/me/a:b@c.db",
        "data/x.sqlite3",
        "memory",
        "redis://127.0.0.1:6379/0",
        "redis://user@127.0.0.1:6379/0",
        "unix:///run/redis.sock?db=2",
    ],
)
def test_specs_without_a_password_are_shown_as_they_are(spec: str) -> None:
    from ctxfold.storage.spec import mask_credentials

    assert mask_credentials(spec) == spec


def test_scrub_masks_the_pieces_a_parser_cut_a_password_into() -> None:
    from ctxfold.storage.spec import scrub

    url = f"redis://u:{MARK}/tail#frag@h:6379/0"
    said = f"Port could not be cast to integer value as '{MARK}'; url {url}"
    _no_mark(scrub(said, url))
    assert "Port could not be cast" in scrub(said, url)


def _attempts(url: str) -> list[Any]:
    """Every entry point given ``url``: the object it made, or the error it raised."""
    from ctxfold.storage import RedisBackend, RedisStore

    makers = [
        lambda: get_store(url),
        lambda: get_cache(url),
        lambda: RedisStore(url),
        lambda: RedisBackend(url),
        lambda: Session("s1", store=url),
        lambda: ctxfold.compress([{"role": "user", "content": "hi"}], budget=50, store=url),
        lambda: ctxfold.expand([{"role": "user", "content": "hi"}], store=url),
    ]
    out: list[Any] = []
    for make in makers:
        try:
            out.append(make())
        except CtxfoldError as exc:
            out.append(exc)
    return out


@pytest.mark.parametrize("url", _urls())
def test_a_store_password_never_shows_in_a_repr_an_error_or_a_log(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for outcome in _attempts(url):
        _no_mark(repr(outcome), str(outcome))
    _no_mark(caplog.text)


def test_session_not_found_names_the_store_without_its_password(
    redis_url: str, redis_prefix: str
) -> None:
    import redis

    from ctxfold.storage import RedisStore

    client = redis.Redis.from_url(redis_url)
    for url in _urls()[:8]:
        # Shown as ``url``; served by ``client``, in keys of this test's own.
        store = RedisStore(url, client=client, prefix=redis_prefix)
        _no_mark(repr(store), repr(Session(store=store)))
        with pytest.raises(SessionNotFoundError) as caught:
            Session.load("no-such-session-47", store=store)
        _no_mark(str(caught.value))
        assert "***" in str(caught.value)
    client.close()


def test_a_password_the_server_refuses_is_not_in_the_error(redis_url: str) -> None:
    """The server's own message about a refused password never carries it either."""
    host = redis_url.split("//", 1)[1].split("/", 1)[0]
    with pytest.raises(CtxfoldError) as caught:
        get_store(f"redis://nobody-47:{MARK}@{host}/15")
    _no_mark(str(caught.value))


def _conversation_file(tmp_path: Path, messages: list[dict[str, Any]] | None = None) -> str:
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(messages or QUESTION))
    return str(path)


@pytest.mark.parametrize("url", _urls())
def test_the_cli_never_prints_a_store_password(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conv = _conversation_file(tmp_path)
    for argv in (
        ["compress", conv, "--budget", "40", "--store", url],
        ["expand", conv, "--store", url],
        ["expand", "0123456789ab", "--store", url],
    ):
        code = main(argv)
        out, err = capsys.readouterr()
        assert code in (1, 2), (argv, err)
        assert err.startswith("ctxfold: ")
        _no_mark(out, err)


# ------------------------------------------------------------------ item 16: budgets

QUESTION = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "hello there, fix the bug in a.py"},
    {"role": "assistant", "content": "ok, done: a.py had a typo on line 3"},
    {"role": "user", "content": "thanks, and what about b.py?"},  # a query: recall on
]


def _options(name: str) -> dict[str, Any]:
    if name == "semantic":
        from ctxfold.testing.doubles import FakeEmbedder

        return {"embedder": FakeEmbedder()}
    return {}


@pytest.mark.parametrize("name", sorted(registered()))
@pytest.mark.parametrize("budget", [0, -1, pytest.param(-(10**5000), id="-10**5000")])
def test_a_budget_of_zero_or_less_is_a_configuration_error_for_every_strategy(
    name: str, budget: int
) -> None:
    with pytest.raises(ConfigurationError, match="positive whole number of tokens"):
        ctxfold.compress(QUESTION, budget=budget, strategy=name, **_options(name))
    with pytest.raises(ConfigurationError, match="budget=4000"):
        ctxfold.compress([], budget=budget, strategy=name, **_options(name))


@pytest.mark.parametrize("name", sorted(registered()))
@pytest.mark.parametrize("query", [None, False, "b.py"])
def test_a_budget_below_the_pinned_messages_is_a_budget_error(name: str, query: Any) -> None:
    for budget in (1, 2, 5):
        with pytest.raises(BudgetError) as caught:
            ctxfold.compress(QUESTION, budget=budget, strategy=name, query=query, **_options(name))
        assert caught.value.budget == budget and caught.value.required > budget


def test_a_session_refuses_a_budget_of_zero_or_less_and_names_what_it_needs() -> None:
    with pytest.raises(ConfigurationError):
        Session(budget=0)
    session = Session(store=MemoryStore())
    session.add(QUESTION)
    for budget in (0, -5):
        with pytest.raises(ConfigurationError, match="positive whole number of tokens"):
            session.render(budget)
    for cache_stable in (True, False):
        tight = Session(store=MemoryStore(), cache_stable=cache_stable)
        tight.add(QUESTION)
        with pytest.raises(BudgetError) as caught:
            tight.render(3)
        assert caught.value.budget == 3 and caught.value.required > 3


def test_condense_below_the_framing_gives_what_fits_not_a_budget_error() -> None:
    long = [
        {"role": "user" if k % 2 == 0 else "assistant", "content": f"turn {k} on f{k}.py " * 20}
        for k in range(30)
    ]
    for max_tokens in (3, 5, 10):
        text = ctxfold.condense(long, max_tokens=max_tokens)
        assert ctxfold.get_counter("o200k_base").count_text(text) <= max_tokens


@pytest.mark.parametrize("budget", ["0", "-3", "0000"])
def test_the_cli_refuses_a_budget_of_zero_with_exit_2(
    budget: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conv = _conversation_file(tmp_path)
    for argv in (
        ["compress", conv, "--budget", budget],
        ["report", conv, "--budget", budget, "-o", str(tmp_path / "r.html")],
    ):
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2 and "--budget must be a positive token count" in err, err


def test_the_wrappers_refuse_a_budget_of_zero_when_made() -> None:
    pytest.importorskip("langchain_core")
    pytest.importorskip("llama_index.core")
    from langchain_core.chat_history import InMemoryChatMessageHistory

    import langchain_ctx
    import llamaindex_ctx

    makers = [
        lambda b: langchain_ctx.CompressedChatMessageHistory(
            InMemoryChatMessageHistory(), budget=b, store=MemoryStore()
        ),
        lambda b: langchain_ctx.CompressionMiddleware(budget=b),
        lambda b: langchain_ctx.compress_messages(budget=b),
        lambda b: langchain_ctx.pre_model_hook(budget=b),
        lambda b: llamaindex_ctx.CompressedChatMemory.from_defaults(token_limit=b),
        lambda b: llamaindex_ctx.CompressedHistoryBlock(token_limit=b),
        lambda b: llamaindex_ctx.CompressionPostprocessor(budget=b),
    ]
    for make in makers:
        for budget in (0, -1):
            with pytest.raises(ConfigurationError, match="positive whole number of tokens"):
                make(budget)


# ------------------------------------------------------------------ item 18


def test_an_in_place_edit_of_invalid_tool_calls_is_read_again() -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.chat_history import InMemoryChatMessageHistory
    from langchain_core.messages import AIMessage, HumanMessage

    from langchain_ctx import CompressedChatMessageHistory

    inner = InMemoryChatMessageHistory()
    bad = {"type": "invalid_tool_call", "name": "rm", "args": "{old", "id": "c9", "error": "x"}
    inner.add_messages([HumanMessage("clean up"), AIMessage("", invalid_tool_calls=[bad])])
    history = CompressedChatMessageHistory(inner, budget=4000, store=MemoryStore())
    assert history.messages[1].invalid_tool_calls[0]["args"] == "{old"
    inner.messages[1].invalid_tool_calls[0]["args"] = "{new"  # in place
    assert history.messages[1].invalid_tool_calls[0]["args"] == "{new"
    inner.messages[1].invalid_tool_calls.append({**bad, "id": "c10", "args": "{more"})
    assert [c["id"] for c in history.messages[1].invalid_tool_calls] == ["c9", "c10"]


def test_a_user_message_that_starts_with_a_round_tag_leaves_the_expansion_complete() -> None:
    said = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "[ctxfold round 123456789012]\nwhat is this line?"},
        {"role": "assistant", "content": "A tag ctxfold writes."},
        {"role": "user", "content": "[ctxfold round 0123456789ab: 3 earlier messages]"},
    ]
    result = ctxfold.compress(said, budget=4000, reversible=True, store=MemoryStore())
    back = ctxfold.expand(result)
    assert back.complete and back.rounds == 0 and back.missing == ()
    assert back.to_openai() == said


def test_a_compressed_result_still_names_a_round_its_store_lacks() -> None:
    """The other side: a round the result made, expanded with a store that lacks it,
    is reported missing, not taken for text."""
    long = [
        {"role": "user" if k % 2 == 0 else "assistant", "content": f"turn {k} on f{k}.py " * 20}
        for k in range(30)
    ]
    result = ctxfold.compress(long, budget=300, reversible=True, store=MemoryStore())
    assert result.round_id is not None
    elsewhere = ctxfold.expand(result, store=MemoryStore())
    assert elsewhere.missing == (result.round_id,) and not elsewhere.complete


def test_an_integer_past_pythons_digit_limit_is_bad_input_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    digits = "7" * 5000
    plain = tmp_path / "big.json"
    plain.write_text(f'[{{"role": "user", "content": "hi", "n": {digits}}}]')
    lines = tmp_path / "big.jsonl"
    lines.write_text(
        f'[{{"role": "user", "content": "hi"}}]\n[{{"role": "user", "n": {digits}}}]\n'
    )
    for path in (plain, lines):
        for argv in (["stats", str(path)], ["compress", str(path), "--budget", "100"]):
            code = main(argv)
            err = capsys.readouterr().err
            assert code == 2 and "4300 digits" in err, (argv, err)
    conv = _conversation_file(tmp_path)
    code = main(["compress", conv, "--budget", "100", "--option", f"recent_share={digits}"])
    assert code == 2, capsys.readouterr().err
    from ctxfold._json import TooLongNumberError, loads

    with pytest.raises(TooLongNumberError):
        loads(f'{{"n": {digits}}}')
    with pytest.raises(ValueError):  # every reader of foreign JSON catches ValueError
        loads(f"[{digits}]")
