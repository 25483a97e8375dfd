"""Fail on any import circle inside the package, including one dodged by an import inside a function.

Usage: ``python .ci/check_imports.py [PACKAGE_DIR]`` (default: ``health_async`` beside ``.ci/``). Standard library
only; the package is parsed with ``ast``, never imported. Prints one line per circle (``a -> b -> a``) and exits
1, or prints ``import graph: N modules, no cycles`` and exits 0.

Rules: every import counts, at module level and inside functions, classes and methods, except those under
``if TYPE_CHECKING:`` (they never run) and lazy imports of optional heavy parts (:data:`LAZY_OPTIONAL`) made inside
a function. ``from P import n`` is an edge to ``P.n`` when that is a module of the package, else to ``P``. The
implicit import of a parent package (importing ``a.b.c`` runs ``a/__init__``) is not an edge: a package's
``__init__`` re-exporting its own submodules is the normal shape of a package.
"""

from __future__ import annotations

import ast
import sys
from collections import deque
from pathlib import Path

#: Optional heavy parts the package may import lazily inside a function (the base install stays light).
LAZY_OPTIONAL = ("ray",)
#: Private modules of the package that hold an optional part (imported only when asked for).
LAZY_SUFFIXES = ("._ray",)


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Imports(ast.NodeVisitor):
    """Collects ``(target, in_function)`` pairs of one module, skipping TYPE_CHECKING blocks."""

    def __init__(self) -> None:
        self.found: list[tuple[str, int, bool]] = []  # (dotted name or relative spec, level, in function)
        self._depth = 0

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function
    visit_Lambda = _function

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append((alias.name, 0, self._depth > 0))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        for alias in node.names:
            self.found.append((f"{base}\0{alias.name}", node.level, self._depth > 0))


def build_graph(root: Path) -> dict[str, set[str]]:
    """The package's import graph: module -> the package modules it imports."""
    files = {module_name(root, path): path for path in sorted(root.rglob("*.py"))}
    packages = {name for name, path in files.items() if path.name == "__init__.py"}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        collector = _Imports()
        collector.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        here = name if name in packages else name.rpartition(".")[0]
        for spec, level, in_function in collector.found:
            for target in _targets(spec, level, here, files):
                if in_function and _lazy_optional(target):
                    continue
                if target in files and target != name:
                    graph[name].add(target)
    return graph


def _targets(spec: str, level: int, here: str, files: dict[str, Path]) -> list[str]:
    if "\0" not in spec:  # import a.b.c
        return [spec]
    module, _, imported = spec.partition("\0")
    if level:
        anchor = here.split(".")
        anchor = anchor[: len(anchor) - (level - 1)] if level > 1 else anchor
        base = ".".join([*anchor, module] if module else anchor)
    else:
        base = module
    submodule = f"{base}.{imported}"
    return [submodule if submodule in files else base]


def _lazy_optional(target: str) -> bool:
    return target.split(".")[0] in LAZY_OPTIONAL or target.endswith(LAZY_SUFFIXES)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest circle through each strongly connected group of two or more modules (or a self-import)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0

    def connect(node: str) -> None:  # Tarjan, iterative over the edges of one node at a time
        nonlocal counter
        work = [(node, iter(sorted(graph[node])))]
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        while work:
            current, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[current] = min(low[current], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[current])
                if low[current] == index[current]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == current:
                            break
                    if len(group) > 1 or current in graph[current]:
                        groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return [_shortest_cycle(graph, set(group), group[0]) for group in sorted(groups)]


def _shortest_cycle(graph: dict[str, set[str]], group: set[str], start: str) -> list[str]:
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph[node] & group):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [start, *reversed(path[:-1]), start] if node != start else [start, start]
            if nxt not in came_from:
                came_from[nxt] = node
                queue.append(nxt)
    return [start, start]


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / "health_async"
    graph = build_graph(root.resolve())
    found = cycles(graph)
    for cycle in found:
        print("import circle: " + " -> ".join(cycle))
    if found:
        return 1
    print(f"import graph: {len(graph)} modules, no cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
