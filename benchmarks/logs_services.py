"""Running services' output for ``logs_gen``: cluster state and events, request logs,
stack traces in an application log."""

from __future__ import annotations

import json
import random

from logs_world import ENC, NOUNS, VERBS, Output, World, camel, fill, snake, stamp

# ----------------------------------------------------------------------- cluster

CRASHES = [
    ("OOMKilled", 137, "fatal error: runtime: out of memory", "runtime: out of memory"),
    (
        "Error",
        1,
        "panic: runtime error: invalid memory address or nil pointer dereference",
        "nil pointer dereference",
    ),
    ("Error", 1, "Error: connect ECONNREFUSED 10.0.{a}.{b}:5432", "ECONNREFUSED 10.0.{a}.{b}:5432"),
    ("Error", 2, 'FATAL config: required key "{key}" is not set', '"{key}" is not set'),
]


NORMAL = [  # a kubelet's usual events
    "Scheduled   pod/{p}   Successfully assigned {ns}/{p} to node-{n}",
    'Pulled      pod/{p}   Container image "registry/{app}:v{v}" already present',
    "Created     pod/{p}   Created container {app}",
    "Started     pod/{p}   Started container {app}",
    "Killing     pod/{p}   Stopping container {app}",
]


def _pod(rng: random.Random, app: str) -> str:
    chars = "bcdfghjklmnpqrstvwxz2456789"
    return f"{app}-{''.join(rng.choices(chars, k=9))}-{''.join(rng.choices(chars, k=5))}"


def cluster(w: World, tokens: list[int]) -> tuple[str, list[Output]]:
    rng = w.rng
    ns = rng.choice(["prod", "production", "live", "payments", "default"])
    apps = [f"{a}-{rng.choice(['api', 'worker', 'web', 'cron'])}" for a in w.areas]
    bad_app = rng.choice(apps)
    bad = _pod(rng, bad_app)
    pods = [_pod(rng, rng.choice(apps)) for _ in range(rng.randint(60, 200))]
    reason, code, log, cause = rng.choice(CRASHES)
    names = {
        "a": rng.randint(0, 9),
        "b": rng.randint(2, 250),
        "key": f"{rng.choice(NOUNS).upper()}_URL",
    }
    log, cause = log.format(**names), cause.format(**names)
    task = f"{bad_app} keeps restarting in the {ns} namespace. Find out which pod fails and why."
    kinds = ["pods", "events", "describe", "logs"]
    rng.shuffle(kinds)
    outs = []
    for k, budget in enumerate(tokens):
        kind = kinds[k % 4]
        out = Output(f"Let me look at the {kind} in {ns}.", "", [])
        if kind == "pods":
            out.command = "kubectl get pods -A"

            def pod_row() -> str:
                p, age = rng.choice(pods), rng.randint(2, 90)
                return f"{ns:<12}{p:<44}1/1     Running   {rng.randint(0, 3):<10} {age}d"

            out.lines = [
                "NAMESPACE   NAME    READY   STATUS    RESTARTS   AGE",
                *fill(pod_row, budget),
            ]
            restarts, ago, age = rng.randint(5, 40), rng.randint(1, 5), rng.randint(20, 90)
            row = f"{ns:<12}{bad:<44}0/1     CrashLoopBackOff   {restarts} ({ago}m ago)   {age}m"
            out.put(rng, row, [("pod", bad), ("reason", "CrashLoopBackOff")])
        elif kind == "events":
            out.command = f"kubectl get events -n {ns} --sort-by=.lastTimestamp"

            def event() -> str:
                p = rng.choice(pods)
                app, node, v = p.rsplit("-", 2)[0], rng.randint(1, 30), rng.randint(1, 80)
                text = rng.choice(NORMAL).format(ns=ns, p=p, n=node, app=app, v=v)
                return f"{rng.randint(1, 59)}m    Normal    {text}"

            out.lines = [
                "LAST SEEN   TYPE      REASON      OBJECT     MESSAGE",
                *fill(event, budget),
            ]
            row = (
                f"{rng.randint(1, 9)}m    Warning   BackOff     pod/{bad}   "
                f"Back-off restarting failed container {bad_app} in pod {bad}"
            )
            out.put(rng, row, [("pod", bad)])
        elif kind == "describe":
            out.command = f"kubectl describe pods -n {ns} -l app={bad_app}"
            healthy = [_pod(rng, bad_app) for _ in range(3)]
            used = 0
            while used < budget:
                p = rng.choice(healthy)
                block = [
                    f"Name:         {p}",
                    f"Namespace:    {ns}",
                    "Containers:",
                    f"  {bad_app}:",
                    "    State:          Running",
                    "    Ready:          True",
                    "    Restart Count:  0",
                    "Events:",
                ]
                block += [
                    f"  Normal  Pulled  {rng.randint(1, 59)}m  kubelet  Image already present"
                ] * rng.randint(5, 30)
                out.lines += block
                used += ENC.count_text("\n".join(block))
            out.lines += [
                f"Name:         {bad}",
                f"Namespace:    {ns}",
                "Containers:",
                f"  {bad_app}:",
            ]
            out.lines.append("    State:          Waiting")
            out.put(
                rng,
                "      Reason:       CrashLoopBackOff",
                [("reason", "CrashLoopBackOff")],
                len(out.lines),
            )
            out.lines.append("    Last State:     Terminated")
            why = [("reason", reason)] if reason != "Error" else []  # too common a word
            out.put(rng, f"      Reason:       {reason}", why, len(out.lines))
            out.put(
                rng,
                f"      Exit Code:    {code}",
                [("code", f"Exit Code:    {code}")],
                len(out.lines),
            )
        else:
            out.command = f"kubectl logs -n {ns} -l app={bad_app} --previous --tail=-1"

            def info() -> str:
                what = f"{rng.choice(VERBS)} {rng.choice(NOUNS)}"
                return f'{stamp(rng, w.hour)} level=info msg="{what}" id={rng.randint(1000, 99999)}'

            out.lines = fill(info, budget)
            out.put(rng, f"{stamp(rng, w.hour)} {log}", [("reason", cause)], len(out.lines))
        outs.append(out)
    return task, outs


