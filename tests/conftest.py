"""Shared fixtures: the bundled example conversations and the shared real data."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import ctxfold.testing as ctxfold_testing
from ctxfold import Message, from_openai
from ctxfold.testing import find_data_dir

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "examples").glob("*.json"))
DATA_DIR = find_data_dir(REPO)
SKIP_NO_DATA = (
    "the shared conversations are not here: put them in ../shared/data beside the repo "
    "or set CTXFOLD_DATA_DIR"
)


if DATA_DIR is None and os.environ.get("CTXFOLD_REQUIRE_DATA"):
    raise RuntimeError(f"CTXFOLD_REQUIRE_DATA is set but {SKIP_NO_DATA}")


#: What :func:`long_chat` says once, long before its end.
LOCKER_FACT = "My gym locker is the blue one next to the sauna."


def long_chat(turns: int = 120) -> list[dict]:
    """A user and an assistant chatting (OpenAI dicts): the one fact, the user's gym
    locker by the sauna, said at turn 6, filler since; for recall tests."""
    return [
        {
            "role": "user" if k % 2 == 0 else "assistant",
            "content": LOCKER_FACT
            if k == 6
            else f"Turn {k}: we talked about the weather, films and bread again.",
        }
        for k in range(turns)
    ]


def example_records() -> list[dict]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in EXAMPLES]


def example_conversations() -> list[tuple[str, list[Message]]]:
    return [(r["id"], from_openai(r["messages"])) for r in example_records()]


def shared_conversations() -> list[tuple[str, list[Message]]]:
    """The shared conversations: a deterministic sample of each data set, or all of
    them with ``CTXFOLD_FULL_SWEEP=1`` (skips the test if the data is absent)."""
    if DATA_DIR is None:
        pytest.skip(SKIP_NO_DATA)
    return ctxfold_testing.shared_conversations(DATA_DIR)


def examples_and_shared(limit: int | None = None) -> list[tuple[str, list[Message]]]:
    """The bundled examples, then the shared conversations (the first ``limit``) when
    the data is here: for parametrizing at collection, where a skip would skip the
    whole module."""
    shared = shared_conversations() if DATA_DIR is not None else []
    return example_conversations() + shared[:limit]


def shared_records() -> list[dict]:
    """The records of :func:`shared_conversations`, as they are in the files."""
    keep = {conv_id for conv_id, _ in shared_conversations()}
    records = []
    for f in sorted(DATA_DIR.glob("*.jsonl")):  # type: ignore[union-attr]
        lines = f.read_text(encoding="utf-8").splitlines()
        records.extend(r for r in map(json.loads, lines) if str(r["id"]) in keep)
    return records


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The contract's sweep of real conversations is a full sweep too."""
    for item in items:
        if item.name == "test_contract_on_real_conversations":
            item.add_marker(pytest.mark.full_sweep)


@pytest.fixture(scope="session")
def examples() -> list[tuple[str, list[Message]]]:
    return example_conversations()


# ------------------------------------------------------------------------------ Redis

REDIS_URL = os.environ.get("CTXFOLD_REDIS_URL", "redis://127.0.0.1:6379/15")
REQUIRE_REDIS = os.environ.get("CTXFOLD_REQUIRE_REDIS") == "1"


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The URL of a live Redis server for the tests (``CTXFOLD_REDIS_URL``).

    Skips the test when no server answers there, unless ``CTXFOLD_REQUIRE_REDIS=1``,
    which turns that into a failure (CI starts a server and sets it).
    """
    try:
        import redis
    except ImportError:
        reason = "the redis package is not installed: pip install -e '.[dev]'"
        if REQUIRE_REDIS:
            pytest.fail(f"CTXFOLD_REQUIRE_REDIS=1 but {reason}")
        pytest.skip(reason)
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=5)
    try:
        client.ping()
    except redis.exceptions.RedisError as exc:
        reason = (
            f"no Redis server answers at {REDIS_URL} ({exc}); start one with "
            "`redis-server --port 6379 --bind 127.0.0.1 --daemonize yes` or set "
            "CTXFOLD_REDIS_URL"
        )
        if REQUIRE_REDIS:
            pytest.fail(f"CTXFOLD_REQUIRE_REDIS=1 but {reason}")
        pytest.skip(reason)
    finally:
        client.close()
    return REDIS_URL


@pytest.fixture
def redis_prefix(redis_url: str, request: pytest.FixtureRequest):
    """A key prefix unique to this test on the test Redis server; every key under it is
    deleted afterwards."""
    import uuid

    import redis

    prefix = f"ctxfold-test:{request.node.name[:40]}:{uuid.uuid4().hex[:12]}:"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    try:
        pattern = "".join("\\" + c if c in "*?[]\\" else c for c in prefix) + "*"
        keys = list(client.scan_iter(match=pattern, count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()
