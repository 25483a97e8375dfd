"""``.ci/check_imports.py``: every import circle is caught, a circle dodged inside a function included; imports
that never run (TYPE_CHECKING) and lazy imports of optional parts (Ray) are not edges."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parent.parent / ".ci" / "check_imports.py"


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_imports", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, source in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    return root


def _cycles(root: Path) -> list[list[str]]:
    checker = _checker()
    return checker.cycles(checker.build_graph(root))  # type: ignore[no-any-return]


def test_a_module_level_circle_is_reported_with_exit_1(tmp_path: Path) -> None:
    root = _package(tmp_path, {"a.py": "from . import b\n", "b.py": "from .a import thing\n"})
    run = subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True, check=False)
    assert run.returncode == 1
    assert run.stdout.strip() == "import circle: pkg.a -> pkg.b -> pkg.a"


def test_a_circle_dodged_inside_a_function_is_reported(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {"a.py": "from .b import helper\n", "b.py": "def helper():\n    from .a import x\n    return x\n"},
    )
    assert _cycles(root) == [["pkg.a", "pkg.b", "pkg.a"]]


def test_type_checking_imports_and_lazy_optional_parts_are_not_edges(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "a.py": "from typing import TYPE_CHECKING\nfrom . import b\nif TYPE_CHECKING:\n    from .b import T\n",
            "b.py": "import typing\nif typing.TYPE_CHECKING:\n    from .a import U\n",
            "engine.py": "from . import _ray\n",
            "_ray.py": "def start():\n    import ray\n    from .engine import x\n",
        },
    )
    # a and b meet only under TYPE_CHECKING; `import ray` inside a function is not an edge. But engine imports
    # the optional module at module level, and _ray imports engine back inside a function: a dodged circle
    assert _cycles(root) == [["pkg._ray", "pkg.engine", "pkg._ray"]]
    # the allowed shape: the optional part imported lazily (inside a function), importing the rest at module level
    lazy = _package(
        tmp_path / "lazy", {"jobs.py": "def run():\n    from ._ray import go\n", "_ray.py": "from . import jobs\n"}
    )
    assert _cycles(lazy) == []


def test_relative_imports_resolve_to_the_right_module(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "sub/__init__.py": "from .inner import x\n",
            "sub/inner.py": "from .. import top\n",
            "top.py": "from .sub import inner\n",
        },
    )
    checker = _checker()
    graph = checker.build_graph(root)
    assert graph["pkg.sub.inner"] == {"pkg.top"}
    assert graph["pkg.top"] == {"pkg.sub.inner"}  # `from .sub import inner` names the submodule
    assert graph["pkg.sub"] == {"pkg.sub.inner"}
    assert checker.cycles(graph) == [["pkg.sub.inner", "pkg.top", "pkg.sub.inner"]]


def test_a_package_init_importing_its_submodules_is_not_a_circle(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {"models/__init__.py": "from ._a import A\n", "models/_a.py": "from ._b import B\n", "models/_b.py": "X = 1\n"},
    )
    assert _cycles(root) == []


def test_the_package_has_no_import_circle() -> None:
    run = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout
    assert "no cycles" in run.stdout
