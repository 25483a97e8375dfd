"""Every ```python block of the README runs against the fake server, with warnings as errors.

A block is run as a user would paste it into an async REPL (``python -m asyncio``): top-level ``await`` allowed,
in a namespace holding what the README says its examples assume (an open ``client`` on the fake server, a
``document_id`` that exists there, files named in the examples in the working directory). A block that defines
``main()`` has it run; one that builds an aiohttp ``app`` has it served and its GET routes asked. A block that is
a fragment (a piece of a larger program, the names it uses defined elsewhere) says so with
``<!-- readme-test: fragment -->`` on the line before it, and is only compiled.
"""

from __future__ import annotations

import ast
import asyncio
import datetime
import gc
import inspect
import re
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

import health_async as ha
from health_async.testing import FakeHealthServer

README = Path(__file__).resolve().parent.parent / "README.md"
FRAGMENT = "<!-- readme-test: fragment -->"
PDF = b"%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def blocks() -> list[tuple[int, str, bool]]:
    """(line of the fence, source, is a fragment) of every python block."""
    lines = README.read_text(encoding="utf-8").splitlines()
    out: list[tuple[int, str, bool]] = []
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
        out.append((start + 1, "\n".join(body) + "\n", fragment))
        index += 1
    return out


BLOCKS = blocks()


def _compile(source: str, line: int) -> Any:
    return compile(source, f"README.md:{line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_the_readme_has_blocks_and_most_run() -> None:
    assert len(BLOCKS) > 20
    run = [line for line, _, fragment in BLOCKS if not fragment]
    assert len(run) >= len(BLOCKS) // 2, f"only {len(run)} of {len(BLOCKS)} blocks run"


FRAGMENTS = [(line, source) for line, source, fragment in BLOCKS if fragment]
RUNNABLE = [(line, source) for line, source, fragment in BLOCKS if not fragment]


@pytest.mark.parametrize(("line", "source"), FRAGMENTS, ids=[f"README.md:{line}" for line, _ in FRAGMENTS])
def test_a_fragment_compiles(line: int, source: str) -> None:
    try:
        _compile(source, line)
    except SyntaxError:  # a piece of a function body (``return`` at its top): compiled as one
        _compile("async def _fragment():\n" + "".join(f"    {ln}\n" for ln in source.splitlines()), line)


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
    async with FakeHealthServer(users=1, documents_per_user=3) as srv:
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
    """Ask every GET route of the block's app, its path parameters filled from the fake server's data."""
    user = server.data.user_ids[0]
    values = {"oid": user, "id": server.data.document_ids(user)[0]}
    async with TestClient(TestServer(app)) as http:
        for resource in app.router.resources():
            info = resource.get_info()
            path = info.get("path") or info.get("formatter", "")
            if not any(route.method == "GET" for route in resource):
                continue
            url = re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path)
            response = await http.get(url)
            assert response.status == 200, (url, response.status, await response.text())


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize(("line", "source"), RUNNABLE, ids=[f"README.md:{line}" for line, _ in RUNNABLE])
async def test_a_block_runs_against_the_fake_server(server: FakeHealthServer, line: int, source: str) -> None:
    user = server.data.user_ids[0]
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
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            code = _compile(source, line)
            if "asyncio.run(" in source:  # a program: runs its own loop, in a thread of its own
                await asyncio.to_thread(exec, code, namespace)
                result = None
            else:
                result = eval(code, namespace)  # the README's own code
            if inspect.iscoroutine(result):
                await result
            main = namespace.get("main")
            if inspect.iscoroutinefunction(main) and "main()" not in source:
                await main()
            app = namespace.get("app")
            if isinstance(app, web.Application):
                await _serve_app(app, server)
            gc.collect()  # an unclosed session or connector warns here, as an error
