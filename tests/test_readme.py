"""Every ```python block of the README and of the user guide (``docs/**/*.md``) runs against the fake server, with
warnings as errors.

A block is run as a user would paste it into an async REPL (``python -m asyncio``): top-level ``await`` allowed,
in a fresh namespace holding what the docs say their examples assume (``ha``, ``datetime``, an open ``client``
made by ``ha.HealthClient.from_env()``, ``oid``, a ``document_id`` / ``doc_id`` that exist, ``paths``), with the
``HEALTH_ASYNC_*`` environment pointing at a fake server on 127.0.0.1 and the files the examples name in the
working directory. A block that calls ``asyncio.run`` runs in a thread of its own (its own loop); one that defines
``main()`` without calling it has it run; one that builds an aiohttp ``app`` has it served and its GET routes
asked; one that defines ``test_*`` functions is run by pytest in a subprocess, with the package's pytest plugin.
A block's test id is its file and the line of its fence, e.g. ``docs/guides/abha.md:123``.

A block that is a fragment (a piece of a larger program: the names it uses are defined elsewhere, or it is the
body of a function) says so with ``<!-- readme-test: fragment -->`` on the line before its fence, and is only
compiled. Both sides are checked: a block that runs may use no name it does not define (else it would pass
without running its code), and a fragment must be one (else it should run).

A block meant for the REPL (one that runs and is not a program of its own: no ``asyncio.run``, no ``test_``
functions) must also paste there: no blank line inside an indented block, since the REPL ends a compound statement
(a ``def``, a ``class``, an ``async with``) at its first blank line and would run the rest at the top level, and
it refuses a top-level statement that follows a block with no blank line between. Blank lines between top-level
statements, inside brackets or inside a string are fine.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import datetime
import gc
import inspect
import io
import itertools
import re
import sys
import tokenize
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

import health_async as ha
from health_async.testing import FakeHealthServer

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: The files whose blocks run: the README, then every page of the user guide (mkdocs' ``docs_dir``).
SOURCES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
FRAGMENT = "<!-- readme-test: fragment -->"
PDF = b"%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
#: The key of the encryption examples (docs/topics/encryption.md): the fake server shares it, so they run as written.
README_KEY, README_KEY_ID = "16-byte-secret!!", "client-key-1"
#: The names the docs say their shorter examples assume (docs/index.md, "How the examples read").
ASSUMED = frozenset({"ha", "datetime", "client", "oid", "document_id", "doc_id", "paths"})


def blocks(path: Path) -> list[tuple[str, str, bool]]:
    """(``file:line`` of the fence, source, is a fragment) of every python block of ``path``, indented ones (in a
    list) included."""
    name = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[tuple[str, str, bool]] = []
    index = 0
    while index < len(lines):
        fence = re.fullmatch(r"( *)```python", lines[index])
        if fence is None:
            index += 1
            continue
        indent, start = len(fence.group(1)), index
        body: list[str] = []
        index += 1
        while lines[index].strip() != "```":
            body.append(lines[index][indent:])
            index += 1
        fragment = start > 0 and lines[start - 1].strip() == FRAGMENT
        out.append((f"{name}:{start + 1}", "\n".join(body) + "\n", fragment))
        index += 1
    return out


README_BLOCKS = blocks(README)
BLOCKS = README_BLOCKS + [block for path in SOURCES[1:] for block in blocks(path)]
FRAGMENTS = [(where, source) for where, source, fragment in BLOCKS if fragment]
RUNNABLE = [(where, source) for where, source, fragment in BLOCKS if not fragment]


#: The runnable blocks meant for the REPL: not a program run as a file (``asyncio.run``) nor a module of tests.
REPL = [
    (where, source)
    for where, source in RUNNABLE
    if "asyncio.run(" not in source and not re.search(r"^(?:async )?def test_", source, re.MULTILINE)
]
_LAYOUT = frozenset({tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT})


def blank_lines_inside_blocks(source: str) -> list[int]:
    """The line numbers of the blank lines of ``source`` that sit inside an indented block: outside brackets and
    strings, and followed by an indented line (a blank line the REPL takes as the end of the block)."""
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    depth = 0
    found: list[int] = []
    for index, token in enumerate(tokens):
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif token.type == tokenize.NL and depth == 0 and not token.line.strip():
            after = next((t for t in tokens[index + 1 :] if t.type not in _LAYOUT), None)
            if after is not None and after.type != tokenize.ENDMARKER and after.start[1] > 0:
                found.append(token.start[0])
    return found


#: The words that carry a compound statement on at the top level (no blank line wanted before them).
_CONTINUED = frozenset({"except", "else", "elif", "finally"})


def statements_right_after_blocks(source: str) -> list[int]:
    """The line numbers of the top-level statements of ``source`` that follow an indented block with no blank line
    between (the REPL takes such a line as part of the block, and refuses it: ``SyntaxError``)."""
    lines = source.splitlines()
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    found: list[int] = []
    for token, after in itertools.pairwise(tokens):
        if token.type != tokenize.DEDENT or token.start[1] != 0 or after.type in (tokenize.DEDENT, tokenize.ENDMARKER):
            continue
        row = token.start[0]
        if after.string not in _CONTINUED and row >= 2 and lines[row - 2].strip():
            found.append(row)
    return found


def _compile(source: str, where: str) -> Any:
    return compile(source, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def _undefined_names(source: str) -> set[str]:
    """Names a block reads but neither defines (in any of its scopes) nor gets from the docs' assumptions."""
    tree = ast.parse(source)
    read: set[str] = set()
    bound: set[str] = set(ASSUMED) | set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return read - bound


