"""The README's Python examples run as written (against the bundled example, with the
few names they assume given here), so a change that breaks one fails here first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BLOCKS = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)


def test_the_readme_has_its_examples():
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("k", range(len(BLOCKS)))
def test_a_readme_example_runs(k, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    code = BLOCKS[k].replace("sqlite:////var/lib/app/ctxfold.db", f"sqlite:///{tmp_path}/c.db")
    config = tmp_path / "ctxfold.toml"
    config.write_text('[ctxfold]\nstrategy = "hierarchical"\n')
    code = code.replace('"ctxfold.toml"', repr(str(config)))

    def search_flights(origin: str, destination: str, date: str) -> list[dict]:
        """Flights between two airports on a date."""
        return []

    namespace: dict = {
        "my_llm": lambda messages: "The user asked for a summary; the agent gave one.",
        "flights": [{"flight_number": "HAT023", "price": 412}],
        "search_flights": search_flights,
    }
    if k > 0:  # later examples go on from the first one's messages
        exec(compile(BLOCKS[0], "README block 0", "exec"), namespace)
    exec(compile(code, f"README block {k}", "exec"), namespace)
