"""ARCHITECTURE.md stays true: every package of ``health_async/`` is named there and everything it names exists; its
layer table is the one ``.ci/check_imports.py`` checks, in the same order, and names every top-level module."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
PACKAGE = ROOT / "health_async"
#: Paths the page names in backticks: ``health_async/...``, ``tests/...``, ``docs/...``, ``.ci/...``.
NAMED_PATH = re.compile(r"`((?:health_async|tests|docs|\.ci)/[^`\s<]*)`")


def _packages() -> set[str]:
    return {path.parent.relative_to(ROOT).as_posix() + "/" for path in PACKAGE.rglob("__init__.py")}


def _layer_rows() -> list[tuple[str, str]]:
    """``(layer, modules cell)`` of each row of the page's layer table."""
    section = PAGE.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| layer")]
    return [(cells[1].strip(), cells[2]) for cells in (row.split("|") for row in rows)]


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_imports", ROOT / ".ci" / "check_imports.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_package_is_named() -> None:
    named = {match for match in NAMED_PATH.findall(PAGE) if match.endswith("/")}
    missing = sorted(_packages() - named)
    assert not missing, f"ARCHITECTURE.md does not name these packages: {missing}"
    assert "health_async/resources/abha/" in named  # the check reads the page's own spelling


def test_everything_named_exists() -> None:
    gone = sorted(path for path in set(NAMED_PATH.findall(PAGE)) if not (ROOT / path.rstrip("/")).exists())
    assert not gone, f"ARCHITECTURE.md names paths that do not exist: {gone}"


def test_the_layer_table_is_the_checked_one() -> None:
    declared = [name for name, _ in _checker().LAYERS]
    assert [layer for layer, _ in _layer_rows()] == declared


def test_every_top_level_module_has_a_layer_on_the_page() -> None:
    cells = " ".join(cell for _, cell in _layer_rows())
    named = set(re.findall(r"`([\w./]+?)(?:\.py|/)?`", cells))
    modules = {path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    packages = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").exists()}
    missing = sorted((modules | packages) - named)
    assert not missing, f"the layer table of ARCHITECTURE.md does not place: {missing}"


def test_the_checks_fail_on_a_page_that_is_out_of_date(tmp_path: Path) -> None:
    # the same reading, on a page that lost one package line and names one that is gone
    page = PAGE.replace("`health_async/models/abha/`", "`health_async/models/abha_gone/`")
    named = {match for match in NAMED_PATH.findall(page) if match.endswith("/")}
    assert "health_async/models/abha/" in _packages() - named
    assert not (ROOT / "health_async/models/abha_gone").exists()
