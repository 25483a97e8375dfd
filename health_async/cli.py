"""The ``health-async`` command (also ``python -m health_async``).

Configured by flags or the ``HEALTH_ASYNC_*`` environment variables. Results go to stdout as JSON (one object
per line for commands that produce many); progress and diagnostics go to stderr, with a progress bar only when
stderr is a terminal. Exit status: 0 on success, 1 when any item failed, 2 on bad usage or configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import IO, Any

import orjson

from . import _constants as C
from ._aadhaar import mask_aadhaar
from ._client import HealthClient
from ._convert import unstructure
from ._version import __version__
from .errors import ApiError, HealthError
from .models import DescribeResult, UploadOutcome

__all__ = ["main"]


# ------------------------------------------------------------------------ output helpers


def error_json(error: BaseException) -> dict[str, Any]:
    """An error as JSON: its type, message and, for API errors, the status. Never the body."""
    out: dict[str, Any] = {"type": type(error).__name__, "message": str(error)}
    if isinstance(error, ApiError):
        out["status"] = error.status
    return out


def emit(obj: Any, out: IO[str] | None = None) -> None:
    """Write one JSON line to stdout: a model, a bulk result (with its error as JSON), or plain data."""
    if isinstance(obj, DescribeResult):
        obj = {"document_id": obj.document_id, **_outcome("document", obj.document, obj.error)}
    elif isinstance(obj, UploadOutcome):
        outcome = _outcome("document_id", obj.result.document_id if obj.result else None, obj.error)
        obj = {"file": str(obj.source) if isinstance(obj.source, str | os.PathLike) else "<data>", **outcome}
    else:
        obj = unstructure(obj)
    stream = out or sys.stdout
    stream.write(orjson.dumps(obj).decode() + "\n")
    stream.flush()


def _outcome(name: str, value: Any, error: HealthError | None) -> dict[str, Any]:
    return {"error": error_json(error)} if error is not None else {name: unstructure(value)}


class Progress:
    """A one-line progress bar on stderr when it is a terminal; silent otherwise (piped, CI)."""

    def __init__(self, label: str, *, enabled: bool | None = None, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.label = label
        self.started = time.monotonic()
        self._last = 0.0

    def __call__(self, done: int, failed: int, total: int | None) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.1 and done != total:
            return
        self._last = now
        rate = done / max(now - self.started, 1e-9)
        if total:
            width = 30
            filled = int(width * done / total)
            bar = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total}"
        else:
            bar = f"{done} done"
        self.stream.write(f"\r{self.label} {bar}  failed {failed}  {rate:,.0f}/s ")
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line."""
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


# ------------------------------------------------------------------------ inputs


def read_ids(source: str) -> Iterator[str]:
    """Ids one per line from a file or ``-`` (stdin), blank lines and ``#`` comments skipped, read lazily."""
    stream = sys.stdin if source == "-" else open(source, encoding="utf-8")
    try:
        for line in stream:
            text = line.strip()
            if text and not text.startswith("#"):
                yield text
    finally:
        if stream is not sys.stdin:
            stream.close()


# ------------------------------------------------------------------------ commands


def make_client(args: argparse.Namespace) -> HealthClient:
    """A client from the flags, falling back to the environment."""
    overrides: dict[str, Any] = {}
    for name in ("base_url", "token", "client_id", "user_id", "key_id"):
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    if getattr(args, "timeout", None) is not None:
        overrides["timeout"] = args.timeout
    if getattr(args, "insecure_http", False):
        overrides["allow_insecure_http"] = True
    return HealthClient.from_env(**overrides)


async def cmd_describe(client: HealthClient, args: argparse.Namespace) -> int:
    doc = await client.documents.describe(args.id)
    emit(doc)
    return 0


async def _emit_results(label: str, quiet: bool, results: Callable[[Progress], AsyncIterator[Any]]) -> int:
    """Write one JSON line per bulk result (its ``error`` as JSON when it failed); 1 if any failed."""
    progress = Progress(label, enabled=False if quiet else None)
    failed = 0
    try:
        async for r in results(progress):
            failed += r.error is not None
            emit(r)
    finally:
        progress.close()
    return 1 if failed else 0


