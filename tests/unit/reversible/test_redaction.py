"""``redact=True``: no credential reaches the model, the store keeps every original,
and ``expand`` gives the history back exactly."""

from __future__ import annotations

import json

import ctxfold
from ctxfold import MemoryStore
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
