"""Sessions under load and faults: many processes sharing one Redis server and one
SQLite file, workers killed at random, Redis restarted, and every history and
expansion checked exact at the end.

    python benchmarks/load.py                                   # 8 processes, 1,000 x 50
    python benchmarks/load.py --processes 4 --sessions 100 --turns 20 --kills 3

Each worker owns a slice of the session ids (half in Redis, half in SQLite) and drives
them turn by turn: add the user's message, render at the budget, add the answer (a
turn's time is the three, store round trips included). A turn's messages are made
from the bundled examples' texts by the session id and the turn number, so that a
worker that was killed and started again picks up from what its sessions hold
(``Session.load``) and the end state is known. The parent kills a random worker with
SIGKILL ``--kills`` times, at even steps of the progress, and restarts it, and restarts
the Redis server (which keeps an append-only file) once halfway; a worker that meets
the restart retries after its ``CacheError``. At the end every session is loaded
again: its history must be the expected one, message for message, and the expansion
of a render the whole history.

Reported: turns, per-turn p50 / p95 / p99 / max ms (overall, per store, and apart for
the turns whose render compacted; the first turn of each worker process, which loads
the tokenizer, is counted apart), store
round trips per turn (reads and writes of the store, counted in the workers), kills,
retries, and the check. Needs ``redis-server`` on the PATH (``.ci/run`` installs it);
it starts its own on a free port with its own data folder.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def texts() -> list[str]:
    out: list[str] = []
    for path in sorted((REPO / "examples").glob("*.json")):
        for m in json.loads(path.read_text(encoding="utf-8"))["messages"]:
            if isinstance(m.get("content"), str) and m["content"].strip():
                out.append(m["content"][:3000])
    return out


def turn_messages(pool: list[str], sid: int, turn: int) -> list[dict[str, str]]:
    """The user's and the assistant's message of one turn (deterministic)."""
    rng = random.Random(sid * 100_003 + turn)
    user = f"[s{sid} t{turn}] " + pool[rng.randrange(len(pool))][: rng.choice((200, 800, 3000))]
    answer = f"[s{sid} t{turn} answer] " + pool[rng.randrange(len(pool))][:400]
    return [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]


class Counting:
    """A store that counts its round trips (reads and writes)."""

    def __init__(self, store: Any) -> None:
        self.store, self.trips = store, 0

    def put_many(self, entries: Any) -> None:
        self.trips += 1
        self.store.put_many(entries)

    def put_new(self, entries: Any) -> list[str]:
        self.trips += 1
        taken: list[str] = self.store.put_new(entries)
        return taken

    def get_many(self, ids: Any) -> list[bytes | None]:
        self.trips += 1
        got: list[bytes | None] = self.store.get_many(ids)
        return got


def worker(args: argparse.Namespace, index: int) -> None:
    """Drive this worker's sessions to the end, appending one JSON line per turn."""
    from ctxfold.exceptions import CacheError
    from ctxfold.session import Session
    from ctxfold.storage import RedisStore, SQLiteStore

    pool = texts()
    redis = Counting(RedisStore(args.redis_url, prefix="load:"))
    sqlite = Counting(SQLiteStore(args.sqlite))
    mine = list(range(index, args.sessions, args.processes))
    out = Path(args.out) / f"w{index}.jsonl"
    open_sessions: dict[int, Session] = {}

    def store_of(sid: int) -> Counting:
        return redis if sid % 2 == 0 else sqlite

    def session(sid: int) -> Session:
        s = open_sessions.get(sid)
        if s is None:
            s = open_sessions[sid] = Session(f"load-{sid}", budget=args.budget, store=store_of(sid))
        return s

    cold = True  # the process's first turn loads the tokenizer and the modules
    with out.open("a", encoding="utf-8") as log:
        for turn in range(args.turns):
            for sid in mine:
                while True:
                    try:
                        s = session(sid)
                        done = len(s.history)
                        if done >= 2 * (turn + 1):
                            break  # written before this worker was restarted
                        user, answer = turn_messages(pool, sid, turn)
                        st = store_of(sid)
                        trips = st.trips
                        started = time.perf_counter()
                        if done == 2 * turn:
                            s.add(user)
                        folded = s.folded
                        s.render()
                        s.add(answer)
                        ms = (time.perf_counter() - started) * 1000
                        kind = "redis" if st is redis else "sqlite"
                        record = {
                            "ms": ms,
                            "store": kind,
                            "trips": st.trips - trips,
                            "cold": cold,
                            "compacted": s.folded != folded,
                        }
                        cold = False
                        log.write(json.dumps(record) + "\n")
                        log.flush()
                        break
                    except CacheError:
                        open_sessions.pop(sid, None)  # the server restarts: read again
                        log.write(json.dumps({"retry": 1}) + "\n")
                        time.sleep(0.2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_redis(port: int, folder: Path) -> subprocess.Popen[bytes]:
    cmd = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder)]
    cmd += ["--appendonly", "yes", "--appendfsync", "everysec", "--save", ""]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.05)
    raise RuntimeError("redis-server did not start")


def stop_redis(port: int, proc: subprocess.Popen[bytes]) -> None:
    subprocess.run(["redis-cli", "-p", str(port), "shutdown"], capture_output=True, check=False)
    proc.wait(timeout=30)


