"""The package's shape: imports point one way (no cycles, a family never imports a
family above it) and no module takes a private name from another family.

The import graph is read from the source (every import, lazy ones inside functions
included; those under ``if TYPE_CHECKING:`` left out, since they never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import ctxfold

ROOT = Path(ctxfold.__file__).parent

#: The families, bottom first: a module may import its own family and those below it.
LAYERS: list[set[str]] = [
    {
        "exceptions",
        "_state",
        "_registry",
        "_json",
        "_column",
        "messages",
        "formats",
        "wire",
        "validity",
        "tokens",
    }
    | {"hooks"},
    {"result"},
    {"units"},
    {"contract"},
    {"text"},
    {"storage"},
    {"models", "references"},
    {"reversible"},
    {"recall"},
    {"pipeline"},
    {"strategies"},
    {"rendering", "session"},
    {"_api", "cli", "report", "__main__", "testing", "__init__"},
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def family(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """``(module, names)`` for every import in the file that runs."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: list[tuple[str, list[str]]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking_only(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                if target == "ctxfold" or target.startswith("ctxfold."):
                    names = [a.name for a in child.names]
                    found.append((target, names))
            elif isinstance(child, ast.Import):
                found.extend((a.name, []) for a in child.names if a.name.startswith("ctxfold"))
            visit(child)

    visit(tree)
    return found


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in ROOT.rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for m, path in modules.items():
        for target, names in imports(path):
            for name in names or [""]:
                sub = f"{target}.{name}" if name else target
                edges[m].add(sub if sub in modules else target)
    return edges


def test_the_import_graph_has_no_cycles():
    edges = graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(edges.get(m, ())):
            if n not in edges or n == m:
                continue
            if state.get(n) == 1:
                cycle = [*stack[stack.index(n) :], n]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if n not in state:
                walk(n)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            walk(m)


def test_imports_point_down_the_layers():
    rank = {name: k for k, layer in enumerate(LAYERS) for name in layer}
    wrong = []
    for m, targets in graph().items():
        for t in targets:
            if rank[family(t)] > rank[family(m)]:
                wrong.append(f"{m} imports {t}")
    assert not wrong, "imports that point up:\n" + "\n".join(sorted(wrong))


def test_no_module_takes_a_private_name_from_another_family():
    wrong = []
    for path in ROOT.rglob("*.py"):
        m = module_name(path)
        for target, names in imports(path):
            if family(target) == family(m):
                continue
            private_module = any(p.startswith("_") for p in target.split(".")[2:])
            private_names = [n for n in names if n.startswith("_") and not n.endswith("__")]
            if private_module or private_names:
                wrong.append(f"{m}: from {target} import {', '.join(names)}")
    assert not wrong, "\n".join(sorted(wrong))


def test_every_family_says_what_it_is_for():
    for init in ROOT.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc) > 60, f"{init.parent.name}/__init__.py needs a docstring"


def test_the_top_level_is_small_and_every_name_is_public():
    assert 25 <= len(ctxfold.__all__) <= 45
    assert all(hasattr(ctxfold, name) for name in ctxfold.__all__)
