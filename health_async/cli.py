"""The ``health-async`` command (also ``python -m health_async``).

Configured by flags or the ``HEALTH_ASYNC_*`` environment variables. Results go to stdout as JSON (one object
per line for commands that produce many); progress and diagnostics go to stderr, with a progress bar only when
stderr is a terminal. Exit status: 0 on success, 1 when any item failed, 2 on bad usage or configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any

from . import _constants as C
from ._aadhaar import mask_aadhaar
from ._bulk import BulkStream
from ._cli import ingest as _ingest_cli
from ._cli._output import (
    BadLine,
    Command,
    InputError,
    Progress,
    Tally,
    drain,
    emit,
    error_json,
    in_flight,
    make_client,
    open_input,
    port,
    positive_count,
    positive_number,
    read_ids,
)
from ._cli.abdm import hospital as _abdm_cli
from ._cli.abha import register as _abha_cli
from ._cli.fhir import commands as _fhir_cli
from ._cli.patients import commands as _patients_cli
from ._cli.records import commands as _records_cli
from ._cli.registries import commands as _registries_cli
from ._cli.webhooks import commands as _webhooks_cli
from ._client import HealthClient
from ._version import __version__
from .errors import HealthError, InvalidRequest

if TYPE_CHECKING:
    from .testing import FakeHealthServer

__all__ = ["main"]

_DOMAIN_CLIS = (
    _records_cli,
    _abha_cli,
    _patients_cli,
    _ingest_cli,
    _abdm_cli,
    _registries_cli,
    _webhooks_cli,
    _fhir_cli,
)

# ------------------------------------------------------------------------ commands


async def cmd_describe(client: HealthClient, args: argparse.Namespace) -> int:
    doc = await client.documents.describe(args.id)
    emit(doc)
    return 0


async def _emit_results(
    label: str,
    quiet: bool,
    results: Callable[[Progress], BulkStream[Any]],
    *,
    tally: Tally,
) -> int:
    """Write one JSON line per bulk result (its ``error`` as JSON when it failed), then the summary; 1 if any
    failed (see :func:`~health_async._cli._output.drain`)."""
    progress = Progress(label, enabled=False if quiet else None)
    return await drain(results(progress), tally, progress)


async def cmd_describe_many(client: HealthClient, args: argparse.Namespace) -> int:
    source = open_input(args.ids)  # a missing or unreadable file: one line on stderr, exit 2, before any work
    tally = Tally("describe", idempotent=True)

    def ids() -> Iterator[str]:
        for item in read_ids(source):
            if isinstance(item, BadLine):  # fails alone, with its own line; the batch goes on
                tally.add(InvalidRequest(item.reason))
                emit(item)
            else:
                yield item

    def results(progress: Progress) -> BulkStream[Any]:
        return client.documents.describe_many(
            ids(), concurrency=args.concurrency, ordered=args.ordered, progress=progress
        )

    # closed here whatever ends the run (a reader gone away included): the lazy reader's own ``finally`` may only
    # run at interpreter shutdown, after the file's finaliser has warned "unclosed file"
    try:
        return await _emit_results("describe", args.quiet, results, tally=tally)
    finally:
        if args.ids != "-":
            source.close()


async def cmd_list(client: HealthClient, args: argparse.Namespace) -> int:
    async for item in client.documents.list(updated_after=args.updated_after):
        emit(item)
    return 0


async def cmd_upload(client: HealthClient, args: argparse.Namespace) -> int:
    if args.wait:  # wait for each file's processing; the extracted tests as a table per file
        return await _records_cli.run_uploads(client, list(args.files), args, label="upload", table=True)

    def results(progress: Progress) -> BulkStream[Any]:
        return client.documents.upload_many(
            args.files,
            tasks=args.task or ["smart"],
            document_type=args.document_type,
            encrypt=True if args.encrypt else None,
            concurrency=args.concurrency,
            ordered=True,
            progress=progress,
        )

    return await _emit_results("upload", args.quiet, results, tally=Tally("upload", idempotent=False))


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


#: Commands that build their own client(s) (``ingest``): ``run`` passes them ``None``.
_NO_CLIENT: set[str] = set()

COMMANDS: dict[str, Command] = {
    "describe": cmd_describe,
    "describe-many": cmd_describe_many,
    "list": cmd_list,
    "upload": cmd_upload,
    "profile": cmd_profile,
    "aadhaar-init": cmd_aadhaar_init,
}


# ------------------------------------------------------------------------ commands that need no account


#: ``fake-server --documents``: at most this many documents per user (they are all made at startup).
MAX_FAKE_DOCUMENTS = 100_000


def fake_documents(text: str) -> int:
    """``fake-server --documents``: 1 to :data:`MAX_FAKE_DOCUMENTS`."""
    number = positive_count(text)
    if number > MAX_FAKE_DOCUMENTS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_FAKE_DOCUMENTS}")
    return number


def _fake_banner(server: FakeHealthServer, webhook_url: str | None, show_otps: bool) -> str:
    """What ``fake-server`` tells a person on stderr: what it accepts (it is a fake) and where things go."""
    data = server.data
    refused = ", ".join(f"{n} ({body['source_error']['code']})" for n, (_, body) in data.failing_aadhaar.items())
    accounts = ", ".join(f"{a.abha_address} (mobile {a.mobile})" for a in server.abha.accounts.values())
    where = "printed here as they are made, and" if show_otps else "not printed (--no-show-otps); they are"
    hooks = (
        f"signed webhooks (ABDM's and Scan & Share's) go to {webhook_url}"
        if webhook_url is not None
        else "no webhooks are sent: give --webhook-url URL and --webhook-secret (or HEALTH_ASYNC_WEBHOOK_SECRET)"
    )
    return (
        f"fake-server: test Aadhaar numbers accepted: {', '.join(data.valid_aadhaar)}\n"
        f"fake-server: test Aadhaar numbers refused upstream: {refused}\n"
        f"fake-server: ABHA addresses held: {accounts}\n"
        f"fake-server: the OTPs it sends (a fake: no SMS) are {where} listed by GET {server.url}/_fake/otps\n"
        f"fake-server: {hooks}\n"
    )


async def run_fake_server(args: argparse.Namespace, *, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    """``fake-server``: serve the fake service until interrupted; print how to point a client at it (stdout) and
    what it accepts (stderr): its test Aadhaar numbers and ABHA addresses, where its OTPs and webhooks go."""
    from .testing import FakeHealthServer

    stream, diagnostics = out or sys.stdout, err or sys.stderr
    webhook_url: str | None = getattr(args, "webhook_url", None)
    secret = getattr(args, "webhook_secret", None) or os.environ.get(_webhooks_cli.ENV_WEBHOOK_SECRET)
    if webhook_url is None and getattr(args, "webhook_secret", None):
        raise ValueError("--webhook-secret needs --webhook-url (where the signed webhooks go)")
    if webhook_url is not None and not secret:
        raise ValueError(
            f"--webhook-url needs the signing secret: --webhook-secret or {_webhooks_cli.ENV_WEBHOOK_SECRET}"
        )
    show_otps: bool = getattr(args, "show_otps", True)
    server = FakeHealthServer(
        host=args.host,
        port=args.port,
        seed=args.seed,
        documents_per_user=getattr(args, "documents", 50),
        show_otps=show_otps,
    )
    server.webhooks(webhook_url, secret)  # ValueError (exit 2) for a URL off loopback
    async with server:
        data = server.data
        diagnostics.write(_fake_banner(server, webhook_url, show_otps))
        diagnostics.flush()
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
    group.add_argument("--timeout", type=positive_number, help="seconds per call, retries included (default 30)")
    group.add_argument(
        "--rate-limit", type=positive_number, metavar="R", help="at most R requests per second (default: none)"
    )
    group.add_argument(
        "--max-connections", type=in_flight, metavar="N", help="requests in flight at once (default 100)"
    )
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
    p.add_argument("--concurrency", type=in_flight, default=32, help="requests in flight (default 32)")
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
    p.add_argument("--concurrency", type=in_flight, default=4, help="uploads in flight (default 4)")
    p.add_argument("--quiet", action="store_true", help="no progress bar even on a terminal")
    p.add_argument("--wait", action="store_true", help="wait for each file's processing; print its tests as a table")
    p.add_argument("--wait-timeout", type=float, default=600.0, help="seconds to wait per file (default 600)")

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
    p.add_argument("--port", type=port, default=8080, help="port (default 8080; 0 picks a free one)")
    p.add_argument("--seed", type=int, default=0, help="seed of the fake data")
    p.add_argument(
        "--documents", type=fake_documents, default=50, metavar="N", help="documents of each user (default 50)"
    )
    p.add_argument(
        "--webhook-url",
        metavar="URL",
        help="send the signed webhooks (ABDM's, Scan & Share's) to URL, http(s) on loopback, e.g. the "
        "'webhooks serve' of another shell: http://127.0.0.1:8081/webhooks",
    )
    p.add_argument(
        "--webhook-secret",
        metavar="SECRET",
        help="sign them with SECRET (env HEALTH_ASYNC_WEBHOOK_SECRET, the one 'webhooks serve' reads; prefer the "
        "environment)",
    )
    p.add_argument(
        "--show-otps",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="print each OTP the fake sends to stderr as it is made (default on; also GET /_fake/otps)",
    )

    p = sub.add_parser(
        "demo",
        help="run every operation against the built-in fake service (no account needed)",
        description="Start the fake service in-process and run every operation, encrypted ones too, then a bulk "
        "describe under injected faults; prints a summary. Exits 1 if anything did not go as expected.",
    )
    p.add_argument(
        "--documents", type=positive_count, default=3000, help="documents for the bulk describe (default 3000)"
    )
    p.add_argument("--concurrency", type=in_flight, default=64, help="bulk requests in flight (default 64)")
    p.add_argument("--quiet", action="store_true", help="no progress bar even on a terminal")
    for module in _DOMAIN_CLIS:
        for name, command in module.add_commands(sub, common).items():
            COMMANDS[name] = command
            if name in module.NO_CLIENT:
                _NO_CLIENT.add(name)
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
    if args.command in _NO_CLIENT:
        return int(await command(None, args))
    async with make_client(args) as client:
        return int(await command(client, args))


#: The exit status when stdout's reader went away: 128 + SIGPIPE, what a shell reports for ``yes | head -1``.
EXIT_BROKEN_PIPE = 128 + 13


def _tolerant(stream: object) -> None:
    """Text for people that ``stream``'s encoding cannot show (a name in Devanagari on a cp1252 redirect) is written
    as backslash escapes instead of failing the command half-way through its output, as stderr already does. JSON
    lines never rely on this: :func:`~health_async._cli._output.write_json` escapes them as JSON does."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None and getattr(stream, "errors", None) == "strict":
        with contextlib.suppress(Exception):  # a stream that cannot change (already written to, say) stays as it is
            reconfigure(errors="backslashreplace")