async def cmd_describe_many(client: HealthClient, args: argparse.Namespace) -> int:
    def results(progress: Progress) -> AsyncIterator[Any]:
        ids = read_ids(args.ids)
        return client.documents.describe_many(
            ids, concurrency=args.concurrency, ordered=args.ordered, progress=progress
        )

    return await _emit_results("describe", args.quiet, results)


async def cmd_list(client: HealthClient, args: argparse.Namespace) -> int:
    async for item in client.documents.list(updated_after=args.updated_after):
        emit(item)
    return 0


async def cmd_upload(client: HealthClient, args: argparse.Namespace) -> int:
    def results(progress: Progress) -> AsyncIterator[Any]:
        return client.documents.upload_many(
            args.files,
            tasks=args.task or ["smart"],
            document_type=args.document_type,
            encrypt=True if args.encrypt else None,
            concurrency=args.concurrency,
            ordered=True,
            progress=progress,
        )

    return await _emit_results("upload", args.quiet, results)


async def cmd_profile(client: HealthClient, args: argparse.Namespace) -> int:
    profile = await client.profiles.get(args.oid)
    emit(profile)
    return 0


async def cmd_aadhaar_init(client: HealthClient, args: argparse.Namespace) -> int:
    masked = mask_aadhaar(args.number)
    try:
        result = await client.abha.aadhaar_init(
            args.number, validate=not args.no_validate, encrypt=True if args.encrypt else None
        )
    except HealthError as exc:
        emit({"aadhaar": masked, "error": error_json(exc)})
        return 1
    emit({"aadhaar": masked, "hint": result.hint, "txn_id": result.txn_id})
    return 0


COMMANDS: dict[str, Callable[[HealthClient, argparse.Namespace], Awaitable[int]]] = {
    "describe": cmd_describe,
    "describe-many": cmd_describe_many,
    "list": cmd_list,
    "upload": cmd_upload,
    "profile": cmd_profile,
    "aadhaar-init": cmd_aadhaar_init,
}


# ------------------------------------------------------------------------ commands that need no account


async def run_fake_server(args: argparse.Namespace, *, out: IO[str] | None = None) -> int:
    """``fake-server``: serve the fake service until interrupted; print how to point a client at it."""
    from .testing import FakeHealthServer

    stream = out or sys.stdout
    async with FakeHealthServer(host=args.host, port=args.port, seed=args.seed) as server:
        data = server.data
        stream.write(
            f"fake health service on {server.url} (Ctrl-C to stop)\n"
            f"export {C.ENV_BASE_URL}={server.url}\n"
            f"export {C.ENV_TOKEN}={server.token}\n"
            f"export {C.ENV_CLIENT_ID}={server.client_id}\n"
            f"export {C.ENV_USER_ID}={data.user_ids[0]}\n"
            f"export {C.ENV_ENCRYPTION_KEY}={server.encryption_key}\n"
            f"export {C.ENV_KEY_ID}={server.key_id}\n"
        )
        stream.flush()
        await asyncio.Event().wait()
    return 0  # pragma: no cover - only reached by cancellation