# ------------------------------------------------------------------------ access

EXCEPTIONS = [
    "KeyError('{noun}_{n}_token')",
    "TypeError(\"unsupported operand type(s) for +: 'NoneType' and 'int'\")",
    "ValueError('invalid currency code: X{N}')",
    "AttributeError(\"'NoneType' object has no attribute '{noun}_id'\")",
    "ZeroDivisionError('division by zero')",
    "IndexError('list index out of range')",
]


def _exception(rng: random.Random) -> str:
    noun = rng.choice(NOUNS)
    n, big = rng.randint(1, 999), "".join(rng.choices("ABCDEFGHJKLMNPQRSTUVWXYZ", k=2))
    return rng.choice(EXCEPTIONS).format(noun=noun, n=n, N=big)


def access(w: World, tokens: list[int]) -> tuple[str, list[Output]]:
    rng = w.rng
    style = rng.choice(["logfmt", "json", "plain"])
    routes = [f"/api/v{rng.randint(1, 3)}/{a}/{{}}/{rng.choice(NOUNS)}s" for a in w.areas]
    bad_route = rng.choice(routes)
    where = f"app/{rng.choice(w.files)}.py:{rng.randint(12, 900)}"
    exc = _exception(rng)
    task = (
        f"Users report intermittent 500 errors on {bad_route.split('/')[3]} since this morning. "
        "Look through the API logs and find the root cause."
    )

    def line(level: str, route: str, status: int, extra: str = "") -> str:
        ts, req = stamp(rng, w.hour), f"{rng.getrandbits(48):012x}"
        path, ms = route.format(rng.randint(1, 99999)), rng.randint(2, 900)
        method = rng.choice(["GET", "GET", "GET", "POST", "PUT", "DELETE"])
        if style == "logfmt":
            tail = f' error="{extra}"' if extra else ""
            return (
                f"ts={ts} level={level.lower()} request_id={req} method={method} path={path} "
                f"status={status} duration_ms={ms}{tail}"
            )
        if style == "json":
            fields = {"ts": ts, "level": level, "request_id": req, "method": method}
            fields |= {"path": path, "status": status, "latency_ms": ms}
            return json.dumps(fields | ({"error": extra} if extra else {}))
        return f"{ts} {level:<5} [{req}] {method} {path} {status} {ms}ms" + (
            f" - {extra}" if extra else ""
        )

    def noise() -> str:
        if rng.random() < 0.03:
            return line("WARN", rng.choice(routes), 200, f"slow upstream {rng.choice(w.areas)}")
        return line("INFO", rng.choice(routes), rng.choice([200, 200, 200, 201, 204, 304, 404]))

    outs = []
    for k, budget in enumerate(tokens):
        out = Output(
            "Let me read the API logs." if k == 0 else "Let me look at another pod's logs.",
            f"kubectl logs deploy/{w.project} --since=6h" + (f" -c api-{k}" if k else ""),
            fill(noise, budget),
        )
        for _ in range(1 if k == 0 else rng.randint(0, 2)):
            root = f"ROOT CAUSE: {exc} at {where}"
            text = line("ERROR", bad_route, 500, root)
            shown = json.dumps(exc)[1:-1] if style == "json" else exc  # as the line has it
            out.put(rng, text, [("exception", shown), ("location", where)])
        outs.append(out)
    return task, outs