def test_the_readme_has_blocks_and_most_run() -> None:
    assert any(not fragment for _, _, fragment in README_BLOCKS), "the README's quickstarts no longer run"
    assert len(BLOCKS) > 20
    assert len(RUNNABLE) >= len(BLOCKS) // 2, f"only {len(RUNNABLE)} of {len(BLOCKS)} blocks run"


@pytest.mark.parametrize(("where", "source"), FRAGMENTS, ids=[where for where, _ in FRAGMENTS])
def test_a_fragment_compiles_and_is_one(where: str, source: str) -> None:
    try:
        _compile(source, where)
    except SyntaxError:  # the body of a function (``return`` at its top): compiled as one
        _compile("async def _fragment():\n" + "".join(f"    {ln}\n" for ln in source.splitlines()), where)
        return
    assert _undefined_names(source), "this block defines everything it uses: run it, drop its fragment marker"


@pytest.mark.parametrize(("where", "source"), RUNNABLE, ids=[where for where, _ in RUNNABLE])
def test_a_runnable_block_defines_what_it_uses(where: str, source: str) -> None:
    undefined = _undefined_names(source)
    assert not undefined, f"uses {sorted(undefined)}: define them in the block, or mark it as a fragment"


def test_the_blank_line_check_finds_what_the_repl_stops_at() -> None:
    inside = "async with x as c:\n    await c.a()\n\n    await c.b()\n"
    assert blank_lines_inside_blocks(inside) == [3]
    between = 'def f():\n    return 1\n\n\nx = [\n    1,\n\n    2,\n]\ns = """a\n\n    b"""\n'
    assert blank_lines_inside_blocks(between) == []
    nested = "class A:\n    def f(self):\n        return 1\n\n    def g(self):\n        return 2\n"
    assert blank_lines_inside_blocks(nested) == [4]
    assert statements_right_after_blocks("for i in x:\n    f(i)\nprint(i)\n") == [3]
    assert statements_right_after_blocks("for i in x:\n    f(i)\n\nprint(i)\ntry:\n    f()\nexcept E:\n    g()\n") == []


def test_most_runnable_blocks_are_for_the_repl() -> None:
    assert len(REPL) >= len(RUNNABLE) // 2, f"only {len(REPL)} of {len(RUNNABLE)} runnable blocks are for the REPL"


