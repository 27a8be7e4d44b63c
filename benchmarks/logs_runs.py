"""Developer tools' output for ``logs_gen``: test runs, compiler output, code search."""

from __future__ import annotations

from logs_world import ENC, NOUNS, Output, World, camel, fill, snake

# ------------------------------------------------------------------------- tests


def tests(w: World, tokens: list[int]) -> tuple[str, list[Output]]:
    rng = w.rng
    style = rng.choice(["pytest", "unittest", "go"])
    cases = [
        (f, f"{snake(rng)}", rng.choice(["", "eur", "usd", "empty", "2"]))
        for f in w.files
        for _ in range(rng.randint(4, 9))
    ]
    cases = list(dict.fromkeys(cases))
    failing = rng.sample(cases, rng.randint(1, 3))
    passing = [c for c in cases if c not in failing]
    task = (
        f"CI is red on {w.project}. Run the tests, find which ones fail and why, "
        "then propose a fix."
    )
    outs = []
    for k, budget in enumerate(tokens):
        scope = "the whole suite" if k == 0 else "the suite again to see if it is flaky"
        out = Output(f"Let me run {scope}.", "", [])
        fails = failing if k == 0 or rng.random() < 0.6 else []
        if style == "go":
            _go_run(w, out, passing, fails, budget)
        else:
            _py_run(w, out, passing, fails, budget, style == "pytest")
        outs.append(out)
    return task, outs


def _py_id(c: tuple[str, str, str], pytest: bool) -> str:
    area, noun = c[0].split("/")
    if pytest:
        return f"tests/{area}/test_{noun}.py::test_{c[1]}" + (f"[{c[2]}]" if c[2] else "")
    return f"tests.{area}.test_{noun}.{camel(noun)}Tests.test_{c[1]}" + (f"_{c[2]}" if c[2] else "")


def _py_run(w: World, out: Output, passing: list, fails: list, budget: int, pytest: bool) -> None:
    rng = w.rng
    out.command = "python -m pytest -v tests/" if pytest else "python -m unittest -v"

    def row(c: tuple[str, str, str], ok: bool) -> str:
        if pytest:
            return f"{_py_id(c, True)} {'PASSED' if ok else 'FAILED'} [{rng.randint(0, 99):3d}%]"
        name = _py_id(c, False)
        return f"{name.rsplit('.', 1)[1]} ({name}) ... {'ok' if ok else 'FAIL'}"

    out.lines = fill(lambda: row(rng.choice(passing), True), budget)
    ran = len(out.lines)
    for c in fails:
        out.put(rng, row(c, False), [("test", _py_id(c, pytest))])
    for c in fails:
        got, want, n = rng.randint(10, 9999), rng.randint(10, 9999), rng.randint(20, 480)
        area, noun = c[0].split("/")
        path = f"tests/{area}/test_{noun}.py"
        if pytest:
            out.lines += [
                "",
                f"_____ test_{c[1]} _____",
                f"    def test_{c[1]}(client):",
                f"        result = {snake(rng)}(client)",
                "        assert result.total == expected",
            ]
            out.put(
                rng,
                f"E       assert {got} == {want}",
                [("assertion", f"{got} == {want}")],
                len(out.lines),
            )
            out.put(
                rng, f"{path}:{n}: AssertionError", [("location", f"{path}:{n}")], len(out.lines)
            )
        else:
            out.lines += ["=" * 70, f"FAIL: {row(c, False)[:-9]}", "-" * 70]
            out.lines.append("Traceback (most recent call last):")
            where = f'File "/app/{path}", line {n}'
            out.put(rng, f"  {where}, in test_{c[1]}", [("location", where)], len(out.lines))
            out.lines.append(f"    self.assertEqual(result.total, {want})")
            out.put(
                rng,
                f"AssertionError: {got} != {want}",
                [("assertion", f"{got} != {want}")],
                len(out.lines),
            )
    out.lines.append(f"== {len(fails)} failed, {ran} passed in {rng.uniform(20, 300):.2f}s ==")


