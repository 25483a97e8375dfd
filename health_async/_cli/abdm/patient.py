"""``health-async abdm consents ...`` and ``health-async abdm discover``: ABDM from the patient's side (their PHR
app) on the command line, registered by :mod:`health_async._cli.abdm.hospital`.

::

    health-async abdm consents list [--status S ...] [--abha-address A] [--patient-oid O] [--clinic-id C]
                                    [--doctor-oid D]
    health-async abdm consents show CONSENT_ID [--show-display]
    health-async abdm consents approve CONSENT_ID --care-context HIP_ID:CARE_CONTEXT_ID ... [--hi-type T ...]
                                       [--partner-user-id P]
    health-async abdm consents deny CONSENT_ID [--reason TEXT] [--partner-user-id P]
    health-async abdm consents revoke [CONSENT_ID] [--artefact-id ID ...] [--partner-user-id P]
    health-async abdm discover HIP_ID [--ref-id REF] [--partner-user-id P]

**Consents.** ``list`` prints one JSON line per consent (``client.abdm.consents.list``: ids, status, record types,
period, times; never the ABHA address); ``--status`` (repeatable) keeps those with that status (judgement call: the
operation has no status filter, so it is applied here, to the whole unpaged answer). ``show`` prints one JSON
object: the consent's ``status`` (its entry in ``list``; ``null`` when not listed) and, per facility, the care
contexts shared and the ids of the documents received (``client.abdm.consents.details``); each care context's
display text says what the visit was (health data): only with ``--show-display``; documents' FHIR URLs never.
``approve`` shares the care contexts given as ``--care-context HIP_ID:CARE_CONTEXT_ID`` (repeatable; split at the
first ``:``; one consent artefact per facility, in the order first named), optionally only the record types
``--hi-type``; ``deny`` refuses with an optional ``--reason`` (never printed); ``revoke`` revokes the artefacts
``--artefact-id`` (repeatable), or every artefact of ``CONSENT_ID`` (read with ``client.abdm.request``). Each
prints one JSON line: ``{"consent_id", "approved": true, "hip_ids", "care_context_ids"}``, ``{"consent_id",
"denied": true}``, ``{"consent_id", "revoked_artefact_ids"}``.

**The consent PIN** (approve, revoke) is typed without echo (never a flag: it would stay in the shell's history
and the process list), checked as typed (4 digits: asked again, nothing sent) and never printed, nor in any
error. A wrong PIN is not asked again: exit 1 with the service's refusal (:class:`ConsentPinMismatch`; each wrong
PIN counts toward ABDM's block). Everything the command can check is checked before the PIN is asked (the
patient, the ``--care-context`` pairs, an id to revoke); the library's finer rules after it, still before
anything is sent.

**Never repeated.** Approve, deny and revoke are sent once. When the outcome is unknown (a timeout or 5XX after
sending) the command says so, with a line to check ``health-async abdm consents show CONSENT_ID`` before sending
again, and exits 1.

**Discover and link** (``client.abdm.discover_and_link``, interactive like ``abha register``): asks the facility
``HIP_ID`` for the person's records not yet linked to their ABHA (``--ref-id``: the person's id there, such as a
registration number; personal data, never printed), lists them numbered (their display text: what each record
is), lets the person choose (Enter: all; one record found is linked without asking), then for each record asks
the OTP the facility sent, without echo (a wrong OTP is asked again). ABDM links one record per OTP (one flow per
record): from the second record on, the facility is asked again and only the records still listed are linked.
The result is one JSON line ``{"hip_id", "linked": [care context ids]}`` (with ``"skipped"``: chosen records no
longer listed, e.g. linked meanwhile); also after a failure or Ctrl-C once a record was linked.

**The patient.** ``X-Pt-Id`` is ``--user-id``, else ``HEALTH_ASYNC_USER_ID`` (the user of the PHR app), or
``--partner-user-id`` (``X-Partner-Pt-Id``); approve, deny, revoke and discover need one (exit 2 before anything
is asked or sent). ``list`` and ``show`` are also the HIU's reads and need none.

**Exit status:** 0 done; 1 the service refused or failed (one line: the error's type and message), a wrong PIN,
an unknown outcome, input that ended, too many answers that did not move on; 2 bad usage: a rule of the library
broken (nothing sent), or a command that asks questions (approve, revoke, discover) run with a stdin that is not a
terminal (nothing asked or sent); 130 Ctrl-C (nothing more sent). Answers are read through :data:`PROMPT` (default
:func:`~health_async._cli._prompt.default_prompt`); tests replace it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from ... import _constants as C
from ...errors import ConsentOutcomeUnknown, HealthError, InvalidRequest, OtpMismatch, OutcomeUnknown
from ...models import ConsentArtefact, ConsentHiType, ConsentStatus, LinkStep
from ...resources.abdm._consent_pin import normalize_consent_pin
from .._output import Command, emit
from .._prompt import Conversation, GiveUp, Prompt, checkpoint, default_prompt, refuse_without_terminal

if TYPE_CHECKING:
    from ..._client import HealthClient
    from ...models import ConsentDetails, DiscoveredCareContext, DiscoveredPatient
    from ...resources.abdm._discover_flow import DiscoverAndLink

__all__ = ["PROMPT", "add_commands"]

#: The prompt the commands use (tests replace it).
PROMPT: Prompt = default_prompt

_STATUSES: Final = tuple(s.value for s in ConsentStatus if s is not ConsentStatus.UNKNOWN)
_HI_TYPES: Final = tuple(t.value for t in ConsentHiType if t is not ConsentHiType.UNKNOWN)
_PIN_QUESTION: Final = "Consent PIN (4 digits; typing is not shown): "


def _label(args: argparse.Namespace) -> str:
    return f"health-async abdm {args.abdm_command}" + (
        f" {args.consents_command}" if args.abdm_command == "consents" else ""
    )


def _need_patient(client: HealthClient, args: argparse.Namespace) -> None:
    """Refuse (exit 2, before anything is asked or sent) a patient command without a patient."""
    if client.user_id is None and args.partner_user_id is None:
        raise InvalidRequest(
            f"{_label(args)} needs the patient: --user-id OID (or {C.ENV_USER_ID}) or --partner-user-id; "
            "nothing was asked or sent"
        )


def _refuse_without_terminal(talk: Conversation) -> int | None:
    """Exit status 2 (nothing asked or sent) when stdin is not a terminal: the PIN and OTPs are typed on one."""
    return refuse_without_terminal(
        talk.prompt,
        talk.err,
        talk.label,
        "Run it in a terminal; a program answers consents and links records with client.abdm (Python).",
    )


def _unknown(args: argparse.Namespace, exc: OutcomeUnknown, consent_id: str | None) -> int:
    """An approve, deny or revoke whose outcome is unknown: the error, and what to check before sending again."""
    check = f"'health-async abdm consents show {consent_id}'" if consent_id else "'health-async abdm consents list'"
    print(
        f"{_label(args)}: {type(exc).__name__}: {exc}\n"
        f"{_label(args)}: it may have taken effect and was not repeated: check with {check} before sending it again",
        file=sys.stderr,
    )
    return 1


async def _ask_pin(talk: Conversation) -> str | int:
    """The consent PIN, typed without echo and checked as typed; or the exit status when the person stopped."""
    try:
        pin = talk.ask_valid(_PIN_QUESTION, normalize_consent_pin, secret=True)
        await checkpoint()
    except KeyboardInterrupt:
        talk.say(f"\n{talk.label}: cancelled; nothing was sent.")
        return 130
    except asyncio.CancelledError:
        talk.say(f"\n{talk.label}: cancelled; nothing was sent.")
        raise
    except EOFError:
        talk.say(f"\n{talk.label}: input ended before the PIN was typed; nothing was sent.")
        return 1
    except GiveUp as exc:
        talk.say(f"{talk.label}: {exc}")
        return 1
    return pin


# ------------------------------------------------------------------------------------------------ consents


async def _list(client: HealthClient, args: argparse.Namespace) -> int:
    consents = await client.abdm.consents.list(
        abha_address=args.abha_address,
        patient_oid=args.patient_oid,
        clinic_id=args.clinic_id,
        doctor_oid=args.doctor_oid,
    )
    wanted = set(args.status or ())
    for consent in consents:
        if not wanted or consent.status.value in wanted:
            emit(consent)
    return 0


def _details_json(details: ConsentDetails, status: ConsentStatus | None, show_display: bool) -> dict[str, Any]:
    hips = []
    for hip in details.hips:
        contexts = []
        for cc in hip.care_contexts:
            item: dict[str, Any] = {
                "care_context_id": cc.care_context_id,
                "status": cc.status.value,
                "created_at": cc.created_at,
                "document_ids": [d.document_id for d in cc.documents],
            }
            if show_display:
                item["display"] = cc.display
            contexts.append(item)
        hips.append({"hip_id": hip.hip_id, "hip_name": hip.hip_name, "care_contexts": contexts})
    return {"consent_id": details.consent_id, "status": None if status is None else status.value, "hips": hips}


async def _show(client: HealthClient, args: argparse.Namespace) -> int:
    details = await client.abdm.consents.details(args.consent_id)
    listed = await client.abdm.consents.list()
    status = next((c.status for c in listed if args.consent_id in (c.consent_id, c.consent_init_id)), None)
    emit(_details_json(details, status, args.show_display))
    return 0


def _artefacts(pairs: list[str]) -> list[ConsentArtefact]:
    """``HIP_ID:CARE_CONTEXT_ID`` pairs as one artefact per facility, in the order first named."""
    by_hip: dict[str, list[str]] = {}
    for i, pair in enumerate(pairs, start=1):
        hip_id, sep, cc_id = pair.partition(":")
        if not sep or not hip_id or not cc_id:
            raise InvalidRequest(f"--care-context #{i} must be HIP_ID:CARE_CONTEXT_ID")
        by_hip.setdefault(hip_id, []).append(cc_id)
    return [ConsentArtefact(hip_id, tuple(ids)) for hip_id, ids in by_hip.items()]


async def _approve(client: HealthClient, args: argparse.Namespace) -> int:
    _need_patient(client, args)
    artefacts = _artefacts(args.care_context)
    talk = Conversation(PROMPT, sys.stderr, _label(args))
    if (refused := _refuse_without_terminal(talk)) is not None:
        return refused
    pin = await _ask_pin(talk)
    if isinstance(pin, int):
        return pin
    try:
        await client.abdm.consents.approve(
            args.consent_id,
            pin=pin,
            artefacts=artefacts,
            hi_types=args.hi_type,
            partner_user_id=args.partner_user_id,
        )
    except ConsentOutcomeUnknown as exc:
        return _unknown(args, exc, args.consent_id)
    emit(
        {
            "consent_id": args.consent_id,
            "approved": True,
            "hip_ids": [a.hip_id for a in artefacts],
            "care_context_ids": [cc for a in artefacts for cc in a.care_contexts],
        }
    )
    return 0


async def _deny(client: HealthClient, args: argparse.Namespace) -> int:
    _need_patient(client, args)
    try:
        await client.abdm.consents.deny(args.consent_id, reason=args.reason, partner_user_id=args.partner_user_id)
    except ConsentOutcomeUnknown as exc:
        return _unknown(args, exc, args.consent_id)
    emit({"consent_id": args.consent_id, "denied": True})
    return 0


async def _revoke(client: HealthClient, args: argparse.Namespace) -> int:
    _need_patient(client, args)
    if args.consent_id is None and not args.artefact_id:
        raise InvalidRequest(f"{_label(args)} needs CONSENT_ID or --artefact-id; nothing was asked or sent")
    talk = Conversation(PROMPT, sys.stderr, _label(args))
    if (refused := _refuse_without_terminal(talk)) is not None:
        return refused
    pin = await _ask_pin(talk)
    if isinstance(pin, int):
        return pin
    try:
        revoked = await client.abdm.consents.revoke(
            args.consent_id, pin=pin, artefact_ids=args.artefact_id or None, partner_user_id=args.partner_user_id
        )
    except ConsentOutcomeUnknown as exc:
        return _unknown(args, exc, args.consent_id)
    emit({"consent_id": args.consent_id, "revoked_artefact_ids": list(revoked)})
    return 0


# ------------------------------------------------------------------------------------------------ discover

_Record = tuple["DiscoveredPatient", "DiscoveredCareContext"]


def _records(flow: DiscoverAndLink) -> list[_Record]:
    return [(patient, cc) for patient in flow.choices for cc in patient.care_contexts]


def _describe(record: _Record, several_patients: bool) -> str:
    """What a record is, for the person to recognise it: its display text (the id when there is none), and the
    patient's name when the facility matched several."""
    patient, cc = record
    text = cc.display or f"record {cc.care_context_id}"
    if several_patients and patient.display:
        text += f" (patient: {patient.display})"
    return text


