"""Every public import path keeps working: the names the README, the docs and the CHANGELOG show, and every public
module's names as they were before the domain layout (issue 35), from the same paths.

``data/public_api_before_layout.json`` is the snapshot, taken from the package at 9030168 (the last commit of the
flat layout): each public module (no ``_`` segment in its path) and its ``__all__`` (for ``testing.pytest_plugin``,
which has none, the fixtures it defines). A name may move between private modules freely; it may not leave the
path a user imported it from.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT: dict[str, list[str]] = json.loads(
    (Path(__file__).parent / "data" / "public_api_before_layout.json").read_text(encoding="utf-8")
)
DOTTED = re.compile(r"\bhealth_async(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
FROM_IMPORT = re.compile(r"^\s*from (health_async(?:\.\w+)*) import (\([\w,\s]+\)|[\w, ]+)$", re.MULTILINE)
#: The README's examples import the package as ``ha`` (``import health_async as ha``): ``ha.HealthClient``.
AS_HA = re.compile(r"\bha\.([A-Za-z]\w*)")


#: Pages whose ``health_async.*`` names are not Python names: the telemetry guide lists OpenTelemetry attribute and
#: metric names in the library's namespace (``health_async.webhook.outcome``).
NOT_PYTHON = frozenset({"telemetry.md"})


def _documents() -> list[Path]:
    docs = [path for path in sorted((ROOT / "docs").rglob("*.md")) if path.name not in NOT_PYTHON]
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *docs]


def _public(dotted: str) -> bool:
    return not any(part.startswith("_") for part in dotted.split("."))


def named_in_documents() -> set[str]:
    """Every public dotted name the documents show (``health_async.x.Y``, ``from health_async.x import Y``)."""
    names: set[str] = set()
    for path in _documents():
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8")
        names.update(match.group(0) for match in DOTTED.finditer(text))
        for module, imported in FROM_IMPORT.findall(text):
            listed = imported.strip("()").replace("\n", " ").split(",")
            names.update(f"{module}.{name.split(' as ')[0].strip()}" for name in listed if name.strip())
        names.update(f"health_async.{name}" for name in AS_HA.findall(text))
    return {name for name in names if _public(name)}


#: Optional extras a public name may be provided lazily from (``health_async.ingest.RayEngine`` imports Ray when
#: asked for): where the extra is not installed (a run on another Python without Ray), the name still exists.
EXTRAS = frozenset({"ray", "pyarrow", "redis"})


def _attribute(owner: object, name: str) -> object:
    try:
        return getattr(owner, name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] in EXTRAS:
            return exc  # provided lazily, from an extra not installed here
        raise


def resolve(dotted: str) -> object:
    """The object a dotted name names: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            found = _attribute(found, attribute)
        return found
    raise ModuleNotFoundError(dotted)


NAMED = sorted(named_in_documents())


def test_the_documents_name_many_public_paths() -> None:
    # the README, the guides and the CHANGELOG show the package's main paths: the check below is not vacuous
    assert len(NAMED) > 40
    assert {"health_async.errors", "health_async.webhooks.verify", "health_async.testing"} <= set(NAMED)


@pytest.mark.parametrize("dotted", NAMED)
def test_a_name_the_documents_show_still_resolves(dotted: str) -> None:
    resolve(dotted)


@pytest.mark.parametrize(("module", "names"), sorted(SNAPSHOT.items()), ids=sorted(SNAPSHOT))
def test_every_public_name_of_before_the_layout_is_still_there(module: str, names: list[str]) -> None:
    imported: ModuleType = importlib.import_module(module)
    missing = []
    for name in names:
        try:
            _attribute(imported, name)
        except AttributeError:
            missing.append(name)
    assert not missing, f"from {module} import ... no longer finds {missing}"
    exported = getattr(imported, "__all__", None)
    if exported is not None:  # star imports keep giving the same names
        assert set(names) <= set(exported), sorted(set(names) - set(exported))


def test_the_resolver_fails_on_a_name_that_is_gone() -> None:
    with pytest.raises(AttributeError):
        resolve("health_async.errors.NoSuchError")
    with pytest.raises(ModuleNotFoundError):
        resolve("no_such_package.thing")