# ------------------------------------------------------------------------ parser and entry point


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    parser = argparse.ArgumentParser(
        prog="health-async",
        description="Client of the Health Records, ABHA registration and Profile service.",
        epilog=f"Settings not given as flags come from {C.ENV_PREFIX}* environment variables.",
    )
    parser.add_argument("--version", action="version", version=f"health_async {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("connection (default: HEALTH_ASYNC_* environment variables)")
    group.add_argument("--base-url", help=f"service URL (env {C.ENV_BASE_URL}; default production)")
    group.add_argument("--token", help=f"bearer token (env {C.ENV_TOKEN}; prefer the environment)")
    group.add_argument("--client-id", help=f"client-id header (env {C.ENV_CLIENT_ID})")
    group.add_argument("--user-id", help=f"OID for X-Pt-Id (env {C.ENV_USER_ID})")
    group.add_argument(
        "--key-id", help=f"JWE kid (env {C.ENV_KEY_ID}); the key itself only from {C.ENV_ENCRYPTION_KEY}"
    )
    group.add_argument("--timeout", type=float, help="seconds per request (default 30)")
    group.add_argument("--insecure-http", action="store_true", help="allow plain http:// to a non-loopback host")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("describe", parents=[common], help="describe one document (JSON)")
    p.add_argument("id", help="document id")

    p = sub.add_parser(
        "describe-many",
        parents=[common],
        help="describe many documents: ids from a file or stdin, JSON lines out",
        description="Describe every id (one per line) of FILE, or of stdin with '-'. Writes one JSON line per id, "
        "failures included ({'document_id', 'error'}); exits 1 if any id failed.",
    )
    p.add_argument("ids", nargs="?", default="-", metavar="FILE", help="file of ids, one per line (default: stdin)")
    p.add_argument("--concurrency", type=int, default=32, help="requests in flight (default 32)")
    p.add_argument("--ordered", action="store_true", help="write results in input order")
    p.add_argument("--quiet", action="store_true", help="no progress bar even on a terminal")

    p = sub.add_parser("list", parents=[common], help="list a user's documents (JSON lines)")
    p.add_argument("--updated-after", type=int, metavar="EPOCH", help="only documents updated after this time")

    p = sub.add_parser(
        "upload",
        parents=[common],
        help="upload files (JSON lines out)",
        description="Upload each FILE (10 MB at most each); one JSON line per file; exits 1 if any failed.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="files to upload")
    p.add_argument("--task", action="append", help="processing task, repeatable: smart (default), pii, classification")
    p.add_argument("--document-type", help="document type code sent as dt, e.g. lr")
    p.add_argument("--encrypt", action="store_true", help=f"send JWE-encrypted (key from {C.ENV_ENCRYPTION_KEY})")
    p.add_argument("--concurrency", type=int, default=4, help="uploads in flight (default 4)")
    p.add_argument("--quiet", action="store_true", help="no progress bar even on a terminal")

    p = sub.add_parser("profile", parents=[common], help="get an EMR user profile (JSON)")
    p.add_argument("oid", help="user id (OID)")

    p = sub.add_parser("aadhaar-init", parents=[common], help="start ABHA registration: send an OTP (masked output)")
    p.add_argument("number", help="Aadhaar number (spaces and hyphens allowed)")
    p.add_argument("--no-validate", action="store_true", help="skip the digit rules (sandbox test numbers)")
    p.add_argument("--encrypt", action="store_true", help="send the request as a JWE envelope")

    p = sub.add_parser(
        "fake-server",
        help="run the built-in fake service (for trying the CLI and testing your code)",
        description="Serve the fake service on HOST:PORT until Ctrl-C, and print the environment to use it.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 picks a free one)")
    p.add_argument("--seed", type=int, default=0, help="seed of the fake data")

    p = sub.add_parser(
        "demo",
        help="run every operation against the built-in fake service (no account needed)",
        description="Start the fake service in-process and run every operation, encrypted ones too, then a bulk "
        "describe under injected faults; prints a summary. Exits 1 if anything did not go as expected.",
    )
    p.add_argument("--documents", type=int, default=3000, help="documents for the bulk describe (default 3000)")
    p.add_argument("--concurrency", type=int, default=64, help="bulk requests in flight (default 64)")
    p.add_argument("--quiet", action="store_true", help="no progress bar even on a terminal")
    return parser


async def run(args: argparse.Namespace) -> int:
    """Run one parsed command; returns the exit status."""
    if args.command == "fake-server":
        return await run_fake_server(args)
    if args.command == "demo":
        from ._demo import run_demo

        summary = await run_demo(
            documents=args.documents, concurrency=args.concurrency, progress=False if args.quiet else None
        )
        return 0 if summary.ok else 1
    command = COMMANDS[args.command]
    async with make_client(args) as client:
        return int(await command(client, args))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``health-async``; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return asyncio.run(run(args))
    except KeyboardInterrupt:
        return 130
    except (ValueError, TypeError) as exc:
        print(f"health-async: {exc}", file=sys.stderr)
        return 2
    except HealthError as exc:
        print(f"health-async: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
