"""Shared fixtures: the bundled example conversations and the shared real data."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ctxfold import Message, from_openai
from ctxfold.testing import find_data_dir, load_conversations

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "examples").glob("*.json"))
DATA_DIR = find_data_dir(REPO)
SKIP_NO_DATA = (
    "the shared conversations are not here: put them in ../shared/data beside the repo "
    "or set CTXFOLD_DATA_DIR"
)


if DATA_DIR is None and os.environ.get("CTXFOLD_REQUIRE_DATA"):
    raise RuntimeError(f"CTXFOLD_REQUIRE_DATA is set but {SKIP_NO_DATA}")


def example_records() -> list[dict]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in EXAMPLES]


def example_conversations() -> list[tuple[str, list[Message]]]:
    return [(r["id"], from_openai(r["messages"])) for r in example_records()]


def shared_records() -> list[dict]:
    """Every record of every JSONL file in the shared data (skips the test if absent)."""
    if DATA_DIR is None:
        pytest.skip(SKIP_NO_DATA)
    records = []
    for f in sorted(DATA_DIR.glob("*.jsonl")):
        records.extend(json.loads(line) for line in f.read_text(encoding="utf-8").splitlines())
    return records


def shared_conversations() -> list[tuple[str, list[Message]]]:
    if DATA_DIR is None:
        pytest.skip(SKIP_NO_DATA)
    out = []
    for f in sorted(DATA_DIR.glob("*.jsonl")):
        out.extend(load_conversations(f))
    return out


@pytest.fixture(scope="session")
def examples() -> list[tuple[str, list[Message]]]:
    return example_conversations()
