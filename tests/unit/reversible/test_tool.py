"""The expand tool: what the model calls to read what a reversible round folded."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxfold
from conftest import example_conversations
from ctxfold import MemoryStore, Message, ToolCall, get_counter
from ctxfold.reversible.redaction import SECRET_MARK
from ctxfold.storage import SQLiteStore

COUNTER = get_counter("o200k_base")
MARKER = re.compile(r"\[expand ([0-9a-f]{10,64})\]")


@pytest.fixture(scope="module")
def folded():
    """A coding-agent history compressed reversibly: (originals, result, store)."""
    msgs = next(m for name, m in example_conversations() if "sqlfluff" in name)
    store = MemoryStore()
    result = ctxfold.AutoCompressor(reversible=True, store=store).compress(
        msgs, budget=3000, counter=COUNTER
    )
    assert result.round_id is not None
    return msgs, result, store


def test_the_round_id_gives_back_every_message_the_round_hid(folded):
    msgs, result, store = folded
    tool = ctxfold.expand_tool(store, max_tokens=200_000)
    text = tool(result.round_id)
    hidden = [msgs[d.index] for d in result.trace if d.tokens_after == 0]
    assert hidden and all(m.text[:300] in text for m in hidden)
    shown = [msgs[d.index] for d in result.trace if d.action == "kept"]
    assert not any(m.text[:300] in text for m in shown if len(m.text) > 50)


def test_a_marker_gives_back_its_message_and_ids_may_come_as_written():
    msgs = next(m for name, m in example_conversations() if "sqlfluff" in name)
    call = ToolCall("big", "bash", '{"command": "pytest -q"}')
    log = "\n".join(f"tests/test_rule_{k}.py::test_case PASSED" for k in range(600))
    msgs = [
        *msgs,
        Message("assistant", None, tool_calls=(call,)),
        Message("tool", log, tool_call_id="big"),
    ]
    store = MemoryStore()
    result = ctxfold.AutoCompressor(reversible=True, store=store).compress(
        msgs, budget=5000, counter=COUNTER
    )
    rewritten = [d.index for d in result.trace if d.action == "compressed"]
    assert rewritten, "at this budget the newest result is shortened in place"
    tool = ctxfold.expand_tool(store, max_tokens=10_000)  # the whole result on a page
    marked = [m for m in result.messages if m.role == msgs[rewritten[0]].role]
    entry = next(MARKER.search(m.text).group(1) for m in marked if MARKER.search(m.text))
    original = tool(entry)
    assert original == tool(f"[expand {entry}]")  # the marker as the model saw it
    assert msgs[rewritten[0]].text in original


def test_long_results_come_in_pages_that_rebuild_the_text(folded):
    _, result, store = folded
    tool = ctxfold.expand_tool(store, max_tokens=300)
    whole = ctxfold.expand(result.round_id, store=store)
    assert COUNTER.count_text(whole) > 1000
    pages = []
    page = 1
    while True:
        text = tool(result.round_id, page)
        body, footer = text.rsplit("[page ", 1)
        assert footer.startswith(f"{page} of ")
        pages.append(body)
        assert COUNTER.count_text(body) <= 300
        if "for more" not in footer:
            break
        assert f"page={page + 1}" in footer
        page += 1
    assert len(pages) > 3
    assert "".join("".join(pages).split()) == "".join(whole.split())  # nothing lost
    assert "ask for one from 1 to" in tool(result.round_id, page + 1)


def test_one_enormous_line_is_cut_to_fit_a_page():
    store = MemoryStore()
    line = " ".join(f"token{k}" for k in range(4000))  # one line, ~8000 tokens
    msgs = [ctxfold.Message("system", "s"), ctxfold.Message("user", line)]
    msgs += [ctxfold.Message("assistant", "ok"), ctxfold.Message("user", "next")]
    result = ctxfold.SlidingWindow(reversible=True, store=store).compress(msgs, budget=60)
    tool = ctxfold.expand_tool(store, max_tokens=500)
    first = tool(result.round_id)
    assert COUNTER.count_text(first.rsplit("[page ", 1)[0]) <= 500
    assert "token0 token1" in first


def test_bad_calls_come_back_as_advice_not_exceptions(folded):
    _, result, store = folded
    tool = ctxfold.expand_tool(store)
    assert "nothing is stored under '0123456789'" in tool("0123456789")
    assert "Pass the id" in tool("  ")
    assert "whole number" in tool(result.round_id, 0)
    assert "whole number" in tool(result.round_id, "2")  # type: ignore[arg-type]
    with pytest.raises(ctxfold.ConfigurationError, match="max_tokens"):
        ctxfold.expand_tool(store, max_tokens=10)
    with pytest.raises(ctxfold.ConfigurationError, match="name"):
        ctxfold.expand_tool(store, name=" ")


def test_an_answer_is_within_max_tokens_whatever_the_call_holds(folded):
    """A flood in the id, the page or the arguments is never echoed back whole."""
    _, result, store = folded
    tool = ctxfold.expand_tool(store, max_tokens=100)
    floods = [
        tool("9" * 1_000_000),
        tool("[expand " + "x" * 500 + "]"),
        tool(result.round_id, -(10**5000)),
        tool.answer({"id": "c1", "function": {"arguments": "[" + "1," * 100_000 + "1]"}}).text,
        tool.answer(ToolCall("c2", "expand", json.dumps({"id": "7" * 300_000}))).text,
    ]
    for text in floods:
        assert COUNTER.count_text(text) <= 100, text[:200]
    assert "is no id" in floods[0]
    assert COUNTER.count_text(tool(result.round_id)) <= 100  # a page fits too


def test_definitions_for_the_chat_apis_and_answers_to_tool_calls(folded):
    _, result, store = folded
    tool = ctxfold.expand_tool(store)
    spec = tool.to_openai()
    assert spec["type"] == "function" and spec["function"]["name"] == "expand"
    assert spec["function"]["parameters"]["required"] == ["id"]
    assert "[expand <id>]" in spec["function"]["description"]
    assert tool.to_anthropic()["input_schema"] == tool.parameters
    call = {
        "id": "call_7",
        "type": "function",
        "function": {"name": "expand", "arguments": json.dumps({"id": result.round_id})},
    }
    reply = tool.answer(call)
    assert reply.role == "tool" and reply.tool_call_id == "call_7"
    assert reply.text == tool(result.round_id)
    again = tool.answer(ToolCall("call_8", "expand", json.dumps({"id": result.round_id})))
    assert again.tool_call_id == "call_8" and again.text == reply.text
    broken = tool.answer(ToolCall("call_9", "expand", "{not json"))
    assert "JSON object" in broken.text
    assert asyncio.run(tool.acall(result.round_id)) == reply.text


def test_the_default_store_is_the_one_compressors_use_by_default():
    msgs = next(m for name, m in example_conversations() if "sqlfluff" in name)
    result = ctxfold.AutoCompressor(reversible=True).compress(msgs, budget=3000)
    assert "Rule L060" in ctxfold.expand_tool()(result.round_id, 1)


def test_langchain_tool_answers_a_tool_call(folded):
    from langchain_core.messages import ToolMessage
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from langchain_ctx import expand_tool

    _, result, store = folded
    tool = expand_tool(store)
    schema = convert_to_openai_tool(tool)["function"]
    assert schema["name"] == "expand" and schema["parameters"]["required"] == ["id"]
    out = tool.invoke(
        {"type": "tool_call", "id": "c1", "name": "expand", "args": {"id": result.round_id}}
    )
    assert isinstance(out, ToolMessage) and out.tool_call_id == "c1"
    assert out.content == ctxfold.expand_tool(store)(result.round_id)
    later = asyncio.run(tool.ainvoke({"id": result.round_id, "page": 1}))
    assert later == out.content


def test_llamaindex_tool_answers_a_call(folded):
    from llamaindex_ctx import expand_tool

    _, result, store = folded
    tool = expand_tool(store)
    params = tool.metadata.get_parameters_dict()
    assert params["required"] == ["id"] and "page" in params["properties"]
    assert tool.metadata.name == "expand"
    out = tool.call(id=result.round_id)
    assert out.content == ctxfold.expand_tool(store)(result.round_id)
    assert asyncio.run(tool.acall(id=result.round_id, page=1)).content == out.content


# ----------------------------------------------- answers bounded whatever they are

_FLOODS = st.sampled_from(
    ["😀" * 1000, "東京" * 20_000, "x" * 100_000, "[" * 5000 + "]" * 5000, "\x00\u2028\ud800" * 300]
)
_IDS = st.one_of(
    st.text(max_size=300),
    _FLOODS,
    st.integers(min_value=-(10**4000), max_value=10**4000),
    st.floats(allow_nan=True),
    st.none(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.just("[expand " + "😀" * 150 + "]"),
    st.just("9" * 64),
    st.just("🔑" * 200),
)
_ARGUMENTS = st.one_of(
    st.fixed_dictionaries({"id": _IDS}).map(json.dumps),
    st.fixed_dictionaries({"id": _IDS, "page": _IDS}).map(json.dumps),
    _FLOODS,
    st.text(max_size=200),
    st.integers(min_value=1, max_value=200).map(lambda n: '{"id": ' * n + "1" + "}" * n),
)
_CALLS = st.one_of(
    st.builds(lambda a: ToolCall("c1", "expand", a), _ARGUMENTS),
    st.builds(lambda a: {"id": "c1", "function": {"arguments": a}}, _ARGUMENTS),
    st.builds(lambda i, f: {"id": i, "function": f}, _IDS, st.one_of(_IDS, _ARGUMENTS)),
)


@settings(max_examples=150, deadline=None)
@given(_CALLS, st.sampled_from(["o200k_base", "cl100k_base", "len"]))
def test_every_answer_fits_max_tokens_counted_with_the_tools_counter(folded, call, counter):
    """Emoji, CJK, 100 KB strings, deeply nested JSON, ids and pages of every shape,
    calls of any shape: never an exception, never over ``max_tokens``."""
    _, _, store = folded
    tool = ctxfold.expand_tool(store, max_tokens=64, counter=len if counter == "len" else counter)
    reply = tool.answer(call)
    assert reply.role == "tool" and tool.counter.count_text(reply.text) <= 64, reply.text[:200]


def test_an_answer_to_a_flood_of_emoji_fits():
    """The reproducer: 1,000 emoji as arguments were answered with 93 tokens at
    max_tokens=64 (the echo of the arguments was cut at 80 characters, not tokens,
    and that answer never went through the bound)."""
    tool = ctxfold.expand_tool(MemoryStore(), max_tokens=64)
    for call in (
        ToolCall("c1", "expand", "😀" * 1000),
        {"id": "c1", "function": {"arguments": "😀" * 1000}},
    ):
        text = tool.answer(call).text
        assert COUNTER.count_text(text) <= 64 and "JSON object" in text


# ------------------------------------------------- redacting by default, wrappers


def _redacted_history(store):
    """A history compressed with ``redact=True`` into ``store``: the ids in its marks,
    and the credentials it held."""
    secret, escaped = "sk-proj-4fJ9kL2mN8pQ1rS5tU7vW3xY6zA0bC2dE4fG6hI8jK0lM2nO", "Xy9kLm3pQr8s7tZ"
    call = ToolCall("c1", "bash", json.dumps({"command": f'export API_KEY="{escaped}"'}))
    msgs = [
        Message("user", "Set up the deploy."),
        Message("assistant", None, tool_calls=(call,)),
        Message("tool", f"OPENAI_API_KEY={secret}", tool_call_id="c1"),
    ]
    result = ctxfold.compress(msgs, budget=100_000, redact=True, store=store)
    seen = json.dumps(result.to_openai())
    ids = re.findall(r"\[secret (\d+)\]", seen)
    assert len(set(ids)) == 2 and secret not in seen and escaped not in seen
    return sorted(set(ids)), (secret, escaped)


def _leaks(answer: str, secrets: tuple[str, ...]) -> list[str]:
    return [s for s in secrets if s in answer]


def test_the_expand_tool_masks_by_default_where_originals_were_redacted():
    """The reproducer: the tool defaulted to ``redact=False``, so the id in a
    ``[secret N]`` mark gave the model the raw key. A credential inside a JSON
    argument's escapes (``API_KEY=\\"...\\"``) is masked too."""
    store = MemoryStore()
    assert not ctxfold.expand_tool(store).redacts()  # nothing redacted yet
    ids, secrets = _redacted_history(store)
    tool = ctxfold.expand_tool(store)
    assert tool.redact is None and tool.redacts()
    for entry in ids:
        answer = tool(entry)
        assert "[secret]" in answer and not _leaks(answer, secrets), answer
    opted_out = ctxfold.expand_tool(store, redact=False)  # documented: shows them
    assert set(secrets) <= {s for e in ids for s in secrets if s in opted_out(e)}
    with pytest.raises(ctxfold.ConfigurationError, match="redact"):
        ctxfold.expand_tool(store, redact="yes")


