"""The notebooks run top to bottom as committed, offline (no API key, no network)."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the dev extra installs it")
nbclient = pytest.importorskip("nbclient", reason="the dev extra installs it")

#: What each notebook must print: the checks it makes on what it shows.
EXPECTED = {
    "langchain_quickstart": ["every call valid: True", "the state holds every message: True"],
    "llamaindex_quickstart": ["pairing problems: [] order problems: []", "<compressed_history>"],
    "core_tour": ["fits: True", "round trip exact: True"],
    "agent_loop": ["ctxfold CompressionMiddleware: 14 calls", "0 over the budget or split"],
    "chat_memory_recall": ["recall keeps the most at every budget: True"],
    "benchmark_plots": ["auto shows the most identifiers: True"],
}
#: The notebooks that draw: each shows at least one chart.
PICTURES = {"core_tour", "agent_loop", "chat_memory_recall", "benchmark_plots"}
NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks() -> None:
    assert sorted(p.stem for p in NOTEBOOKS) == sorted(EXPECTED)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_runs(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": path.parent}}
    )
    client.execute()  # raises CellExecutionError, naming the cell, on any error
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    printed = "".join(o.get("text", "") for o in outputs)
    assert all(line in printed for line in EXPECTED[path.stem])
    pictures = [o for o in outputs if "image/png" in o.get("data", {})]
    assert pictures or path.stem not in PICTURES
