"""Long repetitive tool output: what a note keeps of it. The lines that stand out
(the error, the line naming what the task names) outrank the hundreds alike; the many
identifiers of one shape a log prints once each are listed as one family; the task is
in every output."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

import ctxfold
from ctxfold import Message, get_counter
from ctxfold.result import NOTE_KEY, is_note
from ctxfold.strategies.auto.families import FAMILY_MIN, families, shape
from ctxfold.strategies.auto.policy import POLICY

COUNTER = get_counter("o200k_base")
TASK = "Users report intermittent 500 errors on checkout. Find the root cause in the API logs."


def _log(rng: random.Random, pod: int, lines: int = 400) -> tuple[str, str]:
    """A pod's request log: ``lines`` INFO lines alike but for their numbers and ids,
    and one ERROR line naming a module and an error; the log and that line."""
    routes = ("billing/{}/rates", "orders/{}/items", "notify/{}/schedules", "cart/{}/lines")
    out = []
    for k in range(lines):
        route = rng.choice(routes).format(rng.randint(1000, 99999))
        out.append(
            f"2025-03-11T02:{k % 60:02d}:{rng.randint(0, 59):02d}Z INFO "
            f"[{rng.getrandbits(48):012x}] {rng.choice(('GET', 'POST'))} /api/v1/{route} "
            f"200 {rng.randint(5, 900)}ms"
        )
    error = (
        f"2025-03-11T02:31:07Z ERROR [{rng.getrandbits(48):012x}] POST /api/v2/charge 500 - "
        f"ROOT CAUSE INC-40{pod:02d}: /srv/payments/module_{pod:02d}/handler.py raised "
        f"KeyError('merchant_{pod}_token')"
    )
    out.insert(rng.randint(50, lines - 50), error)
    return "\n".join(out), error


def _run(pods: int = 6) -> tuple[list[Message], list[str]]:
    """An agent reading ``pods`` logs, one root-cause line hidden in each."""
    rng = random.Random(7)
    msgs = [Message("system", "You are an SRE agent."), Message("user", TASK)]
    errors = []
    for pod in range(pods):
        log, error = _log(rng, pod)
        errors.append(error)
        call = ctxfold.ToolCall(f"c{pod}", "bash", json.dumps({"cmd": f"kubectl logs api-{pod}"}))
        msgs.append(Message("assistant", f"Reading pod api-{pod}.", tool_calls=(call,)))
        msgs.append(Message("tool", log, tool_call_id=f"c{pod}"))
    msgs.append(Message("assistant", "Let me summarize what the logs show."))
    return msgs, errors


def _note(messages: list[Message]) -> Message:
    (note,) = [m for m in messages if is_note(m)]
    return note


@pytest.mark.parametrize("share", [0.25, 0.10])
def test_every_root_cause_line_survives_a_log_of_thousands_alike(share: float) -> None:
    msgs, errors = _run()
    total = COUNTER.count_messages(msgs)
    budget = int(total * share)
    result = ctxfold.compress(msgs, budget=budget, counter=COUNTER)
    text = "\n".join(m.text for m in result.messages)
    assert COUNTER.count_messages(result.messages) <= budget
    for error in errors:
        assert error in text, error
    assert TASK in text


def _test_run(rng: random.Random, run: int) -> str:
    """A test run: 300 passing tests, each a dotted name of its own, and one failure."""
    mods = ("billing", "orders", "catalog", "reports", "webhooks")
    lines = [
        f"tests.{rng.choice(mods)}.test_{rng.choice(mods)}.Tests.test_case_{k}_{rng.choice(mods)}"
        f" ... ok"
        for k in range(300)
    ]
    lines[150 + run] = (
        f"FAIL: tests.billing.test_refund.RefundTests.test_partial_{run} - "
        f"AssertionError: 40 != 42 (src/billing/refund.py:{100 + run})"
    )
    return "\n".join(lines)


@pytest.mark.parametrize("share", [0.25, 0.10])
def test_identifiers_take_at_most_a_quarter_of_the_note(share: float) -> None:
    """Hundreds of passing tests' names: listing them all would fill the note."""
    rng = random.Random(3)
    msgs = [Message("system", "You run tests."), Message("user", "CI is red. Find why.")]
    for run in range(4):
        call = ctxfold.ToolCall(f"t{run}", "bash", json.dumps({"cmd": "python -m unittest"}))
        msgs.append(Message("assistant", f"Run {run}.", tool_calls=(call,)))
        msgs.append(Message("tool", _test_run(rng, run), tool_call_id=f"t{run}"))
    msgs.append(Message("assistant", "Reading the failures."))
    budget = int(COUNTER.count_messages(msgs) * share)
    result = ctxfold.compress(msgs, budget=budget, counter=COUNTER)
    note = _note(result.messages)
    listed = [ln for ln in note.text.split("\n") if ln.startswith(POLICY.also)]
    ratio = sum(COUNTER.count_text(ln) for ln in listed) / COUNTER.count_text(note.text)
    assert ratio <= 0.25
    text = "\n".join(m.text for m in result.messages)
    assert all(f"src/billing/refund.py:{100 + run}" in text for run in range(4))


