from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXAMPLES, long_chat, shared_records
from ctxfold import Message, SQLiteStore
from ctxfold.cli import main

AIRLINE = str(next(p for p in EXAMPLES if p.name == "airline_support.json"))


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_compress_writes_json_and_a_stats_table(capsys):
    code, out, err = run(
        capsys, "compress", AIRLINE, "--budget", "1500", "--strategy", "sliding_window"
    )
    assert code == 0
    record = json.loads(out)
    original = json.loads(Path(AIRLINE).read_text())
    assert record["id"] == original["id"] and record["probes"] == original["probes"]
    assert record["messages"][0] == original["messages"][0]
    assert len(record["messages"]) < len(original["messages"])
    assert "tokens before" in err and "ratio" in err and "dropped" in err
    assert "strategy: sliding_window, counter: o200k_base" in err


def test_default_strategy_is_auto_and_condenses_older_messages(capsys):
    code, out, err = run(capsys, "compress", AIRLINE, "--budget", "1500", "--trace")
    assert code == 0
    messages = json.loads(out)["messages"]
    assert any(m["content"].startswith("[ctxfold:") for m in messages)
    assert "strategy: auto" in err and "summarized" in err and "folded:note" in err


def test_percentage_budget_text_format_and_trace(capsys):
    code, out, err = run(
        capsys,
        "compress",
        AIRLINE,
        "--budget",
        "50%",
        "--format",
        "text",
        "--trace",
        "--strategy",
        "sliding_window",
    )
    assert code == 0
    assert out.startswith("[system]")
    assert "trace of tau-airline-task40-trial0:" in err
    assert "pinned:system" in err and "outside_window" in err


def test_strategy_options_pass_through(capsys):
    code, _, err = run(
        capsys,
        "compress",
        AIRLINE,
        "--budget",
        "1500",
        "--option",
        "keep_first=1",
        "--trace",
        "--strategy",
        "sliding_window",
    )
    assert code == 0 and "keep_first" in err


def test_version(capsys):
    from ctxfold import __version__

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"ctxfold {__version__}"


def test_a_misspelt_option_names_the_closest_and_lists_the_valid_ones(capsys):
    args = ["compress", AIRLINE, "--budget", "1500", "--strategy", "sliding_window"]
    code, out, err = run(capsys, *args, "--option", "keep_firstt=1")
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert "no option 'keep_firstt' (did you mean 'keep_first'?)" in err
    assert "its options: " in err and "overflow" in err and "pin_roles" in err
    code, _, err = run(capsys, *args[:4], "--strategy", "sliding_windw")
    assert code == 2 and "(did you mean 'sliding_window'?)" in err


@pytest.mark.parametrize("share", ["25%", "10%"])
def test_a_share_budget_keeps_the_system_prompt_whole_on_every_example(share, capsys):
    from ctxfold import from_openai, get_counter

    for path in EXAMPLES:
        code, out, err = run(capsys, "compress", str(path), "--budget", share)
        assert code == 0, err
        msgs = from_openai(json.loads(path.read_text())["messages"])
        counter = get_counter("o200k_base")
        system = sum(counter.count_message(m) for m in msgs if m.role == "system")
        rest = counter.count_messages(msgs) - system - counter.count_messages([])
        budget = int(err.splitlines()[3].split()[1])  # the table's first row
        assert budget == int(system + 3 + float(share[:-1]) / 100 * rest)
        assert json.loads(out)["messages"][0] == json.loads(path.read_text())["messages"][0]


def test_trace_columns_line_up_whatever_the_labels(capsys):
    code, _, err = run(capsys, "compress", AIRLINE, "--budget", "10%", "--trace")
    lines = err.split("trace of ")[1].splitlines()[1:]
    assert code == 0 and len(lines) == 22
    assert any(len(line.split()[2]) > 22 for line in lines)  # a long label
    arrows = {line.index(" -> ") for line in lines}
    assert len(arrows) == 1  # the token columns start in one place on every line


