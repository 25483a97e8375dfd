"""``health-async abdm ...``: the hospital's side of ABDM's exchange from the command line.

::

    health-async abdm link --care-context-id ID --display TEXT --hi-type TYPE
                           (--abha-address A | --oid O | --partner-user-id P; at least one)
                           [--data BUNDLE.json] [--json]
    health-async abdm linked --hip-id H [--oid O] [--json] [--show-display]
    health-async abdm onboard --hip-id H --name NAME [--clinic-id C]
    health-async abdm providers [--oid O]

(The patient's side, ``abdm consents list | show | approve | deny | revoke`` and ``abdm discover``, is
:mod:`health_async._cli.abdm.patient`'s, registered here.)

``abdm link`` links one care context to the patient's ABHA. The service answers 202: the link is *sent*, and its
outcome (``LINKED`` / ``ERRORED``) comes later in an ``abha.link_care_context`` webhook (``health-async webhooks
serve`` shows it). It prints one line saying so (``--json``: one JSON object). ``--data FILE`` (``-``: stdin) is the
visit's FHIR bundle: the service stores it and answers data requests for it itself. Neither the bundle nor the ABHA
address is ever printed. A link is sent once, never retried: when its outcome is unknown (a timeout or 5XX after
sending) the command says so with a hint (check ``abdm linked`` before linking again) and exits 1.

``abdm linked`` lists the care contexts linked at facility ``--hip-id`` (for ``--oid``, else the client's user id):
a table of care_context_id, status and created_at, or with ``--json`` one JSON object per care context.

``abdm onboard`` onboards your facility ``--hip-id`` (its ABDM HFR id) under ``--name`` (``POST
/abdm/v1/hip/onboard``; ``--clinic-id``: your clinic it belongs to) and prints the service's answer as one JSON
object: ``hip_id``, ``hip_name``, ``hip_code`` and ``scan_share_url`` (where the facility's Scan & Share QR code
points). Sent once, never retried: when its outcome is unknown the command says so with a hint, as one JSON object
(``hip_id``, ``error``, ``hint``), and exits 1.

``abdm providers`` lists the facilities the user ``--oid`` (else the client's user id) has care contexts linked at
(``GET /abdm/v1/care-contexts/providers``): one JSON object per facility, ``hip_id`` and ``hip_name``; none is
nothing on stdout and a line on stderr.

Judgement call, the output of these two: JSON only, as most commands of the tool (``describe``, ``profile``), with
no ``--json`` flag: what they print is the service's data about facilities, meant for a script (the QR code's URL,
the facility code), with nothing personal to hide and no sentence a person needs instead.

Judgement call, ``display``: it is what the patient sees in their PHR app ("Diabetes follow-up, 3 March"), so it is
health data (the library keeps it out of ``repr``); it is printed only with ``--show-display``, in either output.
Tying it to ``--json`` instead would leak it into every script's logs that merely wanted machine-readable ids, and
hide it from a person who asked for it: whether personal data is shown is a choice of its own, as ``result --fhir``
and ``webhooks serve --show-data`` are. The care context id is your own id of the visit and is always shown.

Exit status: 0 done; 1 the service refused or failed, or a link's or onboarding's outcome is unknown; 2 bad usage:
a rule of the library broken (its :class:`~health_async.errors.InvalidRequest`, e.g. an unknown hi_type, an id too
long, a bundle that is not a JSON object: one line on stderr, nothing sent) or a ``--data`` file that cannot be
read.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any, Final

from ...errors import InvalidRequest, OutcomeUnknown
from ...models import HiType
from ...models.abdm._hospital import CareContext, LinkedCareContext
from ...models.abdm._user_linking import CareContextProvider, FacilityOnboarded
from .._output import Command, InputError, emit, open_input, report_error
from . import patient as abdm_patient

__all__ = ["NO_CLIENT", "add_commands"]

#: Commands of this module that run without a HealthClient built by ``cli.run`` (they get ``None``).
NO_CLIENT: frozenset[str] = frozenset()

#: The webhook that reports each link's outcome.
LINK_EVENT: Final = "abha.link_care_context"
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _read_bundle(source: str) -> bytes:
    """The bytes of a ``--data`` file (``-``: stdin); :class:`InputError` (exit 2) when it cannot be read. The
    library checks that it is a JSON object (:class:`InvalidRequest` naming the field, never the content)."""
    stream = open_input(source)
    try:
        data = stream.read()
    except OSError as exc:
        raise InputError(f"the bundle file cannot be read ({exc.strerror or type(exc).__name__})") from None
    finally:
        if stream is not sys.stdin and stream is not getattr(sys.stdin, "buffer", None):
            stream.close()
    return data.encode("utf-8") if isinstance(data, str) else data


async def _link(client: Any, args: argparse.Namespace) -> int:
    if args.abha_address is None and args.oid is None and args.partner_user_id is None:
        raise InvalidRequest("abdm link needs the patient: --abha-address, --oid or --partner-user-id")
    bundle = _read_bundle(args.data) if args.data is not None else None
    context = CareContext(args.care_context_id, args.display, args.hi_type, bundle)
    try:
        await client.abdm.link_care_contexts(
            [context], abha_address=args.abha_address, oid=args.oid, partner_user_id=args.partner_user_id
        )
    except OutcomeUnknown as exc:
        hint = "the link may have been made: check with 'health-async abdm linked' before linking again"
        return report_error(exc, hint, as_json=args.json, care_context_id=args.care_context_id)
    # from here the id and hi_type are known to be clean: the library checked them before sending
    if args.json:
        emit(
            {
                "care_context_id": args.care_context_id,
                "hi_type": str(args.hi_type),
                "with_data": bundle is not None,
                "sent": True,
                "outcome_event": LINK_EVENT,
            }
        )
    else:
        print(
            f"care context {args.care_context_id} sent for linking; "
            f"the outcome comes in an {LINK_EVENT} webhook (LINKED or ERRORED)"
        )
        sys.stdout.flush()
    return 0


def _cell(value: str | None) -> str:
    """A table cell: ``-`` for nothing; control characters (the service's text, bound for a terminal) as ``?``."""
    return _CONTROL.sub("?", value) if value else "-"


def _linked_json(item: LinkedCareContext, show_display: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "care_context_id": item.care_context_id,
        "status": item.status.value,
        "created_at": item.created_at,
    }
    if show_display:
        out["display"] = item.display
    return out


async def _linked(client: Any, args: argparse.Namespace) -> int:
    items: tuple[LinkedCareContext, ...] = await client.abdm.linked_care_contexts(args.hip_id, oid=args.oid)
    if args.json:
        for item in items:
            emit(_linked_json(item, args.show_display))
        return 0
    if not items:
        print("no care contexts linked", file=sys.stderr)
        return 0
    header = ["care_context_id", "status", "created_at"] + (["display"] if args.show_display else [])
    rows = [header]
    for item in items:
        row = [_cell(item.care_context_id), item.status.value, _cell(item.created_at)]
        rows.append(row + ([_cell(item.display)] if args.show_display else []))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    sys.stdout.flush()
    return 0


async def _onboard(client: Any, args: argparse.Namespace) -> int:
    try:
        facility: FacilityOnboarded = await client.abdm.onboard_facility(
            args.hip_id, args.name, clinic_id=args.clinic_id
        )
    except OutcomeUnknown as exc:
        hint = (
            "the facility may have been onboarded; it was not sent again: "
            "onboard it again only once you know it was not"
        )
        return report_error(exc, hint, as_json=True, hip_id=args.hip_id)
    emit(
        {
            "hip_id": facility.hip_id,
            "hip_name": facility.hip_name,
            "hip_code": facility.hip_code,
            "scan_share_url": facility.scan_share_url,
        }
    )
    return 0


async def _providers(client: Any, args: argparse.Namespace) -> int:
    items: tuple[CareContextProvider, ...] = await client.abdm.linked_providers(oid=args.oid)
    for item in items:
        emit({"hip_id": item.hip_id, "hip_name": item.hip_name})
    if not items:
        print("no linked providers", file=sys.stderr)
    return 0


_HANDLERS: dict[str, Command] = {"link": _link, "linked": _linked, "onboard": _onboard, "providers": _providers}


async def _abdm(client: Any, args: argparse.Namespace) -> int:
    patient: Command | None = getattr(args, "abdm_run", None)  # consents ..., discover
    if patient is not None:
        return await patient(client, args)
    return await _HANDLERS[args.abdm_command](client, args)


def add_commands(sub: Any, common: argparse.ArgumentParser) -> dict[str, Command]:
    """Add ``abdm`` (``link``, ``linked``, ``onboard``, ``providers``, and :mod:`.abdm_patient`'s ``consents ...``
    and ``discover``) to ``sub``; return ``{"abdm": handler}``."""
    parser = sub.add_parser(
        "abdm",
        help="ABDM: link a care context to an ABHA, list the linked ones, onboard a facility, the linked providers "
        "(hospital side); consents and discover-and-link (patient side)",
        description="ABDM exchange commands for a hospital (HIP): link, linked, onboard, providers; link outcomes "
        f"arrive by webhook ({LINK_EVENT}): see 'health-async webhooks serve'. For a patient: consents (list, show, "
        "approve, deny, revoke) and discover (find records at a facility and link them, interactive).",
    )
    asub = parser.add_subparsers(dest="abdm_command", required=True, metavar="SUBCOMMAND")

    p = asub.add_parser(
        "link",
        parents=[common],
        help="link one care context to a patient's ABHA (the outcome comes by webhook)",
        description="Link one care context (a visit) to the patient's ABHA. Name the patient with at least one of "
        "--abha-address, --oid, --partner-user-id. Prints that the link was sent; its outcome comes in an "
        f"{LINK_EVENT} webhook. Never retried: if the outcome is unknown (exit 1), check 'abdm linked' first. "
        "Exits 2 for a value the library refuses (nothing sent).",
    )
    p.add_argument("--care-context-id", required=True, metavar="ID", help="your id of the visit (unique per patient)")
    p.add_argument("--display", required=True, metavar="TEXT", help="what the patient sees in their PHR app")
    p.add_argument(
        "--hi-type", required=True, metavar="TYPE", help="kind of record: " + ", ".join(t.value for t in HiType)
    )
    p.add_argument("--abha-address", metavar="A", help="the patient's ABHA address, e.g. name@abdm (never printed)")
    p.add_argument("--oid", metavar="O", help="the patient's OID in the service")
    p.add_argument("--partner-user-id", metavar="P", help="your id of the patient, known to the service")
    p.add_argument(
        "--data",
        metavar="BUNDLE.json",
        help="the visit's FHIR bundle (a JSON object; '-' for stdin): the service then answers data requests itself",
    )
    p.add_argument("--json", action="store_true", help="print a JSON object instead of a sentence")

    p = asub.add_parser(
        "linked",
        parents=[common],
        help="the care contexts linked at a facility (table, or JSON lines)",
        description="List the care contexts linked at facility --hip-id for patient --oid (default: the client's "
        "user id): care_context_id, status, created_at. The display text is health data: shown only with "
        "--show-display.",
    )
    p.add_argument("--hip-id", required=True, metavar="H", help="your facility's HIP id")
    p.add_argument("--oid", metavar="O", help="the patient's OID (default: --user-id / HEALTH_ASYNC_USER_ID)")
    p.add_argument("--json", action="store_true", help="one JSON object per care context instead of a table")
    p.add_argument("--show-display", action="store_true", help="also show each display text (health data)")

    p = asub.add_parser(
        "onboard",
        parents=[common],
        help="onboard your facility as an HIP (JSON out: its hip_code and Scan & Share URL)",
        description="Onboard facility --hip-id (its ABDM HFR id) under --name. Prints the service's answer as one "
        "JSON object: hip_id, hip_name, hip_code, scan_share_url. Sent once: if the outcome is unknown (exit 1) it "
        "is not retried. Exits 2 for a value the library refuses (nothing sent).",
    )
    p.add_argument("--hip-id", required=True, metavar="H", help="your facility's HIP id (its HFR id)")
    p.add_argument("--name", required=True, metavar="NAME", help="the facility's name")
    p.add_argument("--clinic-id", metavar="C", help="your clinic the facility belongs to")

    p = asub.add_parser(
        "providers",
        parents=[common],
        help="the facilities a user has care contexts linked at (JSON lines)",
        description="List the facilities (HIPs) user --oid (default: the client's user id) has care contexts "
        "linked at: one JSON object per facility, hip_id and hip_name.",
    )
    p.add_argument("--oid", metavar="O", help="the user's OID (default: --user-id / HEALTH_ASYNC_USER_ID)")
    abdm_patient.add_commands(asub, common)
    return {"abdm": _abdm}
