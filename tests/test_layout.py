"""The package's shape: a small kernel at the root, one package per stage, and no import cycle
between files or between packages (imports made only for type checking count too)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from repo_paths import REPO

ARX = REPO / "arex"
ROOT_LIMIT = 10


def _modules() -> dict[str, Path]:
    found = {}
    for path in ARX.rglob("*.py"):
        rel = path.relative_to(ARX.parent)
        if rel.parts[1] == "data":  # package data run in sandboxes, not imported
            continue
        found[".".join(rel.with_suffix("").parts).removesuffix(".__init__")] = path
    return found


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module → the arex modules it imports (a name imported from a package counts as its module if it is one)."""

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "arex":
                targets = [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.split(".")[0] == "arex"]
            else:
                continue
            for target in targets:
                found = resolve(target)
                if found not in (None, name, "arex"):
                    edges[name].add(found)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                out.append(sorted(component))

    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def _package(module: str) -> str:
    """A stage package's name, or a root module's own (each module of the kernel is a node)."""
    parts = module.split(".")
    return parts[1] if (ARX / parts[1]).is_dir() else module


def test_the_root_holds_only_the_kernel():
    root = sorted(p.name for p in ARX.glob("*.py"))
    assert len(root) <= ROOT_LIMIT, root


def test_no_import_cycle_between_files():
    assert _cycles(_imports(_modules())) == []


def test_no_import_cycle_between_packages():
    packages: dict[str, set[str]] = defaultdict(set)
    for a, targets in _imports(_modules()).items():
        packages[_package(a)] |= {_package(b) for b in targets if _package(b) != _package(a)}
    assert _cycles(packages) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _third_party_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


def test_only_the_docker_backend_imports_docker():
    backend = ARX / "sandbox" / "docker"
    outside = [
        str(p.relative_to(ARX))
        for p in _modules().values()
        if "docker" in _third_party_imports(p) and backend not in p.parents
    ]
    assert outside == []
    assert any("docker" in _third_party_imports(p) for p in backend.glob("*.py"))  # the check can see an import


def test_no_code_outside_the_sandbox_asks_which_backend_is_in_use():
    asking = []
    for name, path in _modules().items():
        if name.startswith("arex.sandbox"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare) and any(
                isinstance(c, ast.Constant) and c.value == "docker" for c in [node.left, *node.comparators]
            ):
                asking.append(f"{path.relative_to(ARX)}:{node.lineno}")
    assert asking == []


def test_every_granularity_has_a_schema():
    from arex.dataset.config import GRANULARITIES
    from arex.dataset.schema import ROW_SCHEMAS

    assert set(ROW_SCHEMAS) == set(GRANULARITIES)