def _go_run(w: World, out: Output, passing: list, fails: list, budget: int) -> None:
    rng = w.rng
    out.command = "go test -v ./..."
    mod = f"github.com/{w.org}/{w.project}/internal"

    def name(c: tuple[str, str, str]) -> str:
        return f"Test{camel(c[1])}" + (f"/{c[2]}" if c[2] else "")

    def line() -> str:
        return f"--- PASS: {name(rng.choice(passing))} ({rng.randint(0, 90) / 100:.2f}s)"

    out.lines = fill(line, budget)
    for c in fails:
        n, got, want = rng.randint(20, 480), rng.randint(10, 999), rng.randint(10, 999)
        at = rng.randint(0, len(out.lines))
        file = f"{c[0].split('/')[1]}_test.go"
        pkg = f"{mod}/{c[0].split('/')[0]}"
        out.put(
            rng, f"--- FAIL: {name(c)} ({rng.randint(1, 90) / 100:.2f}s)", [("test", name(c))], at
        )
        ids = [("location", f"{file}:{n}"), ("assertion", f"total = {got}, want {want}")]
        out.put(rng, f"    {file}:{n}: total = {got}, want {want}", ids, at + 1)
        out.put(rng, f"FAIL\t{pkg}\t{rng.uniform(0, 3):.3f}s", [("module", pkg)], at + 2)


# ---------------------------------------------------------------------- compiler


def compiler(w: World, tokens: list[int]) -> tuple[str, list[Output]]:
    rng = w.rng
    lang = rng.choice(["c", "rust", "ts"])
    ext = {"c": "c", "rust": "rs", "ts": "ts"}[lang]
    tool = {"c": "make -k", "rust": "cargo build", "ts": "npx tsc --noEmit -p ."}[lang]
    task = (
        f"The build of {w.project} is broken. Find the compile errors (ignore the warnings) "
        "and fix them."
    )
    warnings = {
        "c": [
            ("unused variable '{v}'", "-Wunused-variable"),
            ("comparison of integer expressions of different signedness", "-Wsign-compare"),
            ("'{v}' may be used uninitialized", "-Wmaybe-uninitialized"),
        ],
        "rust": [
            ("unused variable: `{v}`", "unused_variables"),
            ("unused import: `{v}`", "unused_imports"),
            ("variable does not need to be mutable", "unused_mut"),
        ],
        "ts": [
            ("'{v}' is declared but its value is never read.", "TS6133"),
            ("'{v}' is deprecated.", "TS6385"),
        ],
    }[lang]
    errors = {
        "c": [
            ("implicit declaration of function '{v}'", "-Wimplicit-function-declaration"),
            ("'{v}' undeclared (first use in this function)", ""),
        ],
        "rust": [
            ("mismatched types", "E0308"),
            ("cannot find value `{v}` in this scope", "E0425"),
            ("borrow of moved value: `{v}`", "E0382"),
        ],
        "ts": [
            (
                "Argument of type 'string' is not assignable to parameter of type 'number'.",
                "TS2345",
            ),
            ("Property '{v}' does not exist on type '{T}'.", "TS2339"),
        ],
    }[lang]

    def diag(kind: str, msg: str, code: str, loc: tuple[str, int, int]) -> list[str]:
        path, n, col = loc
        if lang == "c":
            return [
                f"{path}:{n}:{col}: {kind}: {msg}" + (f" [{code}]" if code else ""),
                f"  {n} |     {snake(rng)}(ctx, {rng.choice(NOUNS)});",
                "      |     ^~~~~~~~",
            ]
        if lang == "rust":
            return [
                f"{kind}[{code}]: {msg}" if kind == "error" else f"{kind}: {msg}",
                f"  --> {path}:{n}:{col}",
                "   |",
                f"{n:<3}|     let {rng.choice(NOUNS)} = {snake(rng)}();",
                "   |         ^^^^",
            ]
        return [f"{path}({n},{col}): {kind} {code}: {msg}"]

    def loc() -> tuple[str, int, int]:
        return f"src/{rng.choice(w.files)}.{ext}", rng.randint(3, 900), rng.randint(1, 60)

    def warning() -> list[str]:
        msg, code = rng.choice(warnings)
        return diag("warning", msg.format(v=rng.choice(NOUNS)), code, loc())

    outs = []
    errs = []
    for _ in range(rng.randint(1, 2)):
        msg, code = rng.choice(errors)
        msg = msg.format(v=snake(rng), T=camel(rng.choice(NOUNS)))
        errs.append((msg, code, loc()))
    for k, budget in enumerate(tokens):
        out = Output(
            "Let me build it." if k == 0 else "Let me build again with a clean tree.", tool, []
        )
        used = 0
        while used < budget:
            block = warning()
            out.lines += block
            used += ENC.count_text("\n".join(block))
        if k == 0 or rng.random() < 0.5:
            for msg, code, (path, n, col) in errs:
                at = rng.randint(0, len(out.lines))
                while at and out.lines[at - 1].startswith(" "):
                    at -= 1  # at the start of a diagnostic
                for j, text in enumerate(diag("error", msg, code, (path, n, col))):
                    ids = [
                        (kind, v)
                        for kind, v in _compiler_ids(lang, path, n, col, code)
                        if v in text
                    ]
                    out.put(rng, text, ids if ids or j == 0 else None, at + j)
        outs.append(out)
    return task, outs


