"""Check the package's import graph: layers only point down, and no import circle.

Usage: ``python .ci/check_imports.py [PACKAGE_DIR]`` (default: ``health_async`` beside ``.ci/``). Standard library
only; the package is parsed with ``ast``, never imported. Prints one line per problem and exits 1, or prints
``import graph: N modules, L layers, no cycles, no upward imports`` and exits 0.

Edges: every import of a package module counts, at module level, inside functions, classes and methods, and under
``if TYPE_CHECKING:`` (such an import never runs, but it still ties the importer to what it names). Each edge records
how it is made: at module level, in a function, or under TYPE_CHECKING. The one import that is not an edge is a lazy
import of an optional heavy part (:data:`LAZY_OPTIONAL`, or a private module ending in :data:`LAZY_SUFFIXES`) made
inside a function: the base install stays light. ``from P import n`` is an edge to ``P.n`` when that is a module of
the package, else to ``P``. Importing ``a.b.c`` from outside ``a.b`` runs ``a/b/__init__`` first, so it is also an
edge to ``a.b`` (a circle through a package's ``__init__`` is a circle); a module of the package itself is not
(a package's ``__init__`` re-exporting its own submodules is the normal shape of a package), nor is the root.

Layers: :data:`LAYERS` declares, once, the order of the package's layers, lowest first. Each layer names its modules
by ``fnmatch`` patterns over dotted names relative to the package root (``"models"``, ``"models.*"``,
``"resources.*"``); the package's own ``__init__`` is ``"__init__"``. A module belongs to the first layer with a
matching pattern, and a module matching none is a problem: a new module has to be placed. An import may point down
or stay within its layer; an import pointing up is a ``layer violation``, whatever its kind.

Exceptions: :data:`ALLOWED` names each allowed upward edge as ``(importer pattern, imported pattern, kind, reason)``.
It matches only edges of its kind, so the same import made at module level is still a violation. An allowed edge is
left out of both the layer check and the circle check. An exception that matches no edge is reported as stale, so
the list cannot rot.

Circles: checked over every edge (TYPE_CHECKING included) except the allowed ones; one line per circle
(``a -> b -> a``), a hop made only in a function or under TYPE_CHECKING marked after its target
(``a -> b [TYPE_CHECKING] -> a``).
"""

from __future__ import annotations

import ast
import itertools
import sys
from collections import deque
from collections.abc import Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import NamedTuple

#: Kinds of edge: how an import is made.
MODULE_LEVEL = "module level"
IN_FUNCTION = "in a function"
TYPE_CHECKING = "TYPE_CHECKING"
KINDS = (MODULE_LEVEL, IN_FUNCTION, TYPE_CHECKING)
_HOW = {MODULE_LEVEL: "at module level", IN_FUNCTION: "in a function", TYPE_CHECKING: "under TYPE_CHECKING"}

#: Name of the package's own ``__init__`` in :data:`LAYERS` and :data:`ALLOWED` patterns.
ROOT = "__init__"

#: The layers of the package, lowest first: ``(name, module patterns)``. A module may import its own layer and
#: those below it, never one above.
LAYERS: list[tuple[str, list[str]]] = [
    (
        "foundation",
        [
            "_version",
            "_constants",
            "_json",
            "_tasks",
            "_progress",
            "_routes",
            "_limits",
            "errors",
            "_logging",
            # OpenTelemetry (an optional extra, imported lazily): the only module importing it
            "_telemetry",
        ],
    ),
    (
        "input checks",
        [
            "_config",
            "_aadhaar",
            "_abha_input",
            "_registry_input",
            "_mobile",
            "_checks",
            "_files",
            "_items",
            "_seal",
            "_retry",
            "_wire",
        ],
    ),
    ("crypto", ["jwe", "abdm_crypto", "_jwe_stream"]),
    ("models", ["models", "models.*", "_plain"]),
    # FHIR documents: built, validated and read offline (the resources validate what they push)
    ("fhir", ["fhir", "fhir.*"]),
    # how a webhook is verified and remembered (what it is, WebhookEvent, is a model)
    ("webhook events", ["webhooks._signature", "webhooks._seen"]),
    ("transport", ["_session", "_auth", "_bulk"]),
    ("resources", ["resources", "resources.*"]),
    ("client", ["_client", ROOT]),
    # the receivers answer ABDM's webhooks with a client's calls
    ("receivers", ["webhooks", "webhooks.*"]),
    ("applications", ["ingest", "ingest.*", "testing", "testing.*", "_demo", "_cli", "_cli.*", "cli", "__main__"]),
    # shared state for several workers (an optional extra): implements the client's SharedLimiter and the
    # receivers' SeenStore, and is imported by neither
    ("shared state", ["redis"]),
]

