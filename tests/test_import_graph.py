"""``.ci/check_imports.py``: layers only point down and no import circle. Every import counts, at module level, in a
function and under TYPE_CHECKING, except lazy imports of optional parts (Ray) inside a function; named exceptions
are honoured only for their kind, and one matching nothing is stale.

These tests run the checker on small temporary packages with their own layers; the real package is checked by a
separate CI step (``python .ci/check_imports.py``)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / ".ci" / "check_imports.py"

#: Layers of the temporary packages, lowest first.
LAYERS = [
    ("low", ["low", "low_*"]),
    ("mid", ["mid", "sub", "sub.*"]),
    ("high", ["high", "__init__"]),
]

#: Runs the checker's ``main`` with the layers and exceptions given as JSON: argv is script, package, layers, allowed.
_RUN_MAIN = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("check_imports", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
sys.exit(module.main(["check_imports.py", sys.argv[2]], json.loads(sys.argv[3]), json.loads(sys.argv[4])))
"""


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


def _check(
    root: Path,
    layers: list[tuple[str, list[str]]] = LAYERS,
    allowed: list[tuple[str, str, str, str]] | None = None,
) -> list[str]:
    return _checker().check(root, layers, allowed or [])  # type: ignore[no-any-return]


def _run(
    root: Path,
    layers: list[tuple[str, list[str]]] = LAYERS,
    allowed: list[tuple[str, str, str, str]] | None = None,
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-c", _RUN_MAIN, str(SCRIPT), str(root), json.dumps(layers), json.dumps(allowed or [])]
    return subprocess.run(argv, capture_output=True, text=True, check=False)


def test_a_module_level_circle_is_reported_with_exit_1(tmp_path: Path) -> None:
    root = _package(tmp_path, {"mid.py": "from . import sub\n", "sub.py": "from .mid import thing\n"})
    run = _run(root)
    assert run.returncode == 1
    assert run.stdout.strip() == "import circle: pkg.mid -> pkg.sub -> pkg.mid"


def test_a_circle_dodged_inside_a_function_is_reported(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {"a.py": "from .b import helper\n", "b.py": "def helper():\n    from .a import x\n    return x\n"},
    )
    assert _cycles(root) == [["pkg.a", "pkg.b", "pkg.a"]]


def test_type_checking_imports_are_edges_and_lazy_optional_parts_are_not(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "a.py": "from typing import TYPE_CHECKING\nfrom . import b\nif TYPE_CHECKING:\n    from .b import T\n",
            "b.py": "import typing\nif typing.TYPE_CHECKING:\n    from .a import U\n",
            "engine.py": "from . import _ray\n",
            "_ray.py": "def start():\n    import ray\n    from .engine import x\n",
        },
    )
    # a and b meet only under TYPE_CHECKING on the way back: still a circle. `import ray` inside a function is not
    # an edge. engine imports the optional module at module level, and _ray imports engine back in a function
    assert _cycles(root) == [["pkg._ray", "pkg.engine", "pkg._ray"], ["pkg.a", "pkg.b", "pkg.a"]]
    # the allowed shape: the optional part imported lazily (inside a function), importing the rest at module level
    lazy = _package(
        tmp_path / "lazy", {"jobs.py": "def run():\n    from ._ray import go\n", "_ray.py": "from . import jobs\n"}
    )
    assert _cycles(lazy) == []


def test_each_edge_records_how_it_is_made(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "a.py": """\
                from typing import TYPE_CHECKING
                from . import b
                if TYPE_CHECKING:
                    from .c import C
                else:
                    from . import d
                class K:
                    from . import e
                def f():
                    from . import c
                    if TYPE_CHECKING:
                        from . import e
            """,
            **{f"{name}.py": "" for name in "bcde"},
        },
    )
    checker = _checker()
    edges = {(edge.importer, edge.imported, edge.kind, edge.line) for edge in checker.import_edges(root)}
    assert edges == {
        ("pkg.a", "pkg.b", checker.MODULE_LEVEL, 2),
        ("pkg.a", "pkg.c", checker.IN_FUNCTION, 10),
        ("pkg.a", "pkg.c", checker.TYPE_CHECKING, 4),
        ("pkg.a", "pkg.d", checker.MODULE_LEVEL, 6),
        ("pkg.a", "pkg.e", checker.MODULE_LEVEL, 8),
        ("pkg.a", "pkg.e", checker.TYPE_CHECKING, 12),
    }


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
    # `from .sub import inner` names the submodule, and runs sub/__init__ on the way
    assert graph["pkg.top"] == {"pkg.sub", "pkg.sub.inner"}
    assert graph["pkg.sub"] == {"pkg.sub.inner"}
    assert checker.cycles(graph) == [["pkg.sub", "pkg.sub.inner", "pkg.top", "pkg.sub"]]