def _choose(answer: str, count: int) -> list[int]:
    """``1,3`` / ``1 3`` / Enter (all) as 0-based indexes, in the order given, none repeated."""
    if not answer:
        return list(range(count))
    picked: list[int] = []
    for part in answer.replace(",", " ").split():
        if not part.isdigit() or not 1 <= int(part) <= count:
            raise InvalidRequest(f"type numbers from 1 to {count}, e.g. 1,3 (Enter: all)")
        if int(part) - 1 not in picked:
            picked.append(int(part) - 1)
    return picked


def _same(a: _Record, b: _Record) -> bool:
    return a[1].care_context_id == b[1].care_context_id and (
        a[0].patient_id is None or b[0].patient_id is None or a[0].patient_id == b[0].patient_id
    )


async def _link_one(flow: DiscoverAndLink, record: _Record, talk: Conversation) -> str:
    """Link ``record`` (one of the flow's choices): ``link`` (the OTP sent), then the OTP asked until it is right;
    returns the linked care context id."""
    patient, cc = record
    while flow.next_step is LinkStep.SELECT_CARE_CONTEXT:
        try:
            await flow.link(cc.care_context_id, patient_id=patient.patient_id)
        except OutcomeUnknown:
            talk.strike("  The request for an OTP was lost on the way: an SMS may or may not come.")
            talk.ask("  Press Enter to ask for a new OTP (Ctrl-C stops): ")
            await checkpoint()
    talk.idle = 0
    talk.say("  The facility sent an OTP to the mobile number it holds for you.")
    while flow.next_step is LinkStep.VERIFY_OTP:
        answer = talk.ask("  OTP (6 digits; typing is not shown): ", secret=True)
        await checkpoint()
        if not answer:
            talk.strike("  Type the OTP from the SMS (ABDM sends no new one for this link).")
            continue
        try:
            await flow.confirm(answer)
        except OtpMismatch:
            talk.strike("  That OTP is not right; type it again (ABDM locks the link after a few wrong OTPs).")
        except InvalidRequest as exc:
            talk.strike(f"  {exc}")
        except OutcomeUnknown:
            talk.strike("  The answer was lost on the way; type the OTP again (confirming again is safe).")
    linked = flow.linked
    return (linked.care_context_id if linked is not None else None) or cc.care_context_id


