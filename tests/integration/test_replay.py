"""The replay benchmark (``benchmarks/replay.py``) on one shared chat and one agent
run: the default session a user gets keeps every render within the budget, a valid
request that ends on the newest message, repeats most of its prefix, and keeps more
of the conversation than ``trim_messages`` at a fraction of its cost."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA_DIR, REPO, SKIP_NO_DATA

sys.path.insert(0, str(REPO / "benchmarks"))


def _first(name: str) -> dict:
    if DATA_DIR is None:
        pytest.skip(SKIP_NO_DATA)
    with (Path(DATA_DIR) / f"{name}.jsonl").open(encoding="utf-8") as lines:
        return json.loads(next(lines))


@pytest.mark.parametrize("name,budget", [("locomo", 4000), ("mini_swe_agent", 8000)])
def test_the_default_session_beats_trim_messages_turn_by_turn(name: str, budget: int) -> None:
    import replay

    record = _first(name)
    session = replay.replay(record, replay.SessionReplay, budget, questions=5)
    trim = replay.replay(record, replay.TrimReplay, budget, questions=5)
    assert session.errors == []
    assert session.fit == session.valid == session.continued == session.renders
    assert session.repeated / session.sent >= 0.8  # a prompt cache keeps hitting
    assert session.cost < 0.5 * trim.cost
    assert sum(session.fills) / len(session.fills) >= 0.7  # the budget used
    found, findable = session.memory
    assert findable and found / findable > trim.memory[0] / trim.memory[1]
    if name == "locomo":
        assert session.asked[0] >= trim.asked[0]