def test_a_tool_made_before_the_first_redaction_masks_after_it(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    tool = ctxfold.expand_tool(store)
    assert not tool.redacts()
    ids, secrets = _redacted_history(store)
    assert not [e for e in ids if _leaks(tool(e), secrets)]
    reopened = ctxfold.expand_tool(SQLiteStore(tmp_path / "s.db"))  # the store says so
    assert not [e for e in ids if _leaks(reopened(e), secrets)]


def test_a_session_in_a_namespace_marks_the_store_it_lies_in():
    store = MemoryStore()
    session = ctxfold.Session("s1", budget=100_000, store=store, redact=True)
    session.add([Message("user", "GITHUB_TOKEN=ghp_R8sT2uV4wX6yZ8aB0cD2eF4gH6iJ8kL0mN2o")])
    assert ctxfold.expand_tool(store).redacts()


def test_the_langchain_tool_masks_by_default():
    from langchain_ctx import expand_tool

    store = MemoryStore()
    ids, secrets = _redacted_history(store)
    tool = expand_tool(store)
    for entry in ids:
        answer = tool.invoke({"id": entry})
        assert not _leaks(answer, secrets) and "[secret]" in answer
        later = asyncio.run(tool.ainvoke({"id": entry}))
        assert later == answer
    assert _leaks(expand_tool(store, redact=False).invoke({"id": ids[0]}), secrets)


def test_the_llamaindex_tool_masks_by_default():
    from llamaindex_ctx import expand_tool

    store = MemoryStore()
    ids, secrets = _redacted_history(store)
    tool = expand_tool(store)
    for entry in ids:
        answer = tool.call(id=entry).content
        assert not _leaks(answer, secrets) and "[secret]" in answer
        assert asyncio.run(tool.acall(id=entry)).content == answer
    assert _leaks(expand_tool(store, redact=False).call(id=ids[0]).content, secrets)


def test_a_session_reopened_without_redact_still_masks_its_tools_answers():
    """Redaction is a property of what the store holds, not only of the session object:
    a session reopened with the default ``redact=False`` over originals an earlier
    ``redact=True`` stored must not hand its model the raw credential."""
    store = MemoryStore()
    secret = "ghp_R8sT2uV4wX6yZ8aB0cD2eF4gH6iJ8kL0mN2o"
    first = ctxfold.Session("s1", budget=100_000, store=store, redact=True)
    first.add([Message("user", f"GITHUB_TOKEN={secret}")])
    view = first.render()
    entry = SECRET_MARK.search(view.messages[-1].text)
    assert entry is not None
    reopened = ctxfold.Session.load("s1", store=store)
    assert not reopened.redact
    answer = reopened.expand_tool()(entry.group(1))
    assert secret not in answer and "[secret]" in answer


# ------------------------------------------------------------------ search


@pytest.fixture(scope="module")
def searched():
    """A session over the coding run, compacted at 2,500 tokens: (session, its tool)."""
    msgs = next(m for name, m in example_conversations() if "sqlfluff" in name)
    session = ctxfold.Session(budget=2500, counter=COUNTER)
    session.add(msgs)
    shown = "\n".join(m.text for m in session.render().messages)
    assert "ModuleNotFoundError" not in shown  # folded away from the model's view
    return session, session.expand_tool(max_tokens=400)


def test_a_search_finds_a_folded_passage_and_its_marker_opens_the_original(searched):
    session, tool = searched
    assert "query" in tool.parameters["properties"] and "required" not in tool.parameters
    assert "query=" in tool.description
    answer = tool(query="ModuleNotFoundError sqlfluff")
    assert "ModuleNotFoundError: No module named 'sqlfluff'" in answer
    assert COUNTER.count_text(answer) <= 400
    assert answer == session.search("ModuleNotFoundError sqlfluff", 400)
    opened = tool(MARKER.search(answer).group(1))  # a message shown in part, whole
    assert len(opened) > 200 and "[expand" not in opened.splitlines()[0]
    call = {"id": "c9", "function": {"name": "expand", "arguments": '{"query": "L060 rule"}'}}
    assert "L060" in tool.answer(call).text


@pytest.mark.parametrize(
    "query",
    ["zeppelin hangar", "\U0001f600" * 100_000, "x" * 100_000, "a " * 50_000, 7, None],
)
def test_a_search_that_finds_nothing_or_is_no_text_comes_back_as_advice(searched, query):
    _, tool = searched
    answer = tool(query=query)
    assert COUNTER.count_text(answer) <= 400
    if isinstance(query, str) and query.strip():
        assert "Nothing in the conversation matches" in answer or "[ctxfold recall" in answer
    else:
        assert "Pass an id" in answer or "query must be words" in answer


def test_a_tool_over_a_store_does_not_search_it():
    # a store may hold other users' rounds: only a conversation's own history is searched
    tool = ctxfold.expand_tool(MemoryStore())
    assert tool.parameters["required"] == ["id"] and "query" not in tool.parameters["properties"]
    assert "Pass the id" in tool(query="anything")
    assert not ctxfold.Session(budget=500).expand_tool(search=False).searches


def test_session_search_checks_its_arguments():
    session = ctxfold.Session(budget=500)
    with pytest.raises(ctxfold.ConfigurationError, match="query"):
        session.search(7)  # type: ignore[arg-type]
    with pytest.raises(ctxfold.ConfigurationError, match="max_tokens"):
        session.search("x", 0)
    assert session.search("anything") == ""


def test_a_search_of_a_redacting_session_masks_credentials():
    secret = "sk-proj-4fJ9kL2mN8pQ1rS5tU7vW3xY6zA0bC2dE4fG6hI8jK0lM2nO"
    session = ctxfold.Session(budget=300, redact=True)
    session.add([Message("user", f"Deploy key for staging: OPENAI_API_KEY={secret}")])
    session.add([Message("assistant", "Stored. " + "Deployment notes follow. " * 60)] * 3)
    answer = session.expand_tool()(query="deploy key staging")
    assert "staging" in answer and secret not in answer
