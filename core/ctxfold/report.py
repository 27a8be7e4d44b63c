"""A compression as one self-contained HTML page (no script, no network): the stats
with a chart of tokens per message, the conversation before (each message's decision,
its reason and its text) and after (what the model sees: each folded span expands in
place to the originals it stands for, each shortened message to its original, recalled
passages marked). ``ctxfold report FILE --budget N -o report.html`` writes one.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from .messages import Message
from .result import RECALL_END, RECALL_HEAD, CompressionResult, Decision, is_note, sources_of

__all__ = ["report_html", "report_page"]

_LONG = 900  # characters shown whole; a longer text opens on a click

#: The actions whose message the output shows (whole or shortened), in input order.
_SHOWN = ("kept", "compressed")
_COLOURS = {
    "kept": "#2e7d32",
    "compressed": "#1565c0",
    "summarized": "#ef6c00",
    "deduplicated": "#6a1b9a",
    "dropped": "#c62828",
    "reverted": "#546e7a",
}

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table.stats td{padding:2px 12px 2px 0}
.panes{display:grid;grid-template-columns:1fr 1fr;gap:24px}
.msg{border:1px solid #ddd;border-radius:6px;margin:6px 0;padding:6px 10px}
.role{font-weight:600;text-transform:uppercase;font-size:11px;color:#555}
.badge{display:inline-block;color:#fff;border-radius:4px;padding:0 6px;font-size:11px}
.reason{color:#666;font-size:12px}
.text{white-space:pre-wrap;word-break:break-word;font-family:ui-monospace,monospace;
font-size:12px;margin:4px 0 0}
.note{background:#fff8e1}.recall{background:#e3f2fd;border-left:3px solid #1565c0;
padding-left:6px}
details>summary{cursor:pointer;color:#1565c0}
details.long>summary{color:#444;font-family:ui-monospace,monospace;font-size:12px}
.original{border-left:3px solid #ef6c00;margin:6px 0 6px 4px;padding-left:8px}
"""


def report_html(
    original: Sequence[Message], result: CompressionResult, *, title: str = "ctxfold report"
) -> str:
    """The page for ``result``, the compression of ``original``."""
    return report_page([(title, original, result)], title=title)


def report_page(
    compressions: Sequence[tuple[str, Sequence[Message], CompressionResult]],
    *,
    title: str = "ctxfold report",
) -> str:
    """One page for several ``(label, original, result)`` compressions, a section each."""
    body = "".join(_section(label, original, result) for label, original, result in compressions)
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>{body}</body></html>\n"
    )


def _section(title: str, original: Sequence[Message], result: CompressionResult) -> str:
    return (
        f"<section><h1>{_e(title)}</h1>{_stats(result)}{_chart(result.trace)}"
        "<div class='panes'>"
        f"<div><h2>Before: {len(original)} messages</h2>{_before(original, result.trace)}</div>"
        f"<div><h2>After: {len(result.messages)} messages</h2>{_after(original, result)}</div>"
        "</div></section>"
    )


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _stats(result: CompressionResult) -> str:
    s = result.stats
    rows = [
        ("strategy", f"{result.strategy} (counter {s.counter})"),
        ("budget", f"{s.budget} tokens"),
        (
            "tokens",
            f"{s.tokens_before} -> {s.tokens_after} ({s.ratio:.2f}x, {s.reduction_pct:.1f}% saved)",
        ),
        ("messages", f"{s.messages_before} -> {s.messages_after}"),
        ("decisions", ", ".join(f"{k} {v}" for k, v in sorted(result.decision_counts().items()))),
        ("time", f"{s.elapsed_ms:.1f} ms"),
    ]
    cells = "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in rows)
    return f"<table class='stats'>{cells}</table>"