def _results_on_stdout(args: argparse.Namespace) -> bool:
    """Whether the command's results go to stdout: every command's but an ingest run's, which writes them to its
    output file and its summary to stderr (so it may run with stdout closed, a cron job started with ``>&-``)."""
    return args.command != "ingest" or getattr(args, "ingest_command", None) == "status"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``health-async``; returns the exit status."""
    if sys.stderr is None:  # started with fd 2 closed: diagnostics are dropped, never mixed into stdout's results
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # the process's stderr from now on (it takes fd 2)
    _tolerant(sys.stdout)
    try:
        args = build_parser().parse_args(argv)  # inside: a Ctrl-C while it starts is 130 too, not a traceback
        if sys.stdout is None:  # started with fd 1 closed (``>&-``)
            if _results_on_stdout(args):  # every result would be lost, so nothing is done
                print("health-async: stdout is closed: the results would be lost; nothing was done", file=sys.stderr)
                return 2
            sys.stdout = open(os.devnull, "w", encoding="utf-8")  # the process's stdout from now on (it takes fd 1)
        return asyncio.run(run(args))
    except BrokenPipeError:
        # The reader went away (``health-async list | head -3``): stop quietly, as a Unix filter does, with the
        # status a shell gives a command ended by SIGPIPE. stdout is pointed at /dev/null so that the interpreter's
        # last flush at exit does not print "Exception ignored ... BrokenPipeError".
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return 130
    except InputError as exc:
        print(f"health-async: {exc}", file=sys.stderr)
        return 2
    except (ValueError, TypeError) as exc:
        print(f"health-async: {exc}", file=sys.stderr)
        return 2
    except HealthError as exc:
        print(f"health-async: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # the machine's side: a port in use, a host that does not resolve, a full disk
        print(f"health-async: {exc.strerror or type(exc).__name__}", file=sys.stderr)
        return 1