def test_jsonl_in_jsonl_out(tmp_path, capsys):
    src = tmp_path / "two.jsonl"
    rec = json.loads(Path(AIRLINE).read_text())
    src.write_text(json.dumps(rec) + "\n" + json.dumps({**rec, "id": "second"}) + "\n")
    code, out, err = run(capsys, "compress", str(src), "--budget", "40%")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert [r["id"] for r in lines] == [rec["id"], "second"]
    assert "second" in err


def test_bare_list_from_stdin(monkeypatch, capsys):
    msgs = json.loads(Path(AIRLINE).read_text())["messages"]
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(msgs)))
    code, out, _ = run(capsys, "compress", "-", "--budget", "100%")
    assert code == 0 and json.loads(out) == msgs


def test_stats_reports_token_counts(capsys):
    code, out, _ = run(capsys, "stats", AIRLINE, "--counter", "cl100k_base")
    assert code == 0
    assert "counter: cl100k_base" in out and "tool calls" in out
    assert "tau-airline-task40-trial0" in out


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ('{"messages": [', "is not valid JSON or JSONL"),
        ('[{"role": "robot", "content": "x"}]', "invalid message: message 0: unknown role"),
        ('{"a": 1}', "expected a list of messages"),
        ("", "is empty"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, content, fragment):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, out, err = run(capsys, "compress", str(bad), "--budget", "10")
    assert code == 2 and out == ""
    assert fragment in err and err.count("\n") == 1 and "Traceback" not in err


def test_unreadable_file_and_bad_budget(tmp_path, capsys):
    code, _, err = run(capsys, "compress", str(tmp_path / "missing.json"), "--budget", "10")
    assert code == 2 and "cannot read" in err and "No such file" in err
    code, _, err = run(capsys, "compress", AIRLINE, "--budget", "lots")
    assert code == 2 and "--budget must be" in err
    code, _, err = run(capsys, "compress", AIRLINE, "--budget", "10", "--strategy", "zip")
    assert code == 2 and "unknown strategy 'zip'" in err


