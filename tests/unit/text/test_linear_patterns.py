"""Every regular expression ctxfold runs on message text is linear on adversarial input.

The harness finds the patterns itself: it imports every module of ``ctxfold`` and takes
every compiled pattern held in a module's globals, in a class's attributes, or in a
tuple, list, set or dict there (patterns are never hand-listed). A pattern compiled
inside a function cannot be found that way, so a second test reads every module's
source and allows such a call only where ``_BUILT_AT_RUN_TIME`` says which patterns it
builds (the harness then runs those too) or why it never sees our text.

Each pattern runs (``finditer`` over the whole text: at least as much work as the
``search``, ``match`` or ``sub`` the package calls) on generated inputs: long runs of
separators, word characters, digits, hex, quotes and brackets, runs of two of them in
turn, nested brackets, and the pattern's own literals (read from its parse tree)
repeated, with and without a near-miss tail, and a long run before them. Every pattern
and input runs at 10 KB within a proportional limit (10 ms); the inputs slowest for a
pattern at 10 KB run again at 100 KB, within 100 ms. A pattern whose time grows with
the square of its input (``secret_spans``' keyword pattern took 4.4 s at 10 KB on an
``a-a-a-`` run) fails at 10 KB already. The whole file takes about 35 s on two shared
cores.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields, is_dataclass
from re import _constants as sre_constants  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from types import ModuleType

import ctxfold

SIZE = 100_000  # characters of the full check
PRE_SIZE = 10_000  # characters of the pass every pattern and input runs
LIMIT_S = 0.100  # at SIZE
PRE_LIMIT_S = LIMIT_S * PRE_SIZE / SIZE  # proportional: a linear pattern meets both
WORST = 3  # inputs per pattern run again at SIZE: the slowest at PRE_SIZE
TRIES = 5  # a run over its limit is timed again (the machine is shared): the best counts

#: Patterns that provably never see message text, by ``module:name``, with why. A
#: pattern listed here is not run.
NEVER_ON_TEXT: dict[str, str] = {
    # Checks a table name given in code or a store spec, never a message.
    "ctxfold.storage._sqlite:IDENTIFIER": "table names",
}

#: Functions that compile or run a pattern at run time, by ``module:function``: the
#: patterns each builds (run by the harness beside the ones held in globals), or None
#: with why none is ours to check.
_BUILT_AT_RUN_TIME: dict[str, Callable[[], list[re.Pattern[str]]] | None] = {
    # The codebook's phrase patterns: an escaped literal between fixed look-arounds.
    "ctxfold.text.layers:_boundary_pattern": lambda: _codebook_patterns(),
    # A custom reference extractor's pattern is the caller's own (``register_extractor``);
    # the caller answers for it.
    "ctxfold.references.extractors:_checked": None,
    # Builds ``secrets._SHAPES`` at import: the walk finds each there.
    "ctxfold.text.secrets:_shape": None,
    # Masks a store spec's credentials in a driver's error message (escaped literals):
    # never message text.
    "ctxfold.storage.spec:scrub": None,
    # The identifiers a task names, as escaped literals between fixed look-arounds.
    "ctxfold.text.scoring:goal_names": lambda: _goal_patterns(),
}
_RUNNERS = frozenset(
    {"compile", "search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split"}
)


def _codebook_patterns() -> list[re.Pattern[str]]:
    from ctxfold.text.layers import STATIC_CODEBOOK, _boundary_pattern

    samples = ("aaaaaaaaaaaa", "a-a-a-a-a-a-", "src/app/models/", "key=value", " -- ")
    return [_boundary_pattern(p) for p in (*STATIC_CODEBOOK, *samples)]


def _goal_patterns() -> list[re.Pattern[str]]:
    from ctxfold.text.scoring import goal_names

    tasks = (
        "Find every place that reads `budget_batch` in src/app/config.py",
        "Fix a-a-a-a-a in `aaaaaaaaaaaa` and x.y.z.w, see HAT039 and credit_card_4421486",
        " ".join(f"name_{k} `code {k}` v{k}.py" for k in range(40)),
    )
    return [p for p in map(goal_names, tasks) if p is not None]


def _modules() -> list[ModuleType]:
    """Every module of ctxfold (``__main__`` runs the CLI when imported: it holds no
    pattern, and its source is still read by the run-time test)."""
    names = [m.name for m in pkgutil.walk_packages(ctxfold.__path__, "ctxfold.")]
    return [ctxfold, *(importlib.import_module(n) for n in names if not n.endswith("__main__"))]


def _held(value: object, depth: int = 3) -> Iterator[re.Pattern[str]]:
    """The patterns ``value`` is or holds (in containers ``depth`` deep)."""
    if isinstance(value, re.Pattern):  # a bytes pattern (run on a payload) too
        yield value
    elif depth and isinstance(value, (tuple, list, set, frozenset)):
        for item in value:
            yield from _held(item, depth - 1)
    elif depth and is_dataclass(value) and not isinstance(value, type):
        for field in fields(value):
            yield from _held(getattr(value, field.name), depth - 1)
    elif depth and isinstance(value, dict):
        for key, item in value.items():
            yield from _held(key, depth - 1)
            yield from _held(item, depth - 1)


def found_patterns() -> dict[str, re.Pattern[str]]:
    """``module:name`` of every pattern the package holds at module level (its own
    globals, its classes' attributes, containers of them), each pattern once under the
    first name it is found by, and the patterns built at run time."""
    seen: dict[int, str] = {}
    out: dict[str, re.Pattern[str]] = {}

    def add(name: str, pattern: re.Pattern[str]) -> None:
        if id(pattern) not in seen and name not in NEVER_ON_TEXT:
            seen[id(pattern)] = name
            out[name] = pattern

    for module in _modules():
        for attr, value in sorted(vars(module).items()):
            for k, pattern in enumerate(_held(value)):
                add(f"{module.__name__}:{attr}" + (f"[{k}]" if k else ""), pattern)
            if inspect.isclass(value) and value.__module__ == module.__name__:
                for cattr, cvalue in sorted(vars(value).items()):
                    for k, pattern in enumerate(_held(cvalue)):
                        add(f"{module.__name__}:{attr}.{cattr}" + (f"[{k}]" if k else ""), pattern)
    for site, build in _BUILT_AT_RUN_TIME.items():
        for k, pattern in enumerate(build() if build else ()):
            add(f"{site}()[{k}]", pattern)
    return out


def _literals(pattern: re.Pattern[str]) -> list[str]:
    """The literal runs of ``pattern`` in order, read from its parse tree."""
    out: list[str] = []
    c = sre_constants

    def walk(sub: object) -> None:
        run: list[str] = []
        for op, av in sub:  # type: ignore[attr-defined]
            if op is c.LITERAL:
                run.append(chr(av))
                continue
            if run:
                out.append("".join(run))
                run = []
            if op is c.SUBPATTERN:
                walk(av[3])
            elif op is c.BRANCH:
                for branch in av[1]:
                    walk(branch)
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
                walk(av[2])
            elif op in (c.ASSERT, c.ASSERT_NOT):
                walk(av[1])
            elif op is c.ATOMIC_GROUP:
                walk(av)
        if run:
            out.append("".join(run))

    walk(sre_parse.parse(pattern.pattern, pattern.flags))
    return out


_SEPARATORS = tuple(" -_./:=\n\t,;|\\@#*+$!?&%~^")
_QUOTES = ('"', "'", "`")
_CLASSES = ("a", "A", "aB", "1", "0123456789abcdef", "é", "\u00a0", "\r\n")
_BRACKETS = ("(", "[", "{", "<", ")", "]", "}", ">", "([{<", ">}])", "(a", "<a ", "</a>")
#: A tail that nearly completes an assignment, a header, a key and a block.
_TAIL = " api_key=abcdefghijkl1234 Authorization: Basic dXNlcjpwYXNz -----END"


@dataclass(frozen=True)
class Input:
    """A generated input: ``body`` repeated to the size, then ``tail``; ``lead`` first."""

    label: str
    body: str
    tail: str = ""
    lead: str = ""

    def text(self, size: int) -> str:
        room = size - len(self.tail) - len(self.lead)
        reps = room // len(self.body) + 1
        return self.lead + (self.body * reps)[:room] + self.tail


def inputs(pattern: re.Pattern[str]) -> list[Input]:
    """The adversarial inputs for ``pattern``: runs of every character kind, two kinds
    in turn, nested brackets, and its own literals repeated, each repeat with and
    without a near-miss tail (the reproducer's shape: ``a-`` * n + an assignment)."""
    singles = [*_SEPARATORS, *_QUOTES, *_CLASSES, *_BRACKETS]
    pairs = [w + s for w in ("a", "1", "aB") for s in (*_SEPARATORS, *_QUOTES)]
    pairs += [q + "a" for q in _QUOTES] + ["a" + q + " " for q in _QUOTES]
    out = [Input(repr(u), u) for u in singles]
    out += [Input(repr(p), p) for p in pairs]
    out += [Input(f"{p!r}+tail", p, _TAIL) for p in pairs if p[0] == "a"]
    literals = sorted(set(_literals(pattern)), key=len, reverse=True)[:6]
    skeleton = "".join(_literals(pattern))
    for lit in [*literals, skeleton] if skeleton else literals:
        for body in (lit, lit + "a", lit + " ", lit + "-", lit + "a-", lit + "1\n"):
            out += [Input(f"{body!r}", body), Input(f"{body!r}+tail", body, skeleton or _TAIL)]
        out += [Input(f"{lit!r}+'a'*", "a", lead=lit), Input(f"{lit!r}+' '*", " ", lead=lit)]
        out += [Input(f"'a-'*+{lit!r}", "a-", lit + "a"), Input(f"{lit!r}+'a-'*", "a-", lead=lit)]
    return out


def seconds(pattern: re.Pattern[str], text: str, limit: float) -> float:
    """How long ``finditer`` over ``text`` takes; over ``limit``, the best of ``TRIES``."""
    best = float("inf")
    given: str | bytes = text
    if isinstance(pattern.pattern, bytes):  # a payload: the same text, as its bytes
        given = text.encode("utf-8", "surrogatepass")
    for _ in range(TRIES):
        start = time.perf_counter()
        deque(pattern.finditer(given), maxlen=0)  # type: ignore[arg-type]
        best = min(best, time.perf_counter() - start)
        if best <= limit:
            break
        time.sleep(0.05)  # let a burst of other work pass
    return best


@dataclass(frozen=True)
class Slow:
    """A pattern over its limit on an input of a size."""

    name: str
    pattern: str
    input: str
    size: int
    seconds: float

    def __str__(self) -> str:
        return (
            f"{self.name} ({self.pattern[:80]!r}) took {self.seconds * 1000:.0f} ms "
            f"on {self.input} at {self.size // 1000} KB"
        )


def slow_cases(name: str, pattern: re.Pattern[str]) -> list[Slow]:
    """Where ``pattern`` is over its limit: every input at ``PRE_SIZE`` (stopping at
    the first over it: a quadratic pattern would take minutes at ``SIZE``), then its
    ``WORST`` slowest at ``SIZE``."""
    timed: list[tuple[float, Input]] = []
    for given in inputs(pattern):
        took = seconds(pattern, given.text(PRE_SIZE), PRE_LIMIT_S)
        if took > PRE_LIMIT_S:
            return [Slow(name, pattern.pattern, given.label, PRE_SIZE, took)]
        timed.append((took, given))
    timed.sort(key=lambda t: t[0], reverse=True)
    out = []
    for _, given in timed[:WORST]:
        took = seconds(pattern, given.text(SIZE), LIMIT_S)
        if took > LIMIT_S:
            out.append(Slow(name, pattern.pattern, given.label, SIZE, took))
    return out


def test_the_harness_finds_the_patterns_of_every_family() -> None:
    """The walk reaches patterns in globals, tuples of tuples or of dataclasses, class
    attributes and those built at run time."""
    names = found_patterns()
    for expected in (
        "ctxfold.text.secrets:_ASSIGNED",
        "ctxfold.text.secrets:_SHAPES",  # in a tuple of dataclasses
        "ctxfold.text.primitives:_CANDIDATE",
        "ctxfold.text.adapters:YamlAdapter._kv",  # a class attribute
        "ctxfold.references.extractors:_DEFINITIONS",
        "ctxfold.text.layers:_boundary_pattern()[0]",
        "ctxfold.wire.costs:_PAGE",  # bytes: run on a PDF's decoded payload
    ):
        assert any(n == expected or n.startswith(expected + "[") for n in names), expected
    assert len(names) >= 90


def test_no_pattern_is_compiled_where_the_harness_cannot_see_it() -> None:
    """A pattern compiled or run inside a function is invisible to the walk of globals:
    every such call must be in ``_BUILT_AT_RUN_TIME`` (hoist a fixed pattern to module
    level instead)."""
    unknown = []
    for info in pkgutil.walk_packages(ctxfold.__path__, "ctxfold."):
        spec = importlib.util.find_spec(info.name)
        assert spec is not None and spec.origin is not None
        with open(spec.origin, encoding="utf-8") as source:
            tree = ast.parse(source.read())
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            for node in ast.walk(func):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "re"
                    and node.func.attr in _RUNNERS
                ):
                    site = f"{info.name}:{getattr(func, 'name', '<lambda>')}"
                    if site not in _BUILT_AT_RUN_TIME:
                        unknown.append(f"{site} line {node.lineno}")
    assert not unknown, unknown


def test_every_pattern_is_linear_on_adversarial_input() -> None:
    patterns = found_patterns()
    slow = [case for name, p in sorted(patterns.items()) for case in slow_cases(name, p)]
    assert not slow, "\n".join(map(str, slow))


def test_the_reproducer_takes_linear_time() -> None:
    """Issue 47 item 5: ``secret_spans`` of an ``a-`` run and an assignment, 100 KB."""
    from ctxfold.text.secrets import secret_spans

    text = "a-" * (SIZE // 2) + " api_key=abcdefghijkl1234"
    start = time.perf_counter()
    spans = secret_spans(text)
    took = time.perf_counter() - start
    assert spans == ((SIZE + 9, SIZE + 25, "assigned"),)
    assert took < 4 * LIMIT_S, took
