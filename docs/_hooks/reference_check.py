"""MkDocs hook: the API reference documents every public module and every public name, or the build fails.

Two checks, both read the package's source statically (``ast``; the package is never imported):

1. Every *public module* is declared in :data:`REFERENCE` (or in :data:`NOT_IN_REFERENCE`, with the reason), unless
   every name of its ``__all__`` is in the ``__all__`` of a declared module (a domain package that groups names
   documented elsewhere, or an old import path kept as re-exports: their names have their page). A public
   module is a module of the package that defines ``__all__`` and has no ``_``-prefixed part in its dotted name
   (which leaves out ``_cli``, ``__main__`` and every private module); ``tests`` is not part of the package. So a new
   public module cannot be forgotten. Checked when the config is loaded, before anything is rendered.
2. Every name of each declared module's ``__all__`` has an anchor in the built page that declares the module: the
   heading id mkdocstrings gives it, ``id="health_async.models.Document"``, and the module itself
   ``id="health_async.models"``. A name that a declared module re-exports (``from .abdm import Abdm`` in
   ``health_async/resources/__init__.py``, with ``Abdm`` in its ``__all__``) may be documented there instead
   (``id="health_async.resources.Abdm"``). Checked after the build, on the HTML mkdocstrings produced, so a name
   dropped by a filter, by ``show_if_no_docstring`` or by a griffe failure to follow a re-export is caught too.

``__all__`` may be a list or tuple of strings, ``[*_documents_all, ...]`` with ``from ._documents import __all__ as
_documents_all``, ``a + b`` of those, and may be extended with ``__all__ += [...]``/``.extend``/``.append``.

Adding a public module is one line in :data:`REFERENCE`. When its page does not exist under ``docs/`` a page with the
``:::`` directive(s) is generated; a page missing from the nav is added to the "API reference" section.

Broken cross-references (``[Foo][health_async.Foo]``, and those in signatures) are mkdocs-autorefs' job: it warns,
and ``strict: true`` turns the warning into a failed build.
"""

from __future__ import annotations

import ast
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

PACKAGE = "health_async"

#: One line per API reference page: the page (under ``docs/``) and the modules it documents with ``:::``.
REFERENCE: list[tuple[str, list[str]]] = [
    ("reference/client.md", ["health_async"]),
    ("reference/errors.md", ["health_async.errors"]),
    ("reference/models.md", ["health_async.models"]),
    (
        "reference/resources.md",
        [
            "health_async.resources",
            "health_async.resources.abdm.abdm",
            "health_async.resources.abdm.consents",
            "health_async.resources.abha.abha",
            "health_async.resources.records.cases",
            "health_async.resources.records.documents",
            "health_async.resources.patients.directory",
            "health_async.resources.patients.profiles",
            "health_async.resources.webhooks.subscriptions",
        ],
    ),
    ("reference/webhooks.md", ["health_async.webhooks"]),
    ("reference/fhir.md", ["health_async.fhir"]),
    ("reference/redis.md", ["health_async.redis"]),
    ("reference/testing.md", ["health_async.testing", "health_async.testing.pytest_plugin"]),
    ("reference/ingest.md", ["health_async.ingest"]),
    ("reference/jwe.md", ["health_async.jwe"]),
    ("reference/abdm_crypto.md", ["health_async.abdm_crypto"]),
]

#: Public modules deliberately left out of the API reference, with the reason.
NOT_IN_REFERENCE: dict[str, str] = {
    "health_async.cli": "the `health-async` command's entry point; the command is documented in guides/command-line.md",
}

#: The nav section that generated or missing reference pages are appended to.
NAV_SECTION = "API reference"

log = logging.getLogger(f"mkdocs.hooks.{__name__}")

_ID = re.compile(r"""\sid=["']([^"']+)["']""")


# ----------------------------------------------------------------------------------------------- static reading


@dataclass
class _Module:
    name: str
    path: Path
    tree: ast.Module
    all_: list[str] | None = None  # None: the module has no __all__
    #: (source module, source name) -> local name, for every ``from X import a as b`` at the top level
    imports: dict[tuple[str, str], str] = field(default_factory=dict)
    star_imports: list[str] = field(default_factory=list)