async def _discover(client: HealthClient, args: argparse.Namespace) -> int:
    _need_patient(client, args)
    label = _label(args)
    talk = Conversation(PROMPT, sys.stderr, label)
    if (refused := _refuse_without_terminal(talk)) is not None:
        return refused

    async def start() -> DiscoverAndLink:
        return await client.abdm.discover_and_link(
            args.hip_id, ref_id=args.ref_id, auto_link=False, partner_user_id=args.partner_user_id
        )

    linked: list[str] = []
    skipped: list[str] = []

    def result() -> None:
        line: dict[str, Any] = {"hip_id": args.hip_id, "linked": linked}
        if skipped:
            line["skipped"] = skipped
        emit(line)

    flow = await start()  # bad input: InvalidRequest (exit 2), nothing asked
    try:
        records = _records(flow)
        if not records:
            talk.say("The facility holds no record of yours that is not linked already.")
            result()
            return 0
        several = len(flow.choices) > 1
        talk.say("Records found at the facility:")
        for i, record in enumerate(records, start=1):
            talk.say(f"  {i}) {_describe(record, several)}")
        if len(records) == 1:
            chosen = records
        else:
            picks = talk.ask_valid(f"Which to link [1-{len(records)}, e.g. 1,3] (Enter: all): ", _choose_in(records))
            await checkpoint()
            chosen = [records[i] for i in picks]
        for n, record in enumerate(chosen):
            if n:  # one record per flow: ask the facility again
                flow = await start()
                match = next((r for r in _records(flow) if _same(r, record)), None)
                if match is None:
                    talk.say(f"  {_describe(record, several)}: no longer listed (linked meanwhile?); skipped.")
                    skipped.append(record[1].care_context_id)
                    continue
                record = match
            talk.say(f"Linking {_describe(record, several)} ({n + 1} of {len(chosen)}):")
            linked.append(await _link_one(flow, record, talk))
            talk.say("  Linked.")
    except KeyboardInterrupt:
        talk.say(f"\n{label}: cancelled; nothing more was sent.")
        return _partial(result, linked, 130)
    except asyncio.CancelledError:
        talk.say(f"\n{label}: cancelled; nothing more was sent.")
        if linked:
            result()
        raise
    except EOFError:
        talk.say(f"\n{label}: input ended before the linking did; nothing more was sent.")
        return _partial(result, linked, 1)
    except GiveUp as exc:
        talk.say(f"{label}: {exc}")
        return _partial(result, linked, 1)
    except HealthError as exc:
        talk.say(f"{label}: {type(exc).__name__}: {exc}")
        return _partial(result, linked, 1)
    talk.say(f"Done: {len(linked)} record(s) linked to your ABHA.")
    result()
    return 0


