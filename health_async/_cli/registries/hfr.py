"""``health-async hfr register --clinic-id C --hfr-id H`` and ``health-async hfr search HFR_ID``: a facility's HFR ID
in the documented order (abdm-connect/flows/m4.mdx: search first; link when it exists, else onboard, then link),
with ``client.hfr``.

* ``hfr register``: one JSON line, ``{"clinic_id", "hfr_id", "onboarded", "facility_id", "facility"}``
  (``onboarded``: true when the registry did not hold the facility and this run onboarded it; ``facility``: the
  registry's entry the search found, else ``null``). The onboarding and the link are sent once: when an answer is
  lost (``OutcomeUnknown``) the command says so with a hint, as one JSON line (``clinic_id``, ``hfr_id``,
  ``error``, ``hint``), and exits 1: running it again is safe, it searches first.
* ``hfr search HFR_ID``: one JSON line, ``{"hfr_id", "facility"}`` (``facility`` ``null`` when the registry does
  not hold it: exit 0 all the same, a search that finds nothing has not failed).
* Exit status: 0 done; 1 a refusal or an error (one line on stderr: its type and message); 2 bad usage (a
  malformed HFR ID or clinic id: refused before anything is sent).

A facility's registry entry is public data (a hospital's name, type and address): printed as the registry gives it.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ..._plain import unstructure
from ..._registry_input import normalize_clinic_id, normalize_hfr_id
from ...errors import InvalidRequest, OutcomeUnknown
from .._output import Command, emit, report_error

if TYPE_CHECKING:
    from ..._client import HealthClient

__all__ = ["add_parsers", "run_register", "run_search"]


def _checked(args: argparse.Namespace, *, clinic: bool) -> tuple[str, str] | None:
    try:
        hfr_id = normalize_hfr_id(args.hfr_id)
        clinic_id = normalize_clinic_id(args.clinic_id) if clinic else ""
    except InvalidRequest as exc:
        print(f"health-async hfr: {exc}; nothing was sent", file=sys.stderr)
        return None
    return clinic_id, hfr_id


async def run_register(client: HealthClient, args: argparse.Namespace) -> int:
    """``hfr register``: search, then link (or onboard and link); returns the exit status."""
    checked = _checked(args, clinic=True)
    if checked is None:
        return 2
    clinic_id, hfr_id = checked
    try:
        done = await client.hfr.register(clinic_id, hfr_id)
    except OutcomeUnknown as exc:
        hint = (
            "the onboarding or the link may have taken effect; it was not repeated. Run 'health-async hfr register' "
            "again: it searches first, so a facility onboarded already is only linked"
        )
        return report_error(exc, hint, as_json=True, clinic_id=clinic_id, hfr_id=hfr_id)
    emit(
        {
            "clinic_id": done.linked.clinic_id or clinic_id,
            "hfr_id": done.linked.hfr_id or hfr_id,
            "onboarded": done.was_onboarded,
            "facility_id": None if done.onboarded is None else done.onboarded.facility_id,
            "facility": None if done.facility is None else unstructure(done.facility),
        }
    )
    return 0


async def run_search(client: HealthClient, args: argparse.Namespace) -> int:
    """``hfr search HFR_ID``: the registry's entry, or ``null``; returns the exit status."""
    checked = _checked(args, clinic=False)
    if checked is None:
        return 2
    _, hfr_id = checked
    found = await client.hfr.search(hfr_id)
    emit({"hfr_id": hfr_id, "facility": None if found is None else unstructure(found)})
    return 0


async def _hfr(client: Any, args: argparse.Namespace) -> int:
    if args.hfr_command == "register":
        return await run_register(client, args)
    return await run_search(client, args)


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> dict[str, Command]:
    """Add ``hfr`` (``register``, ``search``) to ``sub``; return ``{"hfr": handler}``."""
    parser = sub.add_parser(
        "hfr",
        help="your facility's HFR ID: search the registry, onboard and link the facility",
        description="The Health Facility Registry (ABDM milestone 4): search a facility by HFR ID; register one for "
        "your clinic (search first; link when the registry holds it, else onboard, then link). One JSON line.",
    )
    hsub = parser.add_subparsers(dest="hfr_command", required=True, metavar="SUBCOMMAND")
    p = hsub.add_parser(
        "register",
        parents=[common],
        help="search, then link (or onboard and link) the facility for your clinic",
        description="Search the registry for HFR_ID; when it holds the facility, link it to your clinic, else "
        "onboard it, then link it. Onboarding and linking are sent once: after a lost answer, run again (it "
        "searches first).",
    )
    p.add_argument("--clinic-id", required=True, metavar="C", help="your clinic's id (the ABDM bridge's)")
    p.add_argument("--hfr-id", required=True, metavar="H", help="the facility's HFR ID, e.g. IN2910000123")
    p = hsub.add_parser(
        "search",
        parents=[common],
        help="the registry's entry of a facility",
        description='The registry\'s entry of a facility: {"hfr_id", "facility"} (null when not there).',
    )
    p.add_argument("hfr_id", metavar="HFR_ID", help="the facility's HFR ID, e.g. IN2910000123")
    return {"hfr": _hfr}