def _compiler_ids(lang: str, path: str, n: int, col: int, code: str) -> list[tuple[str, str]]:
    where = f"{path}({n},{col})" if lang == "ts" else f"{path}:{n}:{col}"
    return [("location", where)] + ([("code", code)] if code else [])


# ------------------------------------------------------------------------ search


def search(w: World, tokens: list[int]) -> tuple[str, list[Output]]:
    rng = w.rng
    first, second = rng.sample(["retry", "timeout", "budget", "limit", "window", "batch", "ttl"], 2)
    term = f"{first}_{second}"
    near = [f"{first}_{x}" for x in ("count", "delay", "max", "ms", "policy")] + [
        f"{x}_{second}" for x in ("max", "min", "default", "total")
    ]
    near = [x for x in near if x != term]
    vimgrep = rng.random() < 0.5
    task = f"Find every place that reads `{term}` and make it configurable in the settings file."
    exts = rng.choice([("py", "    "), ("go", "\t"), ("ts", "  ")])

    def hit(word: str) -> tuple[str, str]:
        path, n = f"src/{rng.choice(w.files)}.{exts[0]}", rng.randint(1, 1500)
        code = rng.choice(
            [
                "{w} = cfg.get('{w}', {n})",
                "if {w} > {n}:",
                "log.debug('{w}=%s', {w})",
                "self.{w} = {w}",
                "return min({w}, {n})",
                "# TODO: tune {w}",
            ]
        ).format(w=word, n=rng.randint(1, 500))
        head = f"{path}:{n}:{rng.randint(1, 40)}:" if vimgrep else f"{path}:{n}:"
        return f"{head}{exts[1]}{code}", head.rstrip(":")

    outs = []
    for k, budget in enumerate(tokens):
        words = f"{first}|{second}" if k == 0 else f"{first}_|_{second}"
        cmd = f'rg --vimgrep -e "{words}" src/' if vimgrep else f'grep -rnE "{words}" src/'
        out = Output(
            "Let me search the code." if k == 0 else "Let me search more narrowly.", cmd, []
        )
        out.lines = fill(lambda: hit(rng.choice(near))[0], budget)
        heads = {x.split(exts[1], 1)[0] for x in out.lines}
        for _ in range(rng.randint(2, 5) if k == 0 or rng.random() < 0.5 else 0):
            text, where = hit(term)
            while where + ":" in heads:  # a noise hit at the same place: another place
                text, where = hit(term)
            out.put(rng, text, [("hit", where)])
        outs.append(out)
    return task, outs
