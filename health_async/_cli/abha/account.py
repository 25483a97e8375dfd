"""``health-async abha profile | card | qr | search | pincode``: the ABHA after registration, one call each.

* ``abha profile``: the user's ABHA profile as one JSON line (``client.abha.profile()``); with ``--update
  FIELD=VALUE ...`` the given fields changed (``client.abha.update_profile``), with ``--delete --yes`` the profile
  deleted for good (``client.abha.delete_profile(confirm=True)``).
* ``abha card --to PATH|-`` / ``abha qr --to PATH|-``: the ABHA card / QR code (``client.abha.card`` /
  ``client.abha.qr``) written to ``PATH`` (atomically, owner-only: the library's rules) with one JSON line
  ``{"file", "content_type", "bytes"}`` on stdout, or with ``-`` the bytes to stdout (its binary buffer) and the
  content type on stderr. ``-`` is refused when stdout is a terminal (the bytes would garble it).
* ``abha search MOBILE|-``: the KYC-verified ABHAs of a mobile number (``client.abha.search``), one JSON line per
  match (ABHA numbers masked by the service); ``-`` reads the number from the first line of stdin.
* ``abha pincode PINCODE``: the state and district of a pincode (``client.abha.pincode``), one JSON line.

Who the user is: ``X-Pt-Id`` is the OID of ``--user-id``, else of ``HEALTH_ASYNC_USER_ID`` (the vendor names the user
of a profile, card or QR call by it; these commands are about an existing ABHA user, unlike ``abha register``).
Judgement call: ``--delete`` needs the OID on the command itself (``--user-id``), never only from the environment,
so that a forgotten ``HEALTH_ASYNC_USER_ID`` never picks whose profile is deleted.

Personal data: the profile, the QR data, the card and the search matches are personal data; they go only where
the user asked for them (stdout, the ``--to`` file). Nothing of them, nor the mobile number searched, goes to
stderr or into an error line: errors are the library's (which name the rule, never the value) and file errors
name neither the file nor its content. Exit status: 0 done; 1 an error (the service's refusal, a file that could
not be written); 2 bad usage or input (nothing sent); 130 Ctrl-C; 141 stdout's reader went away.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import sys
from typing import TYPE_CHECKING, Any, Final

from ...errors import InvalidRequest
from .._output import Command, display_path, emit

if TYPE_CHECKING:
    from ..._client import HealthClient

__all__ = ["UPDATABLE", "add_commands", "parse_updates"]

#: The fields ``abha profile --update`` may change, in the order the help lists them.
UPDATABLE: Final = ("first_name", "middle_name", "last_name", "gender", "date_of_birth", "pincode", "address")
#: Fields an empty value clears (``--update address=``); the others are required by the service.
_CLEARABLE: Final = frozenset({"middle_name", "last_name", "address"})
#: The longest line ``abha search -`` reads from stdin (a mobile number with spaces and ``+91``).
_MAX_MOBILE_LINE: Final = 64


def _say(label: str, text: str) -> None:
    sys.stderr.write(f"health-async abha {label}: {text}\n")
    sys.stderr.flush()


# ------------------------------------------------------------------------------------------------ profile


def parse_updates(pairs: list[str]) -> dict[str, Any]:
    """The keywords of ``update_profile`` from ``FIELD=VALUE`` pairs, checked before anything is sent.

    ``date_of_birth`` is ``YYYY-MM-DD``; ``gender`` ``M``, ``F`` or ``O`` (any case); an empty value clears
    ``middle_name``, ``last_name`` or ``address``. Raises :class:`~health_async.errors.InvalidRequest` naming the
    rule, never the pair (it is personal data, and an unknown field name may be a value typed in the wrong place).
    The library checks the values' own rules (names, pincode, date range) before sending.
    """
    fields: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip().lower().replace("-", "_")
        if not sep:
            raise InvalidRequest("--update takes FIELD=VALUE pairs")
        if name not in UPDATABLE:
            raise InvalidRequest("--update takes the fields " + ", ".join(UPDATABLE))
        if name in fields:
            raise InvalidRequest(f"--update gives {name} twice")
        value = value.strip()
        if name == "date_of_birth":
            try:
                fields[name] = dt.date.fromisoformat(value)
            except ValueError:
                raise InvalidRequest("date_of_birth must be YYYY-MM-DD") from None
        elif name == "gender":
            if value.upper() not in ("M", "F", "O"):
                raise InvalidRequest("gender must be M, F or O")
            fields[name] = value.upper()
        elif not value and name in _CLEARABLE:
            fields[name] = None
        else:
            fields[name] = value
    return fields


async def cmd_profile(client: HealthClient, args: argparse.Namespace) -> int:
    """``abha profile``: read (default), ``--update FIELD=VALUE ...`` or ``--delete --yes`` the ABHA profile."""
    if args.yes and not args.delete:
        _say("profile", "--yes goes with --delete")
        return 2
    if args.delete:
        if not args.yes:
            _say(
                "profile",
                "--delete removes the ABHA profile and every document and record linked to it, for good: "
                "add --yes to do it; nothing was sent",
            )
            return 2
        if not getattr(args, "user_id", None):
            _say("profile", "--delete needs --user-id OID on the command (whose profile); nothing was sent")
            return 2
        await client.abha.delete_profile(confirm=True, user_id=args.user_id)
        emit({"deleted": True})
        return 0
    if args.update:
        fields = parse_updates(args.update)
        await client.abha.update_profile(**fields)
        emit({"updated": sorted(fields, key=UPDATABLE.index)})
        return 0
    profile = await client.abha.profile()
    emit(profile)
    return 0


# ------------------------------------------------------------------------------------------------ card and QR


async def _asset(client: HealthClient, args: argparse.Namespace, label: str) -> int:
    """``abha card`` / ``abha qr``: the asset to ``--to`` (a path, or ``-``: stdout's binary buffer)."""

    async def fetch(to: Any) -> str:
        if label == "qr":
            return await client.abha.qr(to, as_json=args.as_json)
        return await client.abha.card(to)

    if args.to == "-":
        out = sys.stdout
        if out.isatty():
            _say(label, "stdout is a terminal: redirect it to a file (or use --to FILE); nothing was sent")
            return 2
        buffer = getattr(out, "buffer", None)
        if buffer is None:  # pragma: no cover - a replaced stdout without bytes
            _say(label, "stdout takes no bytes here: use --to FILE; nothing was sent")
            return 2
        out.flush()
        kind = await fetch(buffer)
        buffer.flush()
        _say(label, f"{kind} written to stdout")
        return 0
    try:
        kind = await fetch(args.to)
        size = await asyncio.to_thread(os.path.getsize, args.to)
    except BrokenPipeError:  # pragma: no cover - only stdout's reader goes away; left to cli.main
        raise
    except OSError as exc:  # the file (or its folder) could not be written: named by neither path nor content
        _say(label, f"{type(exc).__name__}: the file could not be written ({exc.strerror or 'error'})")
        return 1
    emit({"file": display_path(args.to), "content_type": kind, "bytes": size})
    return 0


async def cmd_card(client: HealthClient, args: argparse.Namespace) -> int:
    """``abha card --to PATH|-``: the ABHA card."""
    return await _asset(client, args, "card")


async def cmd_qr(client: HealthClient, args: argparse.Namespace) -> int:
    """``abha qr --to PATH|- [--as-json]``: the ABHA QR code (or its data)."""
    return await _asset(client, args, "qr")


# ------------------------------------------------------------------------------------------------ search, pincode


def _mobile_of(arg: str) -> str:
    """The mobile number of ``abha search``: the argument, or with ``-`` the first line of stdin."""
    if arg != "-":
        return arg
    line = sys.stdin.readline(_MAX_MOBILE_LINE + 2)
    if len(line.rstrip("\r\n")) > _MAX_MOBILE_LINE:
        raise InvalidRequest(f"the mobile number's line is longer than {_MAX_MOBILE_LINE} characters")
    if not line.strip():
        raise InvalidRequest("no mobile number on stdin (one line)")
    return line.strip()


async def cmd_search(client: HealthClient, args: argparse.Namespace) -> int:
    """``abha search MOBILE|-``: a JSON line per KYC-verified ABHA of the mobile number."""
    result = await client.abha.search(_mobile_of(args.mobile))
    for match in result.profiles:
        emit(match)
    if not result.profiles:
        _say("search", "no KYC-verified ABHA uses this mobile number")
    return 0


async def cmd_pincode(client: HealthClient, args: argparse.Namespace) -> int:
    """``abha pincode PINCODE``: the state and district of the pincode."""
    emit(await client.abha.pincode(args.pincode))
    return 0


# ------------------------------------------------------------------------------------------------ parsers

_PT_ID = (
    "X-Pt-Id (whose ABHA): the OID of --user-id, else of HEALTH_ASYNC_USER_ID. The output is personal data: keep it "
    "as such."
)


def add_commands(asub: Any, common: argparse.ArgumentParser) -> dict[str, Command]:
    """Add ``profile``, ``card``, ``qr``, ``search`` and ``pincode`` to the ``abha`` subparsers ``asub``; each
    subparser carries its handler as ``args.abha_run``. Returns the handlers by subcommand name."""
    handlers: dict[str, Command] = {}

    def parser(name: str, handler: Command, **kwargs: Any) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = asub.add_parser(name, parents=[common], **kwargs)
        p.set_defaults(abha_run=handler)
        handlers[name] = handler
        return p

    p = parser(
        "profile",
        cmd_profile,
        help="the ABHA profile (one JSON line: personal data); --update or --delete it",
        description="Print the user's ABHA profile as one JSON line: names, date of birth, gender, mobile, address, "
        "ABHA number and addresses, photo: personal data, for the user who asked. --update FIELD=VALUE ... changes "
        "the given fields (fields: " + ", ".join(UPDATABLE) + "; date_of_birth as YYYY-MM-DD, gender M, F or O; "
        "an empty value clears middle_name, last_name or address; a KYC-verified ABHA keeps its name, gender and "
        'date of birth) and prints {"updated": [fields]}; values typed on the command line are seen by other '
        "users of this machine (ps) and kept in the shell history. --delete --yes deletes the profile here, with "
        "every document and record linked to it, for good (ABDM keeps the ABHA): it needs --user-id OID on the "
        'command and prints {"deleted": true}; without --yes nothing is sent (exit 2). Update and delete are '
        "sent once, never repeated (an unknown outcome is an error: read the profile to see).",
        epilog=_PT_ID,
    )
    what = p.add_mutually_exclusive_group()
    what.add_argument(
        "--update",
        nargs="+",
        action="extend",
        metavar="FIELD=VALUE",
        help="change these fields (the others stay)",
    )
    what.add_argument("--delete", action="store_true", help="delete the ABHA profile for good (needs --yes)")
    p.add_argument("--yes", action="store_true", help="with --delete: yes, delete it")

    for name, handler, thing in (("card", cmd_card, "ABHA card"), ("qr", cmd_qr, "ABHA QR code")):
        p = parser(
            name,
            handler,
            help=f"the {thing} to a file or stdout (personal data)",
            description=f"Download the user's {thing} (personal data) to PATH, written whole or not at all, "
            'readable by its owner only, and print {"file", "content_type", "bytes"}; or with --to - write '
            "its bytes to stdout (not a terminal) and the content type to stderr. Retried as a read.",
            epilog=_PT_ID,
        )
        p.add_argument("--to", required=True, metavar="PATH|-", help="where to write it (- for stdout)")
        if name == "qr":
            p.add_argument(
                "--as-json",
                action="store_true",
                help="ask for the QR's data as JSON (name, ABHA number, mobile, ...) instead of the image",
            )

    p = parser(
        "search",
        cmd_search,
        help="the KYC-verified ABHAs of a mobile number (JSON lines: personal data)",
        description="Print one JSON line per KYC-verified ABHA of the mobile number (index, ABHA address, ABHA "
        "number masked, name, gender, age): personal data. MOBILE is 10 digits after an optional +91 (spaces "
        "allowed); '-' reads it from the first line of stdin, which keeps it out of the process list and the shell "
        "history. Nothing is sent when it breaks a rule (exit 2). No X-Pt-Id (the call declares none).",
    )
    p.add_argument("mobile", metavar="MOBILE|-", help="the mobile number, or - to read it from stdin")

    p = parser(
        "pincode",
        cmd_pincode,
        help="the state and district of a pincode (JSON)",
        description="Print the state and district (names and LGD codes) of an Indian pincode as one JSON line. "
        "PINCODE is 6 digits, not starting with 0 (else exit 2, nothing sent).",
    )
    p.add_argument("pincode", metavar="PINCODE", help="6 digits")
    return handlers
