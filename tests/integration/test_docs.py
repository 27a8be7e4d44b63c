"""Every Python block of the README and of docs/ runs as written, and prints exactly
the ``output`` block that follows it: a number a page shows is one this code printed.

The blocks of one page run in order in one namespace (a later block goes on from the
earlier ones), in a scratch folder that holds the bundled ``examples/``. After a change
that moves a printed number, ``python tests/integration/test_docs.py`` rewrites the
``output`` blocks from a fresh run (then read the diff).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# a ```python block, then (after blank lines) an optional ```output block (fenced with
# four backticks when the output holds three)
BLOCK = re.compile(r"```python\n(.*?)```\n(?:\s*(`{3,4})output\n(.*?)\2\n)?", re.S)


def _blocks(page: Path) -> list[tuple[str, str | None]]:
    found = BLOCK.findall(page.read_text(encoding="utf-8"))
    return [(code, out if fence else None) for code, fence, out in found]


def _run(page: Path, workdir: Path) -> list[str]:
    """Each block's printed output, run in ``workdir``."""
    namespace: dict[str, object] = {"__name__": "__doc_page__"}
    printed = []
    here = os.getcwd()
    os.chdir(workdir)
    try:
        for k, (code, _) in enumerate(_blocks(page)):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(code, f"{page.name} block {k}", "exec"), namespace)
            printed.append(out.getvalue())
    finally:
        os.chdir(here)
    return printed


def _workdir(root: Path) -> Path:
    (root / "examples").symlink_to(REPO / "examples")
    return root


def _tidy(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def test_the_docs_have_their_examples() -> None:
    assert len(_blocks(REPO / "README.md")) >= 4
    assert sum(bool(_blocks(p)) for p in PAGES) >= 9
    assert len((REPO / "README.md").read_text().splitlines()) <= 350


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_a_page_runs_and_prints_what_it_shows(page: Path, tmp_path: Path) -> None:
    printed = _run(page, _workdir(tmp_path))
    for k, ((_, shown), got) in enumerate(zip(_blocks(page), printed, strict=True)):
        if shown is not None:
            assert _tidy(got) == _tidy(shown), f"{page.name} block {k} printed otherwise"


def _rewrite(page: Path) -> None:
    """Put each block's fresh output in the ``output`` block after it."""
    with tempfile.TemporaryDirectory() as tmp:
        printed = iter(_run(page, _workdir(Path(tmp))))

    def fill(match: re.Match[str]) -> str:
        got = next(printed)
        fence = match.group(2)
        if fence is None:
            return match.group(0)
        return f"```python\n{match.group(1)}```\n\n{fence}output\n{_tidy(got)}\n{fence}\n"

    page.write_text(BLOCK.sub(fill, page.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    for path in [Path(p) for p in sys.argv[1:]] or PAGES:
        _rewrite(path.resolve())
        print(f"rewrote {path}")