def test_a_family_of_routes_is_listed_as_its_shape_a_count_and_its_ends() -> None:
    msgs, _ = _run()
    budget = COUNTER.count_messages(msgs) // 10
    note = _note(ctxfold.compress(msgs, budget=budget, counter=COUNTER).messages)
    (listed,) = [ln for ln in note.text.split("\n") if ln.startswith(POLICY.also)]
    assert "/api/v#/billing/#/rates x" in listed
    assert listed.count("/api/v1/billing/") <= 2 * listed.count("/api/v#/billing/#/rates")


def test_the_opening_of_a_task_too_long_to_stay_whole_is_in_the_output() -> None:
    """A task longer than the whole budget is folded, and its opening comes first."""
    msgs, _ = _run(3)
    opening = "Checkout fails with 500 errors for every customer paying by card."
    long_task = " ".join(
        [opening, *(f"Customer {k} saw the error on order {4000 + k}." for k in range(900))]
    )
    msgs[1] = Message("user", long_task)
    budget = COUNTER.count_messages(msgs) // 10
    assert COUNTER.count_message(msgs[1]) > budget  # it cannot stay whole
    result = ctxfold.compress(msgs, budget=budget, counter=COUNTER)
    assert opening in _note(result.messages).text


def test_a_session_keeps_a_long_tasks_opening_first_in_every_render() -> None:
    """A task too long to stay whole is folded into the first note; that note is
    folded into the next, and the next: the task's opening stays in every render, first
    in the note, with the working state after it, and no later user message is taken
    for the task."""
    opening = "Checkout fails with 500 errors for every customer paying by card."
    task = " ".join([opening, *(f"Customer {k} saw it on order {4000 + k}." for k in range(300))])
    msgs, _ = _run(8)
    msgs[1] = Message("user", task)
    msgs.insert(8, Message("user", "Also check the refund path, please."))
    msgs.insert(9, Message("assistant", "Will do."))
    session = ctxfold.Session(budget=3000, counter=COUNTER, store=ctxfold.MemoryStore())
    rounds: set[object] = set()
    for m in msgs:
        session.add(m)
        if m.role != "assistant":
            continue
        note = _note(list(session.render().messages))
        if "task" not in note.metadata[NOTE_KEY]:
            assert not rounds  # only before the task is first folded (it is shown cut)
            continue
        first = note.text.split("\n")[1]
        assert first.startswith(f"user: {opening} Customer 0 saw it")
        assert note.metadata[NOTE_KEY]["task"] == first  # the next note opens with it
        assert "Also check the refund path" not in first  # a later request is no task
        assert note.text.count(opening) == 1
        rounds.add(note.metadata[NOTE_KEY].get("round"))
    assert len(rounds) >= 3  # the task's note was folded twice at least
    assert "Unresolved: " in note.text.split("\n", 2)[2]  # after the task, not before it


def test_a_task_opening_with_one_block_longer_than_the_room_shows_its_head() -> None:
    """A task whose first part is one block (a stack trace pasted whole, one segment)
    longer than the room an opening gets: the note opens with that block's head."""
    msgs, _ = _run(4)
    trace = ";".join(f"at com.pay.Checkout.step{k}(Checkout.java:{100 + k})" for k in range(400))
    msgs[1] = Message("user", f"Checkout crashes: {trace}")
    budget = COUNTER.count_messages(msgs) // 10
    note = _note(ctxfold.compress(msgs, budget=budget, counter=COUNTER).messages)
    first = note.text.split("\n")[1]
    assert first.startswith("user: Checkout crashes: at com.pay.Checkout.step0(Checkout.java:100)")
    assert first.endswith("[...]") and note.metadata[NOTE_KEY]["task"] == first


def test_a_task_edited_into_a_stored_note_is_read_only_as_a_short_line() -> None:
    """A note's carried task, edited by hand: anything but text is no task, and a
    text far over the room an opening gets is not shown as the next note's first line
    (the note's own lines compete as any others)."""
    from ctxfold.strategies.auto.plan import task_of

    msgs, _ = _run(4)
    msgs[1] = Message("user", " ".join(f"Order {4000 + k} failed at checkout." for k in range(300)))
    budget = COUNTER.count_messages(msgs) // 10
    out = list(ctxfold.compress(msgs, budget=budget, counter=COUNTER).messages)
    note = _note(out)
    meta = note.metadata[NOTE_KEY]
    assert task_of(note) == meta["task"] and meta["task"].startswith("user: ")
    huge = "user: " + "pay now " * 3000
    for edited, shown in ((meta["task"], True), (7, False), (["x"], False), (huge, False)):
        forged = replace(note, metadata={NOTE_KEY: {**meta, "task": edited}})
        again = [*out[: out.index(note)], forged, *out[out.index(note) + 1 :]]
        more, _ = _run(8)
        result = ctxfold.compress([*again, *more[2:]], budget=budget, counter=COUNTER)
        first = _note(result.messages).text.split("\n")[1]
        assert (first == edited) is shown
        assert COUNTER.count_messages(result.messages) <= budget