def test_a_package_init_importing_its_submodules_is_not_a_circle(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {"models/__init__.py": "from ._a import A\n", "models/_a.py": "from ._b import B\n", "models/_b.py": "X = 1\n"},
    )
    assert _cycles(root) == []


def test_a_circle_through_a_package_init_is_reported(tmp_path: Path) -> None:
    # importing hooks._core from outside hooks runs hooks/__init__, which imports _recv, which imports res.thing
    # back: a real circle at run time, whichever submodule res.thing names
    root = _package(
        tmp_path,
        {
            "hooks/__init__.py": "from ._recv import x\n",
            "hooks/_core.py": "y = 1\n",
            "hooks/_recv.py": "from ..res.thing import z\nx = 1\n",
            "res/__init__.py": "",
            "res/thing.py": "from ..hooks._core import y\nz = 1\n",
        },
    )
    assert _cycles(root) == [["pkg.hooks", "pkg.hooks._recv", "pkg.res.thing", "pkg.hooks"]]
    # the same import from inside the package is no circle: its __init__ is already running
    inside = _package(
        tmp_path / "inside",
        {
            "hooks/__init__.py": "from ._recv import x\n",
            "hooks/_core.py": "y = 1\n",
            "hooks/_recv.py": "from ._core import y\nx = 1\n",
        },
    )
    assert _cycles(inside) == []


def test_a_group_of_circles_shows_each_module_on_one(tmp_path: Path) -> None:
    # one strongly connected group, two circles sharing hub: both are reported, not just the first one
    root = _package(
        tmp_path,
        {"hub.py": "from . import x, y\n", "x.py": "from . import hub\n", "y.py": "from . import hub\n"},
    )
    assert _cycles(root) == [["pkg.hub", "pkg.x", "pkg.hub"], ["pkg.y", "pkg.hub", "pkg.y"]]


@pytest.mark.parametrize(
    ("source", "how"),
    [
        ("from . import high\n", "at module level (line 1)"),
        ("def f():\n    from .high import x\n", "in a function (line 2)"),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .high import X\n",
            "under TYPE_CHECKING (line 3)",
        ),
    ],
)
def test_an_upward_import_is_reported_whatever_its_kind(tmp_path: Path, source: str, how: str) -> None:
    root = _package(tmp_path, {"low.py": source, "high.py": ""})
    assert _check(root) == [f"layer violation: pkg.low (layer low) imports pkg.high (layer high) {how}"]


def test_downward_imports_and_imports_within_a_layer_are_fine(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "from .high import run\n",
            "high.py": "from . import mid, low\n",
            "mid.py": "import typing\nfrom . import low\nif typing.TYPE_CHECKING:\n    from .sub import S\n",
            "sub/__init__.py": "from .part import P\n",
            "sub/part.py": "def f():\n    from .. import low_extra\n",
            "low.py": "from . import low_extra\n",
            "low_extra.py": "",
        },
    )
    assert _check(root) == []


def test_patterns_are_relative_globs_and_the_first_matching_layer_wins(tmp_path: Path) -> None:
    root = _package(tmp_path, {"sub/__init__.py": "", "sub/deep.py": "from .. import low\n", "low.py": ""})
    checker = _checker()
    assert checker.layer_of("sub.deep", LAYERS) == 1
    assert checker.layer_of("__init__", LAYERS) == 2  # the package itself
    assert checker.layer_of("low_x", [("a", ["low_*"]), ("b", ["low_x"])]) == 0
    # the same module placed in the lowest layer by an earlier pattern now points up
    layers = [("base", ["sub.deep"]), *LAYERS]
    assert _check(root, layers) == [
        "layer violation: pkg.sub.deep (layer base) imports pkg.low (layer low) at module level (line 1)"
    ]


def test_a_module_in_no_layer_is_reported(tmp_path: Path) -> None:
    root = _package(tmp_path, {"low.py": "", "stray.py": "from . import low\n", "sub/__init__.py": ""})
    assert _check(root, [("low", ["low"]), ("top", ["__init__", "sub"])]) == [
        "module in no layer: pkg.stray (as 'stray' in the patterns)"
    ]


RESOURCE_BACK_REFERENCE = (
    "sub.*",
    "high",
    "TYPE_CHECKING",
    "a resource's type of its client: the client builds the resources and hands them itself",
)