#: The named exceptions to the layer order: ``(importer pattern, imported pattern, kind, reason)``.
ALLOWED: list[tuple[str, str, str, str]] = [
    (
        "resources.*",
        "_client",
        TYPE_CHECKING,
        "a resource's type of its client: the client builds the resources and hands them itself",
    ),
]

#: Optional heavy parts the package may import lazily inside a function (the base install stays light).
LAZY_OPTIONAL = ("ray",)
#: Private modules of the package that hold an optional part (imported only when asked for).
LAZY_SUFFIXES = ("._ray",)


class Edge(NamedTuple):
    """One import of a package module by another: full dotted names, how it is made, and its line."""

    importer: str
    imported: str
    kind: str
    line: int


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def relative_name(package: str, module: str) -> str:
    """A module's name in the patterns: dotted, relative to the package root; the root itself is ``__init__``."""
    return ROOT if module == package else module.removeprefix(package + ".")


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Imports(ast.NodeVisitor):
    """Collects the imports of one module: ``(dotted name or relative spec, level, kind, line)``."""

    def __init__(self) -> None:
        self.found: list[tuple[str, int, str, int]] = []
        self._functions = 0
        self._type_checking = 0

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self.visit(node.test)
            self._type_checking += 1
            for child in node.body:
                self.visit(child)
            self._type_checking -= 1
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        self._functions += 1
        self.generic_visit(node)
        self._functions -= 1

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function
    visit_Lambda = _function

    def _kind(self) -> str:
        if self._type_checking:
            return TYPE_CHECKING
        return IN_FUNCTION if self._functions else MODULE_LEVEL

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append((alias.name, 0, self._kind(), node.lineno))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        for alias in node.names:
            self.found.append((f"{base}\0{alias.name}", node.level, self._kind(), node.lineno))


def _files(root: Path) -> dict[str, Path]:
    return {module_name(root, path): path for path in sorted(root.rglob("*.py"))}


def import_edges(root: Path) -> list[Edge]:
    """Every import of a package module by another, sorted, except lazy imports of optional parts."""
    files = _files(root)
    packages = {name for name, path in files.items() if path.name == "__init__.py"}
    edges: set[Edge] = set()
    for name, path in files.items():
        collector = _Imports()
        collector.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        here = name if name in packages else name.rpartition(".")[0]
        for spec, level, kind, line in collector.found:
            for target in _targets(spec, level, here, files):
                if kind == IN_FUNCTION and _lazy_optional(target):
                    continue
                if target in files and target != name:
                    edges.add(Edge(name, target, kind, line))
                    # importing a.b.c runs a/b/__init__ first: an edge to each package on the way that does not
                    # hold the importer (a module of the package itself is imported by its __init__, not through it)
                    for package in _enclosing(target, packages):
                        if not (name == package or name.startswith(package + ".")):
                            edges.add(Edge(name, package, kind, line))
    return sorted(edges)


def _enclosing(module: str, packages: set[str]) -> list[str]:
    """The packages a module sits in, below the root package (``a.b.c`` -> ``a.b``; ``a`` itself is every module's)."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(2, len(parts)) if ".".join(parts[:i]) in packages]


def build_graph(root: Path, edges: Sequence[Edge] | None = None) -> dict[str, set[str]]:
    """The package's import graph: module -> the package modules it imports (of ``edges``, default all)."""
    graph: dict[str, set[str]] = {name: set() for name in _files(root)}
    for edge in import_edges(root) if edges is None else edges:
        graph[edge.importer].add(edge.imported)
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