class _Package:
    """The package's modules, read with ``ast``; ``__all__`` evaluated statically."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.modules: dict[str, _Module] = {}
        for path in sorted((root / PACKAGE).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            except SyntaxError as exc:
                raise PluginError(f"reference check: cannot parse {path}: {exc}") from exc
            self.modules[name] = _Module(name, path, tree)
        for module in self.modules.values():
            self._read_imports(module)
        self._evaluating: set[str] = set()
        for module in self.modules.values():
            self._all(module)

    def _absolute(self, module: _Module, node: ast.ImportFrom) -> str:
        if node.level == 0:
            return node.module or ""
        package = module.name if module.path.name == "__init__.py" else module.name.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        return f"{package}.{node.module}" if node.module else package

    def _read_imports(self, module: _Module) -> None:
        for node in module.tree.body:
            if isinstance(node, ast.ImportFrom):
                source = self._absolute(module, node)
                for alias in node.names:
                    if alias.name == "*":
                        module.star_imports.append(source)
                    else:
                        module.imports[(source, alias.name)] = alias.asname or alias.name

    def _imported_all(self, module: _Module, local: str) -> list[str]:
        """The ``__all__`` of the module that ``local`` was imported from as ``__all__``."""
        for (source, name), as_name in module.imports.items():
            if name == "__all__" and as_name == local:
                if source not in self.modules:
                    raise PluginError(f"reference check: {module.name} imports __all__ from unknown module {source}")
                found = self._all(self.modules[source])
                return list(found or [])
        raise PluginError(f"reference check: cannot evaluate {local!r} in {module.name}.__all__ statically")

    def _strings(self, module: _Module, node: ast.expr) -> list[str]:
        if isinstance(node, (ast.List, ast.Tuple)):
            out: list[str] = []
            for element in node.elts:
                if isinstance(element, ast.Constant) and isinstance(element.value, str):
                    out.append(element.value)
                elif isinstance(element, ast.Starred):
                    out.extend(self._strings(module, element.value))
                else:
                    break
            else:
                return out
        elif isinstance(node, ast.Name):
            return self._imported_all(module, node.id)
        elif isinstance(node, ast.Attribute) and node.attr == "__all__" and isinstance(node.value, ast.Name):
            # ``submodule.__all__`` after ``from . import submodule``
            for (source, name), as_name in module.imports.items():
                if as_name == node.value.id and f"{source}.{name}" in self.modules:
                    return list(self._all(self.modules[f"{source}.{name}"]) or [])
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self._strings(module, node.left) + self._strings(module, node.right)
        raise PluginError(
            f"reference check: cannot evaluate {module.name}.__all__ statically at "
            f"{module.path}:{node.lineno}: {ast.unparse(node)}"
        )

    def _all(self, module: _Module) -> list[str] | None:
        if module.all_ is not None or module.name in self._evaluating:
            return module.all_
        self._evaluating.add(module.name)
        names: list[str] | None = None
        for node in module.tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                names = self._strings(module, node.value)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "__all__":
                names = self._strings(module, node.value) if node.value is not None else []
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == "__all__":
                names = (names or []) + self._strings(module, node.value)
            elif (
                isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute)
                and isinstance(node.value.func.value, ast.Name)
                and node.value.func.value.id == "__all__"
                and node.value.func.attr in ("extend", "append")
                and len(node.value.args) == 1
            ):
                arg = node.value.args[0]
                added = [arg] if node.value.func.attr == "append" else None
                names = (names or []) + (
                    self._strings(module, ast.List(elts=added, ctx=ast.Load())) if added else self._strings(module, arg)
                )
        self._evaluating.discard(module.name)
        module.all_ = names
        return names

    def public_modules(self) -> list[str]:
        return sorted(
            name
            for name, module in self.modules.items()
            if module.all_ is not None and not any(part.startswith("_") for part in name.split("."))
        )

    def reexports(self, declared: list[str]) -> dict[tuple[str, str], list[str]]:
        """``(source module, name)`` -> the anchors (``P.local``) under which a declared module ``P`` re-exports it."""
        out: dict[tuple[str, str], list[str]] = {}
        for package in declared:
            module = self.modules.get(package)
            if module is None or not module.all_:
                continue
            exported = set(module.all_)
            for (source, name), local in module.imports.items():
                if local in exported:
                    out.setdefault((source, name), []).append(f"{package}.{local}")
            for source in module.star_imports:
                for name in self.modules[source].all_ or [] if source in self.modules else []:
                    if name in exported:
                        out.setdefault((source, name), []).append(f"{package}.{name}")
        return out


# ------------------------------------------------------------------------------------------------------- state


class _State:
    package: _Package
    #: page (src_uri) -> the anchor ids found in its built HTML
    anchors: dict[str, set[str]]
    generated: set[str]


_state = _State()


def _declared() -> dict[str, str]:
    """module -> page"""
    out: dict[str, str] = {}
    for page, modules in REFERENCE:
        for module in modules:
            if module in out:
                raise PluginError(f"reference check: {module} is declared on two pages: {out[module]} and {page}")
            out[module] = page
    return out


def _nav_pages(nav: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(nav, str):
        found.add(nav)
    elif isinstance(nav, list):
        for item in nav:
            found |= _nav_pages(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            found |= _nav_pages(value)
    return found


# ------------------------------------------------------------------------------------------------------- events


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    root = Path(config.config_file_path).resolve().parent
    package = _Package(root)
    declared = _declared()
    _state.package = package
    _state.anchors = {}
    _state.generated = set()

    problems: list[str] = []
    documented = {
        name for module in declared if module in package.modules for name in package.modules[module].all_ or ()
    }
    for module in package.public_modules():
        if module in declared or module in NOT_IN_REFERENCE:
            continue
        # a module that only re-exports names documented elsewhere (a domain package such as health_async.models.abha,
        # an old import path such as health_async.resources.documents) needs no page of its own
        if set(package.modules[module].all_ or ()) <= documented:
            continue
        if True:
            problems.append(
                f"public module {module} (it defines __all__) is not in the API reference: add it to REFERENCE in "
                f"{Path(__file__).relative_to(root) if Path(__file__).is_relative_to(root) else __file__} "
                "(or, with the reason, to NOT_IN_REFERENCE)"
            )
    for module in declared:
        if module not in package.modules:
            problems.append(f"{module} is declared in REFERENCE but there is no such module under {root / PACKAGE}")
    for module in NOT_IN_REFERENCE:
        if module in declared:
            problems.append(f"{module} is both in REFERENCE and in NOT_IN_REFERENCE")
    if problems:
        raise PluginError("API reference check failed:\n  " + "\n  ".join(problems))

    # A reference page missing from the nav goes at the end of the API reference section.
    if config.nav is not None:
        in_nav = _nav_pages(config.nav)
        missing = [page for page, _ in REFERENCE if page not in in_nav]
        if missing:
            section = next((item for item in config.nav if isinstance(item, dict) and NAV_SECTION in item), None)
            if section is None:
                section = {NAV_SECTION: []}
                config.nav.append(section)
            section[NAV_SECTION].extend(missing)
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for page, modules in REFERENCE:
        if files.get_file_from_path(page) is None:
            title = modules[0]
            content = f"# `{title}`\n\nThe API reference of `{title}`.\n\n" + "\n\n".join(f"::: {m}" for m in modules)
            files.append(File.generated(config, page, content=content + "\n"))
            _state.generated.add(page)
            log.info("reference check: generated %s (no docs/%s)", page, page)
    return files


def on_post_page(output: str, page: Page, config: MkDocsConfig) -> str:  # noqa: ARG001 (mkdocs passes it by name)
    _state.anchors[page.file.src_uri] = set(_ID.findall(output))
    return output


def on_post_build(config: MkDocsConfig) -> None:  # noqa: ARG001 (mkdocs passes it by name)
    package = _state.package
    declared = _declared()
    reexports = package.reexports(list(declared))
    all_anchors = set().union(*_state.anchors.values()) if _state.anchors else set()
    problems: list[str] = []
    checked = 0
    for module, page in declared.items():
        anchors = _state.anchors.get(page)
        if anchors is None:
            problems.append(f"{page} (declared for {module}) was not built")
            continue
        if module not in anchors:
            problems.append(f"{page} has no `::: {module}` (no anchor id={module!r})")
            continue
        for name in package.modules[module].all_ or []:
            checked += 1
            anchor = f"{module}.{name}"
            if anchor in anchors:
                continue
            elsewhere = [a for a in reexports.get((module, name), []) if a in all_anchors and a != anchor]
            if elsewhere:
                continue
            problems.append(
                f"{anchor} (in {module}.__all__) has no anchor id={anchor!r} in {page}: it was filtered out "
                "(filters in mkdocs.yml or on the page), or griffe did not follow its re-export"
            )
    if problems:
        raise PluginError(
            f"API reference check failed ({len(problems)} problem(s)):\n  " + "\n  ".join(sorted(problems))
        )
    log.info("reference check: %d public names of %d modules have an anchor", checked, len(declared))