# ------------------------------------------------------------------------ traces


def traces(w: World, tokens: list[int]) -> tuple[str, list[Output]]:
    rng = w.rng
    java = rng.random() < 0.5
    job = f"{rng.choice(VERBS)}-{rng.choice(w.areas)}"
    task = (
        f"The nightly {job} job failed. Find the exception in the worker logs and where it "
        "was raised."
    )

    def info() -> str:
        area, verb = rng.choice(w.areas), rng.choice(VERBS)
        logger = (
            f"com.{w.org}.{area}.{camel(rng.choice(NOUNS))}Service"
            if java
            else f"{area}.{rng.choice(NOUNS)}"
        )
        batch, rows, ms = rng.randint(1, 9999), rng.randint(1, 500), rng.randint(3, 2000)
        worker = f"[worker-{rng.randint(1, 16)}]"
        what = f"{verb} batch {batch} ({rows} rows) in {ms}ms"
        return f"{stamp(rng, w.hour)} INFO  {worker} {logger}: {what}"

    outs = []
    for k, budget in enumerate(tokens):
        out = Output(
            "Let me read the worker logs." if k == 0 else "Let me read the earlier log file too.",
            f"tail -n 20000 /var/log/{job}/worker.log" + (f".{k}" if k else ""),
            fill(info, budget),
        )
        if k == 0 or rng.random() < 0.4:
            _trace(w, out, java)
        outs.append(out)
    return task, outs


def _trace(w: World, out: Output, java: bool) -> None:
    rng = w.rng
    at = rng.randint(0, len(out.lines))
    frames = rng.sample(w.files, min(len(w.files), rng.randint(2, 4)))
    if java:
        exc = rng.choice(
            [
                "java.lang.NullPointerException",
                "java.lang.IllegalStateException",
                "java.lang.NumberFormatException",
                "java.util.NoSuchElementException",
            ]
        )
        head = [(f"{stamp(rng, w.hour)} ERROR [worker-{rng.randint(1, 16)}] job failed", [])]
        head.append(
            (f"{exc}: {rng.choice(VERBS)} {rng.choice(NOUNS)} failed", [("exception", exc)])
        )
        lib = [
            "org.springframework.batch.core.step.AbstractStep.execute(AbstractStep.java:208)",
            "java.base/java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1136)",
        ]
        for f in frames:
            area, noun = f.split("/")
            cls, n = f"{camel(noun)}Service", rng.randint(20, 700)
            where, method = f"{cls}.java:{n}", camel(snake(rng))
            head.append(
                (
                    f"\tat com.{w.org}.{area}.{cls}.{method[0].lower()}{method[1:]}({where})",
                    [("location", where)],
                )
            )
        head += [(f"\tat {x}", []) for x in lib]
    else:
        exc = _exception(rng)
        name = exc.split("(")[0]
        head = [(f"{stamp(rng, w.hour)} ERROR [worker-{rng.randint(1, 16)}] job failed", [])]
        head.append(("Traceback (most recent call last):", []))
        for f in frames:
            where = f'File "/srv/app/{f}.py", line {rng.randint(20, 700)}'
            head.append((f"  {where}, in {snake(rng)}", [("location", where)]))
            head.append((f"    {snake(rng)}(row)", []))
        head.append(
            (
                f"{name}: {exc[len(name) + 1 : -1]}",
                [("exception", f"{name}: {exc[len(name) + 1 : -1]}")],
            )
        )
    for j, (text, ids) in enumerate(head):
        out.put(rng, text, ids or None, at + j)