def test_budget_that_cannot_fit_exits_1_and_says_how_to_proceed(capsys):
    code, out, err = run(capsys, "compress", AIRLINE, "--budget", "10")
    assert code == 1 and out == ""
    assert "--option overflow=best_effort" in err


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "ctxfold"  # installed beside this interpreter
    done = subprocess.run(
        [str(script), "compress", AIRLINE, "--budget", "1500"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["messages"]


@pytest.mark.full_sweep
def test_compress_the_shared_data_as_jsonl(capsys, tmp_path):
    records = shared_records()
    data = tmp_path / "shared.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, out, err = run(
        capsys, "compress", str(data), "--budget", "25%", "--option", "overflow=best_effort"
    )
    assert code == 0, err
    assert [json.loads(line)["id"] for line in out.splitlines()] == [r["id"] for r in records]


def test_compress_with_a_store_is_reversible_and_expand_gives_the_original_back(capsys, tmp_path):
    db = tmp_path / "originals.db"
    code, out, _ = run(capsys, "compress", AIRLINE, "--budget", "1500", "--store", str(db))
    assert code == 0
    compressed = tmp_path / "compressed.json"
    compressed.write_text(out)
    record = json.loads(out)
    heads = [m["content"] for m in record["messages"] if "[ctxfold round " in m["content"]]
    assert len(heads) == 1
    code, back, err = run(capsys, "expand", str(compressed), "--store", f"sqlite:///{db}")
    assert code == 0 and err == ""
    assert json.loads(back) == json.loads(Path(AIRLINE).read_text())  # byte for byte
    round_id = heads[0].split()[2].rstrip(":]")
    code, text, _ = run(capsys, "expand", round_id, "--store", str(db))
    assert code == 0 and "user:" in text

    missing = tmp_path / "x.db"
    code, _, err = run(capsys, "expand", str(compressed), "--store", str(missing))
    assert code == 2 and "no store at" in err and not missing.exists()  # none created
    SQLiteStore(missing).close()  # a store, but another one
    code, partial, err = run(capsys, "expand", str(compressed), "--store", str(missing))
    assert code == 1 and "the store lacks" in err
    assert json.loads(partial) == record  # nothing invented
    code, _, err = run(capsys, "expand", "0123456789", "--store", str(db))
    assert code == 2 and "nothing is stored" in err
    code, _, err = run(capsys, "expand", str(tmp_path / "none.json"), "--store", str(db))
    assert code == 2 and "cannot read" in err


def test_expand_reads_what_a_session_wrote_given_its_id(capsys, tmp_path):
    from ctxfold import Session

    db = tmp_path / "sessions.db"
    session = Session("support-42", budget=1500, store=str(db))
    session.add(json.loads(Path(AIRLINE).read_text())["messages"])
    shown = tmp_path / "shown.json"
    shown.write_text(json.dumps(session.render().to_openai()))
    args = ["expand", str(shown), "--store", str(db)]
    for given in ([], ["--session", "support-42"]):  # the store finds the session's part
        code, out, err = run(capsys, *args, *given)
        assert code == 0 and err == ""
        assert json.loads(out) == json.loads(Path(AIRLINE).read_text())["messages"]
    code, out, err = run(capsys, *args, "--session", "another")
    assert code == 1 and "the store lacks" in err


def test_without_a_store_the_output_has_no_round_to_point_at(capsys):
    code, out, _ = run(capsys, "compress", AIRLINE, "--budget", "1500")
    assert code == 0 and "[ctxfold round" not in out and "[expand " not in out
    code, out, _ = run(capsys, "compress", AIRLINE, "--budget", "1500", "--store", "ftp://nowhere")
    assert code == 2


CODING = str(next(p for p in EXAMPLES if p.name == "coding_agent_sqlfluff.json"))


def test_render_gives_the_coalesced_view_of_an_agent_run(capsys):
    code, out, err = run(capsys, "render", CODING, "--option", "max_tool_calls=5")
    assert code == 0
    record = json.loads(out)
    original = json.loads(Path(CODING).read_text())
    assert record["id"] == original["id"]
    assert [m["role"] for m in record["messages"]] == ["system", "user"]
    assert record["messages"][0] == original["messages"][0]  # the run's own system prompt
    user = record["messages"][1]["content"]
    assert user.count("\n### turn ") == 5 and "### turn 43: bash(" in user
    assert "renderer: single_user_coalesced" in err and "5/43" in err


def test_render_full_history_gives_the_run_back(capsys):
    code, out, _ = run(capsys, "render", CODING, "--renderer", "full_history")
    assert code == 0
    assert json.loads(out)["messages"] == json.loads(Path(CODING).read_text())["messages"]


def test_render_errors_exit_with_one_line(capsys):
    code, out, err = run(capsys, "render", CODING, "--option", "budget=300")
    assert code == 1 and out == "" and "over the budget of 300" in err
    code, _, err = run(capsys, "render", CODING, "--option", "max_tols=3")
    assert code == 2 and "unknown option 'max_tols'" in err and len(err.splitlines()) == 1
    code, _, err = run(capsys, "render", CODING, "--renderer", "nope")
    assert code == 2 and "unknown renderer 'nope'" in err


# ------------------------------------------------------------- no traceback, ever


def _console(*args: str, shell_suffix: str = "") -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("ctxfold")
    command = " ".join([str(exe), *args]) + shell_suffix
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("fmt", ["openai", "text"])
def test_a_lone_surrogate_is_escaped_not_a_crash(fmt, tmp_path, capsys):
    path = tmp_path / "s.json"
    path.write_text('[{"role": "user", "content": "a lone \\ud800 half of a pair"}]')
    done = _console("compress", str(path), "--budget", "1000", "--format", fmt)
    assert done.returncode == 0 and "Traceback" not in done.stderr
    assert "\\ud800" in done.stdout


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_a_full_disk_is_exit_code_3_with_one_line():
    done = _console("compress", AIRLINE, "--budget", "2000", shell_suffix=" > /dev/full")
    assert done.returncode == 3 and "No space left" in done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


def test_a_reader_that_stops_early_is_no_failure(tmp_path):
    rec = json.loads(Path(AIRLINE).read_text())  # 40 copies: more than a pipe holds
    big = tmp_path / "big.jsonl"
    big.write_text("".join(json.dumps({**rec, "id": f"c{k}"}) + "\n" for k in range(40)))
    exe = str(Path(sys.executable).with_name("ctxfold"))
    for args in (["compress", str(big), "--budget", "100%"], ["stats", str(big)]):
        proc = subprocess.Popen([exe, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.read(10)  # as `| head -c 10` does, then the pipe closes
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == 0 and len(first) == 10
        assert "Traceback" not in err and "Exception ignored" not in err


def test_a_closed_stdout_is_exit_code_3_with_one_line():
    done = _console("compress", AIRLINE, "--budget", "2000", shell_suffix=" >&-")
    assert done.returncode == 3 and "Traceback" not in done.stderr


def test_help_documents_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps the epilog
    assert "exit codes: 0 success; 1" in out and "3 the output cannot be written" in out


def test_query_recalls_older_passages_and_no_recall_turns_it_off(capsys, tmp_path):
    turns = [{"role": "system", "content": "You are Ben."}, *long_chat()]
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(turns))
    args = ["compress", str(path), "--budget", "10%", "--strategy", "sliding_window"]
    code, out, _ = run(capsys, *args, "--query", "which gym locker is mine?")
    assert code == 0 and "sauna" in out
    with pytest.raises(SystemExit) as usage:  # one or the other
        run(capsys, *args, "--no-recall", "--query", "x")
    assert usage.value.code == 2 and "not allowed with" in capsys.readouterr().err
    code, out, _ = run(capsys, *args, "--no-recall")
    assert code == 0 and "sauna" not in out


def test_migrate_copies_a_session_an_older_ctxfold_stored_once(capsys, tmp_path):
    """A session of the first format (bare records, as an older ctxfold wrote them) is
    refused by ``Session.load`` until ``ctxfold migrate`` copies it; a second run says
    it is current, and a store that does not exist is bad usage, not a new empty file."""
    from ctxfold import Session
    from ctxfold.exceptions import CorruptRecordError
    from ctxfold.reversible.records import encode, message_record
    from ctxfold.session.log import namespace

    path = tmp_path / "old.db"
    turns = [Message("user", "Where is my order 8812?"), Message("assistant", "It ships today.")]
    SQLiteStore(str(path)).put_many(
        {f"{namespace('chat')}0:m:{n}": encode(message_record(m)) for n, m in enumerate(turns)}
    )
    spec = f"sqlite:///{path}"
    with pytest.raises(CorruptRecordError, match="migrate"):
        Session.load("chat", store=spec)
    assert main(["migrate", "chat", "--store", spec]) == 0
    assert "migrated" in capsys.readouterr().out
    assert Session.load("chat", store=spec).history == tuple(turns)
    assert main(["migrate", "chat", "--store", spec]) == 0
    assert "already current" in capsys.readouterr().out
    missing = f"sqlite:///{tmp_path / 'none.db'}"
    assert main(["migrate", "chat", "--store", missing]) == 2
    assert "no store at" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["compress", AIRLINE, "--budgt", "3000"], "--budgt (did you mean '--budget'?)"),
        (
            ["compress", AIRLINE, "--budget", "900", "--stratgy=fast"],
            "(did you mean '--strategy'?)",
        ),
        (
            ["report", AIRLINE, "--budget", "900", "--outptu", "r.html"],
            "(did you mean '--output'?)",
        ),
        (["--verison"], "--verison (did you mean '--version'?)"),
    ],
)
def test_a_misspelt_flag_is_named_before_a_missing_one(args, said, capsys):
    with pytest.raises(SystemExit) as done:
        main(args)
    err = capsys.readouterr().err
    assert done.value.code == 2 and said in err and "required" not in err


def test_abbreviated_flags_and_profiles_still_work(capsys):
    code, out, _ = run(capsys, "compress", AIRLINE, "--budg", "1500", "--strategy", "fast")
    assert code == 0 and json.loads(out)["messages"]
