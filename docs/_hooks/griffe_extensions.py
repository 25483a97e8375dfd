"""Griffe extensions for the API reference; they change how the package's source is read, never the source.

``SharedParams``: a Google-style ``Args:`` entry that documents several parameters at once.

The package's docstrings write ``ray_address, workers: for engine="ray".`` for parameters that share one
description. Griffe's Google parser takes that as one parameter named ``"ray_address, workers"`` and warns that it
is not in the signature (which fails ``mkdocs build --strict``). Rather than turn that warning off (it is what
catches a documented parameter that was renamed or removed), this extension rewrites such an entry, before the
docstring is parsed, into one entry per name with the same description. Every name is then still checked against
the signature. The package's source is not changed.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
from typing import Any

import griffe

_SECTION = re.compile(r"^(\s*)(Args|Arguments|Parameters|Keyword Args|Keyword Arguments|Other Parameters):\s*$")
_SHARED = re.compile(r"^(\s+)([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)+)\s*:(\s.*|)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def split_shared_params(text: str) -> str:
    lines = text.split("\n")
    out: list[str] = []
    section_indent: int | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        header = _SECTION.match(line)
        if header:
            section_indent = len(header.group(1))
            out.append(line)
            i += 1
            continue
        if section_indent is not None and line.strip() and _indent(line) <= section_indent:
            section_indent = None  # the section ended
        shared = _SHARED.match(line) if section_indent is not None else None
        if shared is None or _indent(line) <= section_indent:  # type: ignore[operator]
            out.append(line)
            i += 1
            continue
        indent, names, rest = len(shared.group(1)), shared.group(2), shared.group(3)
        continuation: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() and _indent(lines[i]) > indent:
            continuation.append(lines[i])
            i += 1
        for name in (n.strip() for n in names.split(",")):
            out.append(f"{shared.group(1)}{name}:{rest}")
            out.extend(continuation)
    return "\n".join(out)


# ----------------------------------------------------------------------------------------------- Sphinx roles

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|data|mod|exc|obj|const):`(~?)([^`]+?)`")
_TITLED = re.compile(r"^(.*?)\s*<[^<>]+>$", re.DOTALL)  # :meth:`text <target>`


def _role_text(match: re.Match[str]) -> str:
    target = match.group(2).strip()
    titled = _TITLED.match(target)
    if titled:
        return f"`{titled.group(1)}`"
    return f"`{target.rsplit('.', 1)[-1] if match.group(1) else target}`"


class SphinxRoles(griffe.Extension):
    """``:class:`~health_async.errors.EncryptionError``` (the docstrings' Sphinx roles) is shown as the code
    ``EncryptionError`` instead of the literal text ``:class:`` followed by the path. Only the text changes: the
    roles do not become links (many name private modules, which the reference does not document)."""

    def _fix(self, obj: griffe.Object) -> None:
        if not obj.is_alias and obj.docstring is not None and ":`" in obj.docstring.value:
            obj.docstring.value = _ROLE.sub(_role_text, obj.docstring.value)

    # Both events: on_object is not run for the root package; on_instance runs before some docstrings are attached.
    def on_instance(self, *, obj: griffe.Object, **_: Any) -> None:
        self._fix(obj)

    def on_object(self, *, obj: griffe.Object, **_: Any) -> None:
        self._fix(obj)


class SharedParams(griffe.Extension):
    """Splits ``a, b: description`` into ``a: description`` and ``b: description`` (see the module)."""

    def _fix(self, obj: griffe.Object) -> None:
        if obj.docstring is not None and "," in obj.docstring.value:
            obj.docstring.value = split_shared_params(obj.docstring.value)

    def on_object(self, *, obj: griffe.Object, **_: Any) -> None:
        if not obj.is_alias:
            self._fix(obj)


# ------------------------------------------------------------------------------------- "#:" attribute comments


@functools.cache
def _source_lines(path: str) -> list[str]:
    return Path(path).read_text(encoding="utf-8").splitlines()


class CommentDocstrings(griffe.Extension):
    """``#: text`` comments above a module or class attribute (Sphinx's convention, used by the package) become the
    attribute's docstring when it has none; griffe reads only a string literal after the attribute."""

    def on_attribute_instance(self, *, attr: griffe.Attribute, **_: Any) -> None:
        if attr.docstring is not None or attr.lineno is None:
            return
        try:
            filepath = attr.filepath
        except griffe.BuiltinModuleError:
            return
        if not isinstance(filepath, Path):
            return
        lines = _source_lines(str(filepath))
        comment: list[str] = []
        index = attr.lineno - 2  # the line above the assignment
        while index >= 0 and lines[index].lstrip().startswith("#:"):
            comment.insert(0, lines[index].lstrip()[2:].strip())
            index -= 1
        if not comment:
            same_line = lines[attr.lineno - 1].partition("  #: ")[2].strip()
            if same_line:
                comment = [same_line]
        if comment:
            attr.docstring = griffe.Docstring(
                _ROLE.sub(_role_text, "\n".join(comment)), lineno=index + 2, endlineno=attr.lineno - 1, parent=attr
            )


# ------------------------------------------------------------------------------- lazy exports (module __getattr__)


class LazyExports(griffe.Extension):
    """A name a module exports lazily, ``def __getattr__(name): if name == "RayEngine": from ._ray import RayEngine``
    (so that importing the module does not import ``ray``), is made an alias of its target, as a plain import would
    be; the reference then documents it with the module's other public names."""

    def on_module_members(self, *, node: ast.AST | griffe.ObjectNode, mod: griffe.Module, **_: Any) -> None:
        if not isinstance(node, ast.Module):
            return
        getattr_ = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__getattr__"), None)
        if getattr_ is None:
            return
        package = mod.path if mod.is_init_module else mod.path.rpartition(".")[0]
        for imp in ast.walk(getattr_):
            if not isinstance(imp, ast.ImportFrom):
                continue
            base = package
            for _level in range(max(imp.level - 1, 0)):
                base = base.rpartition(".")[0]
            source = (f"{base}.{imp.module}" if imp.module else base) if imp.level else (imp.module or "")
            for alias in imp.names:
                name = alias.asname or alias.name
                if alias.name != "*" and name not in mod.members:
                    mod.set_member(name, griffe.Alias(name, f"{source}.{alias.name}", lineno=imp.lineno, parent=mod))