@pytest.mark.parametrize(("where", "source"), REPL, ids=[where for where, _ in REPL])
def test_a_repl_block_pastes_into_the_repl(where: str, source: str) -> None:
    lines = blank_lines_inside_blocks(source)
    assert not lines, (
        f"blank line(s) {lines} of the block inside an indented block: pasted into `python -m asyncio`, the block "
        "ends there; remove them (or a comment line instead), or make the example a program (asyncio.run)"
    )
    lines = statements_right_after_blocks(source)
    assert not lines, (
        f"line(s) {lines} of the block follow an indented block with no blank line: pasted into `python -m asyncio`, "
        "they are a SyntaxError; put a blank line before them"
    )


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory of the examples, with the files they name."""
    monkeypatch.chdir(tmp_path)
    for name in ("report.pdf", "a.pdf", "b.pdf"):
        (tmp_path / name).write_bytes(PDF)
    for name in ("page-1.png", "page-2.png"):
        (tmp_path / name).write_bytes(PNG)
    (tmp_path / "scan-18MB.pdf").write_bytes(PDF + b"\0" * (18 * 2**20))
    return tmp_path


@pytest.fixture
async def server(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeHealthServer]:
    """A fake server on 127.0.0.1, and the environment a user of ``HealthClient.from_env()`` would set for it."""
    async with FakeHealthServer(users=1, documents_per_user=3, encryption_key=README_KEY, key_id=README_KEY_ID) as srv:
        srv.records.configure(polls=0)  # processing done at the first poll: the examples that wait stay short
        user = srv.data.user_ids[0]
        ids = "\n".join(srv.data.document_ids(user)) + "\n"
        await asyncio.to_thread((workdir / "ids.txt").write_text, ids)
        monkeypatch.setenv("HEALTH_ASYNC_BASE_URL", srv.url)
        monkeypatch.setenv("HEALTH_ASYNC_TOKEN", srv.token)
        monkeypatch.setenv("HEALTH_ASYNC_CLIENT_ID", srv.client_id)
        monkeypatch.setenv("HEALTH_ASYNC_USER_ID", user)
        yield srv


async def _serve_app(app: web.Application, server: FakeHealthServer) -> None:
    """Serve the block's app (its cleanup contexts included) and ask every GET route: with path parameters
    filled from the fake server's data it answers 200; a route with a document ``{id}`` answers an unknown one
    with 404."""
    user = server.data.user_ids[0]
    values = {"oid": user, "id": server.data.document_ids(user)[0]}
    asked = 0
    async with TestClient(TestServer(app, host="127.0.0.1")) as http:
        for resource in app.router.resources():
            if not any(route.method == "GET" for route in resource):
                continue
            info = resource.get_info()
            path = info.get("path") or info.get("formatter", "")
            url = re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path)
            response = await http.get(url)
            assert response.status == 200, (url, response.status, await response.text())
            if "{id}" in path:
                missing = re.sub(r"\{(\w+)\}", lambda m: "no-such-document" if m.group(1) == "id" else user, path)
                response = await http.get(missing)
                assert response.status == 404, (missing, response.status, await response.text())
            asked += 1
    assert asked, "the app has no GET route to ask"


async def _run_tests_with_pytest(source: str, where: str, workdir: Path) -> None:
    """A block of tests runs as the user's test module: pytest in a subprocess, warnings as errors, the fixtures
    from the package's own plugin (entry point), pytest-asyncio in its default mode."""
    module = workdir / "test_readme_block.py"
    await asyncio.to_thread(module.write_text, source, encoding="utf-8")
    # a user's configuration: pytest-asyncio's default (strict) mode, its loop scope set (unset, it warns)
    config = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
    await asyncio.to_thread((workdir / "pytest.ini").write_text, config, encoding="utf-8")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-W",
        "error",
        "-p",
        "no:cacheprovider",
        module.name,
        cwd=workdir,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    text = output.decode(errors="replace")
    count = len(re.findall(r"^(?:async )?def test_", source, re.MULTILINE))
    assert process.returncode == 0, f"{where}\n{text}"
    assert f"{count} passed" in text, text


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize(("where", "source"), RUNNABLE, ids=[where for where, _ in RUNNABLE])
async def test_a_block_runs_against_the_fake_server(
    server: FakeHealthServer, workdir: Path, where: str, source: str
) -> None:
    user = server.data.user_ids[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # -W error, ResourceWarning included
        async with ha.HealthClient.from_env() as client:
            namespace: dict[str, Any] = {
                "__name__": "readme",
                "ha": ha,
                "datetime": datetime,
                "client": client,
                "oid": user,
                "document_id": server.data.document_ids(user)[0],
                "doc_id": server.data.document_ids(user)[1],
                "paths": ["a.pdf", "b.pdf"],
            }
            code = _compile(source, where)
            if "asyncio.run(" in source:  # a program: runs its own loop, in a thread of its own
                await asyncio.to_thread(exec, code, namespace)
                result = None
            else:
                result = eval(code, namespace)  # the docs' own code
            if inspect.iscoroutine(result):
                await result
            main = namespace.get("main")
            if inspect.iscoroutinefunction(main) and "main()" not in source:
                await main()
            app = namespace.get("app")
            if isinstance(app, web.Application):
                await _serve_app(app, server)
            if any(name.startswith("test_") and inspect.iscoroutinefunction(f) for name, f in namespace.items()):
                await _run_tests_with_pytest(source, where, workdir)
            del namespace, result, main, app
        gc.collect()  # an unclosed session, connector or file warns here, as an error