def test_an_allowed_exception_is_honoured_only_for_its_kind(tmp_path: Path) -> None:
    files = {
        "high.py": "from .sub import thing\n",
        "sub/__init__.py": "",
        "sub/thing.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..high import Client\n",
    }
    root = _package(tmp_path / "typing_only", files)
    # allowed: neither a layer violation nor part of a circle
    assert _check(root, allowed=[RESOURCE_BACK_REFERENCE]) == []
    assert _check(root) == [
        "layer violation: pkg.sub.thing (layer mid) imports pkg.high (layer high) under TYPE_CHECKING (line 3)",
        "import circle: pkg.high -> pkg.sub.thing -> pkg.high [TYPE_CHECKING]",
    ]
    # the same edge at module level (or in a function) is still a violation, and the exception is then stale
    module_level = _package(tmp_path / "module_level", {**files, "sub/thing.py": "from ..high import Client\n"})
    assert _check(module_level, allowed=[RESOURCE_BACK_REFERENCE]) == [
        "layer violation: pkg.sub.thing (layer mid) imports pkg.high (layer high) at module level (line 1)",
        "import circle: pkg.high -> pkg.sub.thing -> pkg.high",
        f"stale exception: ('sub.*', 'high', 'TYPE_CHECKING') matches no import ({RESOURCE_BACK_REFERENCE[3]})",
    ]


def test_a_stale_or_malformed_exception_is_reported(tmp_path: Path) -> None:
    root = _package(tmp_path, {"low.py": "", "high.py": "from . import low\n"})
    stale = ("low", "high", "TYPE_CHECKING", "gone")
    assert _check(root, allowed=[stale]) == [
        "stale exception: ('low', 'high', 'TYPE_CHECKING') matches no import (gone)"
    ]
    # a kind that is not one of the three never matches: reported, and stale too
    assert _check(root, allowed=[("high", "low", "module", "typo")]) == [
        "bad exception: ('high', 'low', 'module'): kind is not one of"
        " ('module level', 'in a function', 'TYPE_CHECKING')",
        "stale exception: ('high', 'low', 'module') matches no import (typo)",
    ]


def test_a_type_checking_only_circle_is_reported(tmp_path: Path) -> None:
    guarded = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import {}\n"
    root = _package(tmp_path, {"low.py": guarded.format("low_x"), "low_x.py": guarded.format("low")})
    assert _check(root) == ["import circle: pkg.low -> pkg.low_x [TYPE_CHECKING] -> pkg.low [TYPE_CHECKING]"]


def test_lazy_optional_parts_are_still_not_edges(tmp_path: Path) -> None:
    # a low module starting a high optional part lazily, Ray imported in a function: no edge, so no violation
    lazy = {"low.py": "def run():\n    import ray\n    from .sub import _ray\n", "sub/_ray.py": "from .. import low\n"}
    assert _check(_package(tmp_path / "lazy", lazy)) == []
    # imported at module level (or under TYPE_CHECKING) it is an edge like any other
    eager = {**lazy, "low.py": "from .sub import _ray\n"}
    assert _check(_package(tmp_path / "eager", eager)) == [
        "layer violation: pkg.low (layer low) imports pkg.sub._ray (layer mid) at module level (line 1)",
        "import circle: pkg.low -> pkg.sub._ray -> pkg.low",
    ]


def test_exit_codes_and_output_lines(tmp_path: Path) -> None:
    clean = _package(tmp_path / "clean", {"low.py": "", "mid.py": "from . import low\n"})
    run = _run(clean)
    assert (run.returncode, run.stdout) == (0, "import graph: 3 modules, 3 layers, no cycles, no upward imports\n")
    broken = _package(
        tmp_path / "broken", {"low.py": "def f():\n    from . import mid\n", "mid.py": "from . import low\n"}
    )
    run = _run(broken, allowed=[("low", "high", "TYPE_CHECKING", "no longer needed")])
    assert run.returncode == 1
    assert run.stdout.splitlines() == [
        "layer violation: pkg.low (layer low) imports pkg.mid (layer mid) in a function (line 2)",
        "import circle: pkg.low -> pkg.mid [in a function] -> pkg.low",
        "stale exception: ('low', 'high', 'TYPE_CHECKING') matches no import (no longer needed)",
    ]


def test_the_script_checks_its_own_declaration_on_the_package_given(tmp_path: Path) -> None:
    # run as CI runs it, with the declared layers: a module no pattern names has to be placed
    root = _package(tmp_path, {"zz_placed_in_no_layer_of_any_declaration.py": ""})
    run = subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True, check=False)
    assert run.returncode == 1
    line = "module in no layer: pkg.zz_placed_in_no_layer_of_any_declaration (as"
    assert any(out.startswith(line) for out in run.stdout.splitlines()), run.stdout