def _choose_in(records: list[_Record]) -> Callable[[str], list[int]]:
    return lambda answer: _choose(answer, len(records))


def _partial(result: Callable[[], None], linked: list[str], code: int) -> int:
    """After a failure or Ctrl-C: the result line when a record was linked already; the exit status."""
    if linked:
        result()
    return code


# ------------------------------------------------------------------------------------------------ parser


def _patient_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--partner-user-id",
        metavar="P",
        help=f"your id of the patient (X-Partner-Pt-Id), instead of --user-id / {C.ENV_USER_ID}",
    )


def add_commands(asub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``consents`` (``list``, ``show``, ``approve``, ``deny``, ``revoke``) and ``discover`` to the ``abdm``
    group's subparsers ``asub``; each parser's ``abdm_run`` default is its handler."""
    parser = asub.add_parser(
        "consents",
        help="the patient's consents: list, show, approve or revoke (consent PIN typed without echo), deny",
        description="Consent requests from the patient's side. Approve and revoke ask for the consent PIN without "
        "echo; approve, deny and revoke are sent once: an unknown outcome (exit 1) says to check "
        "'abdm consents show CONSENT_ID' first.",
    )
    csub = parser.add_subparsers(dest="consents_command", required=True, metavar="SUBCOMMAND")
    handlers: dict[str, Command] = {
        "list": _list,
        "show": _show,
        "approve": _approve,
        "deny": _deny,
        "revoke": _revoke,
    }

    p = csub.add_parser(
        "list",
        parents=[common],
        help="the consent requests (JSON lines)",
        description="One JSON line per consent request: ids, status, record types, period, times.",
    )
    p.add_argument("--status", action="append", choices=_STATUSES, help="only consents with this status (repeatable)")
    p.add_argument("--abha-address", metavar="A", help="only this patient's (never printed)")
    p.add_argument("--patient-oid", metavar="O", help="only this patient's (their OID)")
    p.add_argument("--clinic-id", metavar="C", help="only those of this clinic")
    p.add_argument("--doctor-oid", metavar="D", help="only those of this doctor")

    p = csub.add_parser(
        "show",
        parents=[common],
        help="one consent: its status and, per facility, the care contexts shared (JSON)",
        description="The consent's status and, per facility, the care contexts shared and the documents received. "
        "Display texts (health data) only with --show-display.",
    )
    p.add_argument("consent_id", metavar="CONSENT_ID")
    p.add_argument("--show-display", action="store_true", help="also show each care context's display text")

    p = csub.add_parser(
        "approve",
        parents=[common],
        help="approve a consent request (consent PIN typed without echo)",
        description="Approve CONSENT_ID, sharing the care contexts given (one consent artefact per facility). "
        "The consent PIN is asked without echo; sent once.",
    )
    p.add_argument("consent_id", metavar="CONSENT_ID")
    p.add_argument(
        "--care-context",
        action="append",
        required=True,
        metavar="HIP_ID:CARE_CONTEXT_ID",
        help="a care context to share, with its facility's HIP id (repeatable)",
    )
    p.add_argument("--hi-type", action="append", choices=_HI_TYPES, help="share only this record type (repeatable)")
    _patient_flags(p)

    p = csub.add_parser(
        "deny", parents=[common], help="deny a consent request", description="Deny CONSENT_ID; sent once."
    )
    p.add_argument("consent_id", metavar="CONSENT_ID")
    p.add_argument("--reason", metavar="TEXT", help="why (sent to the requester; never printed)")
    _patient_flags(p)

    p = csub.add_parser(
        "revoke",
        parents=[common],
        help="revoke a granted consent (consent PIN typed without echo)",
        description="Revoke the consent artefacts --artefact-id, or every artefact of CONSENT_ID. The consent PIN "
        "is asked without echo; sent once.",
    )
    p.add_argument("consent_id", metavar="CONSENT_ID", nargs="?")
    p.add_argument("--artefact-id", action="append", metavar="ID", help="a consent artefact to revoke (repeatable)")
    _patient_flags(p)
    for name, handler in handlers.items():
        csub.choices[name].set_defaults(abdm_run=handler)

    p = asub.add_parser(
        "discover",
        parents=[common],
        help="find your records at a facility and link them to your ABHA (interactive; OTP typed without echo)",
        description="Ask facility HIP_ID for your records not yet linked to your ABHA, choose which to link (Enter: "
        "all), and type the OTP the facility sends for each, without echo. Ends with one JSON line of the linked "
        "care context ids. Ctrl-C stops (exit 130).",
    )
    p.add_argument("hip_id", metavar="HIP_ID", help="the facility's ABDM id")
    p.add_argument("--ref-id", metavar="REF", help="your id at the facility, e.g. a registration number")
    _patient_flags(p)
    p.set_defaults(abdm_run=_discover)