def test_shape_masks_what_varies_between_members() -> None:
    assert shape("/api/v1/billing/12593/rates") == "/api/v#/billing/#/rates"
    assert shape("c10005acae9d") == "<hex>"
    assert shape("2025-03-11T02:32:27.504Z") == "#-#-#T#:#:#.#Z"
    assert shape("deadbeef") == "deadbeef"  # no digit: a word, not an id


def test_only_identifiers_nobody_used_make_a_family() -> None:
    routes = [f"/api/orders/{n}/items" for n in range(100, 100 + FAMILY_MIN + 3)]
    uses = dict.fromkeys(routes, 0.0)
    uses[routes[2]] = 1.0  # the agent read this one: it stays itself
    (fam,) = families(routes, uses)
    assert routes[2] not in fam.members
    assert len(fam.members) == FAMILY_MIN + 2
    assert fam.entry == (
        f"/api/orders/#/items x{FAMILY_MIN + 2} ({fam.members[0]} ... {fam.members[-1]})"
    )
    assert families(routes[: FAMILY_MIN - 1], uses) == []  # too few to be a family


def _search_run() -> tuple[list[Message], list[str]]:
    """An agent grepping for ``budget_batch``: three results of 1,200 hits on its
    neighbours (``budget_ms``, ``max_batch``), each over the budget alone, with four
    hits on it hidden in each."""
    rng = random.Random(11)
    task = "Find every place that reads `budget_batch` and make it configurable."
    msgs = [Message("system", "You are a coding agent."), Message("user", task)]
    found = []
    for run in range(3):
        lines = []
        for k in range(1200):
            name = rng.choice(("budget_ms", "max_batch", "budget_max", "total_batch"))
            lines.append(f"src/{rng.choice(('tax', 'orders', 'fraud'))}/f{k}.ts:{k}:3: {name} = 1")
        for k in rng.sample(range(1200), 4):  # alike but for the name the task names
            lines[k] = f"src/orders/f{k}.ts:{k}:3: budget_batch = 1"
            found.append(f"src/orders/f{k}.ts:{k}:3")
        call = ctxfold.ToolCall(f"g{run}", "bash", json.dumps({"cmd": f"grep -rn batch src/{run}"}))
        msgs.append(Message("assistant", f"Searching part {run}.", tool_calls=(call,)))
        msgs.append(Message("tool", "\n".join(lines), tool_call_id=f"g{run}"))
    msgs.append(Message("assistant", "Listing what I found."))
    return msgs, found


@pytest.mark.parametrize("budget", [8000, 4000])
def test_a_session_keeps_the_hits_on_what_the_task_names_across_compactions(budget: int) -> None:
    """Rendered every turn, a session folds its last note again and again: the hits on
    the identifier the task names survive every compaction, and the list stays within
    its share though each note's list is folded into the next."""
    msgs, found = _search_run()
    session = ctxfold.Session(budget=budget, counter=COUNTER, store=ctxfold.MemoryStore())
    out: list[Message] = []
    for m in msgs:
        session.add(m)
        if m.role == "assistant":
            out = list(session.render().messages)
    text = "\n".join(m.text for m in out)
    assert [hit for hit in found if hit not in text] == []
    note = _note(out)
    listed = [ln for ln in note.text.split("\n") if ln.startswith(POLICY.also)]
    ratio = sum(COUNTER.count_text(ln) for ln in listed) / COUNTER.count_text(note.text)
    assert ratio <= 0.25


def test_only_identifiers_on_alike_lines_are_capped_and_never_a_file_to_open() -> None:
    """Of a long output's identifiers, those only its alike lines showed are capped
    (a route with numbers, an id); a path to a file is not (a listing's every line is
    alike, and any file in it may be read next); one on a line that stands out is not."""
    from ctxfold.strategies.auto.plan import Plan, identifier_pool

    ids = (("path", "src/billing/refund.py"), ("path", "/api/v1/orders/123"), ("id", "req_8f2a"))
    plan = Plan(
        3, "tool", (), (), (), (), [], (), (), [], (), 1.0, ids,
        alike=frozenset({"src/billing/refund.py", "/api/v1/orders/123"}),
    )  # fmt: skip
    pool = identifier_pool({3: plan}, [3], task=-1)
    assert pool.alike == {"/api/v1/orders/123"}
