"""``health-async patients ...``: the patient directory from the command line (JSON out, one object per line).

* ``patients search PREFIX [--limit N]``: one line per patient found.
* ``patients get OID``: the full profile.
* ``patients by-mobile MOBILE``: one line per patient with that number (check this before creating again).
* ``patients create --first-name ... --dob YYYY-MM-DD --gender F [--mobile ...]``: prints ``{"oid": ...}``. When
  the outcome is unknown (a timeout or 5XX after sending) it prints ``{"error": ...}`` with a hint and exits 1;
  it never retries by itself.

Personal data given as flags is never echoed in an error message (a bad ``--dob`` says which format it wants).
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from ...errors import OutcomeUnknown
from .._output import Command, emit, report_error

__all__ = ["NO_CLIENT", "add_commands"]

#: Commands of this module that run without a HealthClient built by ``cli.run`` (they get ``None``).
NO_CLIENT: frozenset[str] = frozenset()


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError("dates are YYYY-MM-DD") from None


async def _search(client: Any, args: argparse.Namespace) -> int:
    for patient in await client.patients.search(args.prefix, limit=args.limit):
        emit(patient)
    return 0


async def _get(client: Any, args: argparse.Namespace) -> int:
    emit(await client.patients.get(args.oid))
    return 0


async def _by_mobile(client: Any, args: argparse.Namespace) -> int:
    for patient in await client.patients.by_mobile(args.mobile, full_profile=args.full_profile):
        emit(patient)
    return 0


async def _create(client: Any, args: argparse.Namespace) -> int:
    try:
        created = await client.patients.create(
            first_name=args.first_name,
            middle_name=args.middle_name,
            last_name=args.last_name,
            full_name=args.full_name,
            dob=args.dob,
            gender=args.gender,
            mobile=args.mobile,
            email=args.email,
            salutation=args.salutation,
            blood_group=args.blood_group,
            username=args.username,
            abha=args.abha,
        )
    except OutcomeUnknown as exc:
        hint = "the patient may have been created: check with 'health-async patients by-mobile' before trying again"
        return report_error(exc, hint, as_json=True)
    emit(created)
    return 0


_HANDLERS: dict[str, Command] = {"search": _search, "get": _get, "by-mobile": _by_mobile, "create": _create}


async def _patients(client: Any, args: argparse.Namespace) -> int:
    return await _HANDLERS[args.patients_command](client, args)


def add_commands(sub: Any, common: argparse.ArgumentParser) -> dict[str, Command]:
    """Add ``patients`` and its subcommands to ``sub``; return ``{"patients": handler}``."""
    parser = sub.add_parser(
        "patients",
        help="the patient directory: search, get, by-mobile, create (JSON)",
        description="Patient directory commands. Each needs the client-id (HEALTH_ASYNC_CLIENT_ID or --client-id).",
    )
    psub = parser.add_subparsers(dest="patients_command", required=True, metavar="SUBCOMMAND")

    p = psub.add_parser("search", parents=[common], help="patients whose username, mobile or name starts with PREFIX")
    p.add_argument("prefix", metavar="PREFIX", help="start of a username, mobile number or full name")
    p.add_argument("--limit", type=int, default=10, help="at most this many (1..50, default 10)")

    p = psub.add_parser("get", parents=[common], help="one patient's full profile")
    p.add_argument("oid", metavar="OID", help="the patient's id")

    p = psub.add_parser("by-mobile", parents=[common], help="patients registered with a mobile number")
    p.add_argument("mobile", metavar="MOBILE", help="Indian mobile number, e.g. +91 98765 43210")
    p.add_argument("--full-profile", action="store_true", help="every field, not the short form")

    p = psub.add_parser(
        "create",
        parents=[common],
        help="add a patient (never retried: check by-mobile first if a create failed)",
        description="Add a patient; prints {'oid': ...}. Give --first-name (with optional --middle-name, "
        "--last-name) or --full-name. If the outcome is unknown, prints an error with a hint and exits 1.",
    )
    p.add_argument("--first-name")
    p.add_argument("--middle-name")
    p.add_argument("--last-name")
    p.add_argument("--full-name")
    p.add_argument("--dob", type=_date, required=True, metavar="YYYY-MM-DD", help="date of birth")
    p.add_argument("--gender", required=True, choices=["M", "F", "O"])
    p.add_argument("--mobile", help="Indian mobile number")
    p.add_argument("--email")
    p.add_argument("--salutation")
    p.add_argument("--blood-group", choices=["A+", "A-", "B+", "B-", "AB+", "AB-", "O+", "O-"])
    p.add_argument("--username", help="UHID / partner id, unique in the workspace")
    p.add_argument("--abha", help="ABHA address, e.g. name@abdm")
    return {"patients": _patients}