def _chart(trace: Sequence[Decision], height: int = 120) -> str:
    """Tokens per input message: the original (grey) and what the output keeps of it
    (coloured by the decision), as an inline SVG."""
    if not trace:
        return ""
    top = max(max(d.tokens_before for d in trace), 1)
    width = max(6, min(24, 900 // len(trace)))
    bars = []
    for k, d in enumerate(trace):
        x = k * width
        full = round(height * d.tokens_before / top)
        kept = round(height * d.tokens_after / top)
        tip = _e(
            f"message {d.index}: {d.action} ({d.label}), {d.tokens_before} -> "
            f"{d.tokens_after} tokens"
        )
        bars.append(
            f"<g><title>{tip}</title>"
            f"<rect x='{x}' y='{height - full}' width='{width - 1}' height='{full}' "
            "fill='#cfd8dc'/>"
            f"<rect x='{x}' y='{height - kept}' width='{width - 1}' height='{kept}' "
            f"fill='{_COLOURS.get(d.action, '#555')}'/></g>"
        )
    legend = " ".join(
        f"<span class='badge' style='background:{c}'>{a}</span>"
        for a, c in _COLOURS.items()
        if any(d.action == a for d in trace)
    )
    return (
        f"<h2>Tokens per message (grey: before)</h2><svg class='chart' role='img' "
        f"width='{width * len(trace)}' height='{height}'>{''.join(bars)}</svg><p>{legend}</p>"
    )


def _body(m: Message) -> str:
    return m.text + "".join(f"\n-> {c.name}({c.arguments})" for c in m.tool_calls)


def _text(text: str, css: str = "text") -> str:
    """A message's text; a long one folded behind its first lines."""
    if len(text) <= _LONG:
        return f"<div class='{css}'>{_e(text)}</div>"
    head = text[: _LONG // 3].rsplit(" ", 1)[0]
    return (
        f"<details class='long'><summary>{_e(head)} ... ({len(text)} characters)</summary>"
        f"<div class='{css}'>{_e(text)}</div></details>"
    )


def _message(m: Message, extra: str = "", css: str = "") -> str:
    return (
        f"<div class='msg {css}'><span class='role'>{_e(m.role)}</span>{extra}"
        f"{_text(_body(m))}</div>"
    )


def _badge(d: Decision) -> str:
    colour = _COLOURS.get(d.action, "#555")
    return (
        f" <span class='badge' style='background:{colour}'>{_e(d.action)}</span> "
        f"<span class='reason'>{_e(d.label)}, {d.tokens_before} -> {d.tokens_after} "
        "tokens</span>"
    )


def _before(original: Sequence[Message], trace: Sequence[Decision]) -> str:
    by_index = {d.index: d for d in trace}
    return "".join(
        _message(m, _badge(by_index[i]) if i in by_index else "") for i, m in enumerate(original)
    )


def _original(m: Message, index: int) -> str:
    return (
        f"<div class='original' data-index='{index}'><span class='role'>{_e(m.role)} "
        f"(message {index})</span><div class='text'>{_e(_body(m))}</div></div>"
    )


def _after(original: Sequence[Message], result: CompressionResult) -> str:
    """The output, each note with the originals it folded and each shortened message
    with its original, expandable in place; recalled passages marked."""
    by_index = {d.index: d for d in result.trace}
    folded = [d.index for d in result.trace if d.action not in _SHOWN]
    notes = [m for m in result.messages if is_note(m)]
    sources = sources_of(original, result.messages, result.trace, result.round_id)
    parts = []
    for m, j in zip(result.messages, sources, strict=True):
        if j is None and is_note(m):
            inner = "".join(_original(original[i], i) for i in folded) if m is notes[0] else ""
            fold = (
                f"<details class='folded'><summary>show the {len(folded)} folded messages"
                f"</summary>{inner}</details>"
                if inner
                else ""
            )
            parts.append(_message(m, fold, "note"))
            continue
        parts.append(_shown(m, original, None if j is None else by_index.get(j)))
    return "".join(parts)


def _shown(m: Message, original: Sequence[Message], d: Decision | None) -> str:
    """One output message that stands for the input message of decision ``d``: its
    recall block marked, and when it was shortened, its original behind a toggle."""
    extra = ""
    if d is not None:
        index = d.index
        extra = _badge(d)
        if d.action == "compressed":
            extra += (
                "<details class='shortened'><summary>show the original</summary>"
                f"{_original(original[index], index)}</details>"
            )
    text = m.text
    if m.role == "user" and text.startswith(RECALL_HEAD):
        block, end, rest = text.partition(f"\n{RECALL_END}\n\n")
        if end:
            return (
                f"<div class='msg'><span class='role'>{_e(m.role)}</span>{extra}"
                f"<div class='text recall' title='recalled passages'>{_e(block)}</div>"
                f"<div class='text'>{_e(rest)}</div></div>"
            )
    return _message(m, extra)