def layer_of(relative: str, layers: Sequence[tuple[str, Sequence[str]]]) -> int | None:
    """The index of the first layer with a pattern matching ``relative`` (a name as in the patterns), or None."""
    for position, (_, patterns) in enumerate(layers):
        if any(fnmatchcase(relative, pattern) for pattern in patterns):
            return position
    return None


def _allowed(edge: Edge, package: str, exception: tuple[str, str, str, str]) -> bool:
    importer, imported, kind, _ = exception
    return (
        edge.kind == kind
        and fnmatchcase(relative_name(package, edge.importer), importer)
        and fnmatchcase(relative_name(package, edge.imported), imported)
    )


def check(
    root: Path,
    layers: Sequence[tuple[str, Sequence[str]]] = LAYERS,
    allowed: Sequence[tuple[str, str, str, str]] = ALLOWED,
) -> list[str]:
    """The problems of the package at ``root``, one line each (none: the graph is fine)."""
    root = root.resolve()
    package = root.name
    problems: list[str] = []
    for importer, imported, kind, _ in allowed:
        if kind not in KINDS:
            problems.append(f"bad exception: ({importer!r}, {imported!r}, {kind!r}): kind is not one of {KINDS}")
    modules = sorted(_files(root))
    layer = {name: layer_of(relative_name(package, name), layers) for name in modules}
    problems += [
        f"module in no layer: {name} (as {relative_name(package, name)!r} in the patterns)"
        for name in modules
        if layer[name] is None
    ]

    edges = import_edges(root)
    used = [False] * len(allowed)
    kept: list[Edge] = []
    for edge in edges:
        matches = [n for n, exception in enumerate(allowed) if _allowed(edge, package, exception)]
        for n in matches:
            used[n] = True
        if not matches:
            kept.append(edge)

    lines: dict[tuple[str, str, str], list[int]] = {}
    for edge in kept:
        lines.setdefault((edge.importer, edge.imported, edge.kind), []).append(edge.line)
    for (importer, imported, kind), at in lines.items():
        low, high = layer[importer], layer[imported]
        if low is not None and high is not None and high > low:
            problems.append(
                f"layer violation: {importer} (layer {layers[low][0]}) imports {imported} (layer {layers[high][0]})"
                f" {_HOW[kind]} (line {', '.join(map(str, sorted(set(at))))})"
            )

    kinds: dict[tuple[str, str], set[str]] = {}
    for edge in kept:
        kinds.setdefault((edge.importer, edge.imported), set()).add(edge.kind)
    for cycle in cycles(build_graph(root, kept)):
        text = cycle[0]
        for importer, imported in itertools.pairwise(cycle):
            how = kinds[importer, imported]
            text += f" -> {imported}" + ("" if MODULE_LEVEL in how else f" [{', '.join(sorted(how))}]")
        problems.append("import circle: " + text)

    for exception, seen in zip(allowed, used, strict=True):
        if not seen:
            importer, imported, kind, reason = exception
            problems.append(f"stale exception: ({importer!r}, {imported!r}, {kind!r}) matches no import ({reason})")
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Shortest circles through each strongly connected group of two or more modules (or a self-import): one
    through the group's first module, then one through each module not yet on a circle reported, so that a group
    holding several circles shows each of its modules on one."""
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
    found: list[list[str]] = []
    for group in sorted(groups):
        members = set(group)
        covered: set[str] = set()
        for node in group:
            if node not in covered:
                found.append(_shortest_cycle(graph, members, node))
                covered.update(found[-1])
    return found


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


def main(
    argv: list[str],
    layers: Sequence[tuple[str, Sequence[str]]] = LAYERS,
    allowed: Sequence[tuple[str, str, str, str]] = ALLOWED,
) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / "health_async"
    problems = check(root, layers, allowed)
    for line in problems:
        print(line)
    if problems:
        return 1
    print(f"import graph: {len(_files(root.resolve()))} modules, {len(layers)} layers, no cycles, no upward imports")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