def progress(folder: Path, processes: int) -> int:
    """Turns the workers have logged so far."""
    done = 0
    for k in range(processes):
        path = folder / f"w{k}.jsonl"
        if path.exists():
            with path.open("rb") as f:
                done += sum(1 for line in f if b'"ms"' in line)
    return done


def spawn(args: argparse.Namespace, index: int) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, __file__, "--worker", str(index)]
    for name in ("processes", "sessions", "turns", "budget", "redis_url", "sqlite", "out"):
        cmd += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    return subprocess.Popen(cmd, cwd=REPO)


def check(args: argparse.Namespace) -> list[str]:
    """Every session's history exact, and the expansion of a render the history."""
    import ctxfold
    from ctxfold.session import Session
    from ctxfold.storage import RedisStore, SQLiteStore

    pool = texts()
    stores = {0: RedisStore(args.redis_url, prefix="load:"), 1: SQLiteStore(args.sqlite)}
    wrong: list[str] = []
    for sid in range(args.sessions):
        s = Session.load(f"load-{sid}", budget=args.budget, store=stores[sid % 2])
        want = [m for t in range(args.turns) for m in turn_messages(pool, sid, t)]
        if ctxfold.to_openai(s.history) != want:
            wrong.append(f"session {sid}: history differs")
            continue
        back = ctxfold.expand(s.render(), store=s.expand_tool().store)
        if not back.complete or back.to_openai() != want:
            wrong.append(f"session {sid}: expansion differs")
    return wrong


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--redis-url", default="", help=argparse.SUPPRESS)
    parser.add_argument("--sqlite", default="", help=argparse.SUPPRESS)
    parser.add_argument("--out", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        worker(args, args.worker)
        return 0
    if shutil.which("redis-server") is None:
        print("benchmark skipped: no redis-server on the PATH", file=sys.stderr)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        port = free_port()
        redis = start_redis(port, folder)
        args.redis_url = f"redis://127.0.0.1:{port}/0"
        args.sqlite, args.out = str(folder / "load.db"), str(folder)
        from ctxfold.storage import SQLiteStore

        SQLiteStore(args.sqlite).close()  # the file exists before the workers start
        rng = random.Random(0)
        started = time.perf_counter()
        workers = [spawn(args, k) for k in range(args.processes)]
        total = args.sessions * args.turns
        # Kills at even steps of the progress, the Redis restart halfway.
        steps = [total * (k + 1) // (args.kills + 2) for k in range(args.kills)]
        kills = restarted = 0
        while any(w.poll() is None for w in workers):
            time.sleep(0.05)
            done = progress(folder, args.processes)
            alive = [k for k, w in enumerate(workers) if w.poll() is None]
            if alive and kills < len(steps) and done >= steps[kills]:
                k = rng.choice(alive)
                workers[k].send_signal(signal.SIGKILL)
                workers[k].wait()
                workers[k] = spawn(args, k)
                kills += 1
            elif not restarted and done >= total // 2:
                stop_redis(port, redis)
                redis = start_redis(port, folder)
                restarted = 1
        failed = [k for k, w in enumerate(workers) if w.returncode != 0]
        seconds = time.perf_counter() - started
        wrong = check(args)
        rows = [
            json.loads(line)
            for k in range(args.processes)
            for line in (folder / f"w{k}.jsonl").read_text().splitlines()
        ]
        stop_redis(port, redis)
    turns = [r for r in rows if "ms" in r and not r["cold"]]
    report: dict[str, Any] = {
        "processes": args.processes,
        "sessions": args.sessions,
        "turns": len(turns),
        "cold_turns": sum(1 for r in rows if r.get("cold")),
        "seconds": round(seconds, 1),
        "kills": kills,
        "redis_restarts": restarted,
        "retries": sum(1 for r in rows if "retry" in r),
        "failed_workers": failed,
        "wrong": wrong[:10],
        "checked": args.sessions,
    }
    print(
        f"{len(turns)} turns in {seconds:.0f} s (and {report['cold_turns']} first turns of a "
        f"process, left out), {kills} kills, {restarted} Redis restart, "
        f"{report['retries']} retries"
    )
    print("| turns of | turns | p50 ms | p95 ms | p99 ms | max ms | round trips / turn |")
    print("|---|---|---|---|---|---|---|")
    groups = {
        "all": turns,
        "redis": [r for r in turns if r["store"] == "redis"],
        "sqlite": [r for r in turns if r["store"] == "sqlite"],
        "compacting": [r for r in turns if r.get("compacted")],
        "not compacting": [r for r in turns if not r.get("compacted")],
    }
    for name, picked in groups.items():
        if len(picked) < 2:
            continue
        ms = sorted(r["ms"] for r in picked)
        q = statistics.quantiles(ms, n=100)
        trips = statistics.mean(r["trips"] for r in picked)
        report[name] = {"p50": q[49], "p95": q[94], "p99": q[98], "max": ms[-1], "trips": trips}
        print(
            f"| {name} | {len(ms)} | {q[49]:.1f} | {q[94]:.1f} | {q[98]:.1f} | {ms[-1]:.0f} "
            f"| {trips:.1f} |"
        )
    print(f"checked {args.sessions} sessions: {'all exact' if not wrong else wrong[:3]}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 1 if wrong or failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
