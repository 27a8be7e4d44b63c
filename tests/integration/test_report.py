"""``ctxfold report``: one self-contained HTML page, opened in a real headless Chromium:
a folded span expands in place to exactly its originals, recalled passages are marked.

The browser tests need Debian's ``chromium`` and ``chromium-driver`` (``.ci/run``
installs them and sets ``CTXFOLD_REQUIRE_BROWSER=1``, so they run there, not skip)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import ctxfold
from conftest import EXAMPLES, LOCKER_FACT, long_chat
from ctxfold.cli import main
from ctxfold.report import report_html

AIRLINE = next(p for p in EXAMPLES if p.name == "airline_support.json")


def _airline_counts() -> dict[str, int]:
    """What ``compress`` decides for the airline example at the report's 25% budget."""
    msgs = ctxfold.from_openai(json.loads(AIRLINE.read_text())["messages"])
    counter = ctxfold.get_counter("o200k_base")
    budget = ctxfold.share_budget(msgs, 0.25, counter)
    return ctxfold.compress(msgs, budget=budget, counter=counter).decision_counts()


def _report(tmp_path: Path, source: Path, *args: str) -> Path:
    out = tmp_path / "report.html"
    assert main(["report", str(source), "--budget", "25%", "-o", str(out), *args]) == 0
    return out


def _body(m: dict[str, Any]) -> str:
    calls = "".join(
        f"\n-> {c['function']['name']}({c['function']['arguments']})"
        for c in m.get("tool_calls") or ()
    )
    return (m.get("content") or "") + calls


def test_the_page_is_self_contained(tmp_path, capsys):
    page = _report(tmp_path, AIRLINE).read_text()
    assert "<script" not in page and not re.search(r"(src|href)=['\"]?(https?:)?//", page)
    assert "report: " in capsys.readouterr().err
    counts = _airline_counts()  # an original for each message folded or shortened
    assert counts["summarized"] >= 10
    assert page.count("class='original'") == counts["summarized"] + counts.get("compressed", 0)
    assert "<svg class='chart'" in page and "1.9" in page  # the chart, the ratio


def test_a_report_of_a_result_from_python():
    msgs = ctxfold.from_openai(json.loads(AIRLINE.read_text())["messages"])
    result = ctxfold.compress(msgs, budget=1500, reversible=False)
    page = report_html(msgs, result, title="airline <support>")
    assert "<title>airline &lt;support&gt;</title>" in page  # escaped
    assert page.count("class='original'") == result.decision_counts()["summarized"]


# ------------------------------------------------------------------ in a real browser


def _browser() -> Any:
    webdriver = pytest.importorskip("selenium.webdriver", reason="the dev extra installs it")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if binary is None or driver is None:
        reason = "no chromium / chromedriver (apt-get install chromium chromium-driver)"
        if os.environ.get("CTXFOLD_REQUIRE_BROWSER") == "1":
            pytest.fail(f"CTXFOLD_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    options = Options()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1800"):
        options.add_argument(arg)
    return webdriver.Chrome(options=options, service=Service(driver))


def test_a_folded_span_expands_in_place_to_its_originals(tmp_path):
    from selenium.webdriver.common.by import By

    page = _report(tmp_path, AIRLINE)
    original = json.loads(AIRLINE.read_text())["messages"]
    browser = _browser()
    try:
        browser.get(page.as_uri())
        browser.save_screenshot(str(tmp_path / "before.png"))
        hidden = browser.find_elements(By.CSS_SELECTOR, "details.folded .original")
        folded = _airline_counts()["summarized"]  # the messages the note folded
        assert len(hidden) == folded and not any(e.is_displayed() for e in hidden)
        browser.find_element(By.CSS_SELECTOR, "details.folded > summary").click()
        shown = browser.find_elements(By.CSS_SELECTOR, "details.folded .original")
        assert all(e.is_displayed() for e in shown)
        for element in shown:
            index = int(element.get_attribute("data-index"))
            text = element.find_element(By.CSS_SELECTOR, ".text").get_attribute("textContent")
            assert text == _body(original[index])  # exactly the original, in place
        assert browser.save_screenshot(str(tmp_path / "expanded.png"))
        assert (tmp_path / "expanded.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        browser.quit()


def test_recalled_passages_are_marked(tmp_path):
    from selenium.webdriver.common.by import By

    chat = tmp_path / "chat.json"
    turns = long_chat()
    chat.write_text(json.dumps([*turns, {"role": "user", "content": "Which locker is mine?"}]))
    page = _report(tmp_path, chat, "--strategy", "sliding_window")
    browser = _browser()
    try:
        browser.get(page.as_uri())
        marked = browser.find_elements(By.CSS_SELECTOR, ".recall")
        assert len(marked) == 1 and marked[0].is_displayed()
        assert LOCKER_FACT in marked[0].text
    finally:
        browser.quit()
