"""``client.abdm.consents``: consents (create, list, details, approve, deny, revoke), the consent PIN and
auto-approval (``registration.yml``: ``/abdm/v1/consents/*``; pages ``consents/**``, ``phr/consents.mdx``,
``flows/m3.mdx``).

An HIU asks for a patient's records with :meth:`Consents.create` and follows them with :meth:`Consents.list` and
:meth:`Consents.details`; the patient (their PHR app) answers with :meth:`Consents.approve` (choosing, per
facility, the care contexts, record types and dates: one consent artefact per HIP), :meth:`Consents.deny`, and
later :meth:`Consents.revoke` (per artefact)::

    consents = client.abdm.consents
    await consents.approve(consent_id, pin="4821", artefacts=[ConsentArtefact("HIP-1", ("visit-1", "visit-2"))])

**The PIN.** Approving and revoking need the patient's consent PIN (``pin/verify``: "Verify the consent pin to
approve/revoke consents"): :meth:`Consents.approve` and :meth:`Consents.revoke` check it first, with the scope
ABDM's consent manager defines for each (:class:`~health_async.models.PinScope`), and send nothing more when it
is wrong (:class:`~health_async.errors.ConsentPinMismatch`). A PIN is 4 digits, checked before anything is sent
(:class:`~health_async.errors.InvalidConsentPin`; see :mod:`health_async.resources.abdm._consent_pin`), never
retried, never in a ``repr``, log line, error message or flow state. ``pin_exists``, ``set_pin``, ``verify_pin``,
``change_pin`` and the guided reset (:meth:`Consents.reset_pin`) manage it.

**Never repeated.** ``create``, ``approve``, ``deny``, ``revoke``, every PIN call and ``set_auto_approval`` are
sent once (:meth:`Resource._send_once`): retried only when they cannot have reached the service. An approve, deny
or revoke whose outcome is unknown raises :class:`~health_async.errors.ConsentOutcomeUnknown`: check the consent
with :meth:`Consents.details` (or its status in :meth:`Consents.list`, or ``client.abdm.request(consent_id)``)
before sending it again. Reads (``list``, ``details``, ``pin_exists``, ``auto_approval``) are retried as reads,
except on HTTP 500: ABDM answers its rate limits with a 500, and a retry would extend them (as
``client.abha.session_status``).

**Errors.** The service's error body ``{code, error, source_error}`` is an
:class:`~health_async.errors.AbhaError` (``ABDM-1022`` / ``ABDM-1100``
:class:`~health_async.errors.AbhaRateLimited`, ``ABDM-1027`` :class:`~health_async.errors.AbhaBlocked`, a wrong
OTP of the PIN reset :class:`~health_async.errors.OtpMismatch`). A wrong PIN: the vendor documents no code for it,
so any HTTP 400 with that body answered to a PIN check (``pin/verify``, and the old PIN of ``pin/change``) is a
:class:`~health_async.errors.ConsentPinMismatch` (judgement call: the PIN is all such a call checks once its
shape has been checked here).

Every call sends the optional ``X-Pt-Id`` / ``X-Partner-Pt-Id`` / ``X-Hip-Id`` headers the client or the call gives
(``oid`` and ``partner_user_id`` override the first two), except that a call naming its patient in the body
(:meth:`Consents.create`; :meth:`Consents.list` with ``abha_address`` or ``patient_oid``; :meth:`Consents.details`
with ``abha_address``) sends the first two only when the call gives them, never the client's ``user_id`` /
``partner_user_id`` (they name another patient); the operations that define the ``oid`` query parameter (approve,
deny, revoke, auto-approval) also get it when ``oid`` is given.
"""

from __future__ import annotations

import datetime as dt
import re
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, Final

from ... import _routes as R
from ..._abha_input import normalize_abha_address
from ..._checks import checked
from ..._config import NOT_GIVEN, NotGiven, check_header_value
from ..._files import StreamBody
from ..._retry import RetryPolicy
from ..._wire import structure, structure_many
from ...errors import ConsentOutcomeUnknown, InvalidRequest, ResponseValidationError
from ...models.abdm._consents import (
    AutoApprovalPolicy,
    Consent,
    ConsentArtefact,
    ConsentCreated,
    ConsentDetails,
    ConsentHiType,
    ConsentPurpose,
    PinScope,
)
from ...models.records._cases import HiType
from ._consent_pin import ConsentPinMixin, normalize_consent_pin

__all__ = ["Consents"]

_MAX_ID: Final = 256
_MAX_TEXT: Final = 500
_UNSAFE_ID: Final = re.compile(r"[\x00-\x20\x7f]")
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # newline and tab allowed in free text
_HI_VALUES: Final = tuple(t.value for t in ConsentHiType if t is not ConsentHiType.UNKNOWN)
_PURPOSES: Final = tuple(p.value for p in ConsentPurpose if p is not ConsentPurpose.UNKNOWN)
Headers = dict[str, str]
Params = list[tuple[str, str]]


# ------------------------------------------------------------------------------------------------ input rules


def _id(value: object, name: str) -> str:
    """An id (consent, artefact, HIP, care context): a non-empty str of at most 256 characters without whitespace
    or control characters."""
    if not isinstance(value, str):
        raise InvalidRequest(f"{name} must be a str")
    if not value:
        raise InvalidRequest(f"{name} must not be empty")
    if len(value) > _MAX_ID or _UNSAFE_ID.search(value):
        raise InvalidRequest(f"{name} must be at most {_MAX_ID} characters, no whitespace or control characters")
    return value


def _ids(values: object, name: str) -> tuple[str, ...]:
    """One id (a ``str``) or an iterable of them: at least one, none repeated."""
    items = (values,) if isinstance(values, str) else values
    if not isinstance(items, Iterable):
        raise InvalidRequest(f"{name} must be an id or an iterable of ids")
    ids = tuple(_id(value, f"{name}[{i}]") for i, value in enumerate(items))
    if not ids:
        raise InvalidRequest(f"{name} must hold at least one id")
    if len(set(ids)) != len(ids):
        raise InvalidRequest(f"{name} must not repeat an id")
    return ids


def _text(value: object, name: str, *, line: bool = True) -> str:
    """Free text the person typed (a reason, a name): non-empty, at most 500 characters, no control characters
    (a ``line`` has no newline either)."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest(f"{name} must be a non-empty str")
    if len(value) > _MAX_TEXT or _CONTROL.search(value) or (line and ("\n" in value or "\t" in value)):
        limit = "one line of" if line else "text of"
        raise InvalidRequest(f"{name} must be {limit} at most {_MAX_TEXT} printable characters")
    return value


def _hi_types(values: object, name: str) -> list[str]:
    """Record types: :class:`ConsentHiType`, :class:`HiType` or their wire values; at least one, none repeated."""
    items = (values,) if isinstance(values, str | ConsentHiType | HiType) else values
    if not isinstance(items, Iterable):
        raise InvalidRequest(f"{name} must be an iterable of record types (ConsentHiType, HiType or their values)")
    wire: list[str] = []
    for i, value in enumerate(items):
        text = value.value if isinstance(value, ConsentHiType | HiType) else value
        if not isinstance(text, str) or text not in _HI_VALUES:
            raise InvalidRequest(f"{name}[{i}] must be one of {', '.join(_HI_VALUES)}")
        wire.append(text)
    if not wire:
        raise InvalidRequest(f"{name} must hold at least one record type")
    if len(set(wire)) != len(wire):
        raise InvalidRequest(f"{name} must not repeat a record type")
    return wire


def _purpose(value: object) -> str:
    text = value.value if isinstance(value, ConsentPurpose) else value
    if not isinstance(text, str) or text not in _PURPOSES:
        raise InvalidRequest(f"purpose must be one of {', '.join(_PURPOSES)}")
    return text


def aware_datetime(value: object, name: str) -> dt.datetime:
    """``value`` if it is a timezone-aware datetime, else :class:`InvalidRequest` naming ``name`` (never the
    value). Shared with ``client.abdm.push_health_data``'s ``now``."""
    if not isinstance(value, dt.datetime):
        raise InvalidRequest(f"{name} must be a datetime")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidRequest(f"{name} must be timezone-aware (a naive time is ambiguous: UTC or IST?)")
    return value


def _when(value: object, name: str) -> str:
    """An aware datetime as the service's ISO 8601 in UTC (``2024-03-01T10:00:00Z``)."""
    utc = aware_datetime(value, name).astimezone(dt.UTC)
    return utc.isoformat(timespec="milliseconds" if utc.microsecond else "seconds").replace("+00:00", "Z")


def _duration(start: object, end: object, prefix: str) -> dict[str, str]:
    """``CommonsDuration`` from an optional start and end (``start`` before ``end`` when both are given)."""
    duration: dict[str, str] = {}
    if start is not None:
        duration["from"] = _when(start, f"{prefix}start")
    if end is not None:
        duration["to"] = _when(end, f"{prefix}end")
    if isinstance(start, dt.datetime) and isinstance(end, dt.datetime) and not start < end:
        raise InvalidRequest(f"{prefix}start must be before {prefix}end")
    return duration


def _artefact(item: object, where: str) -> dict[str, Any]:
    """The wire entry (``ApproveConsent``) of one :class:`ConsentArtefact`, every rule checked; ``where`` names it
    in the error (never its content)."""
    if not isinstance(item, ConsentArtefact):
        raise InvalidRequest(f"{where} must be a ConsentArtefact(hip_id, care_contexts, ...)")
    entry: dict[str, Any] = {"hip_id": _id(item.hip_id, f"{where}.hip_id"), "access_mode": "view"}
    given: object = item.care_contexts
    items = (given,) if isinstance(given, str) else given
    if not isinstance(items, Iterable):
        raise InvalidRequest(f"{where}.care_contexts must be care context ids or (id, display) pairs")
    contexts: list[dict[str, str]] = []
    for j, context in enumerate(items):
        label = f"{where}.care_contexts[{j}]"
        if isinstance(context, str):
            contexts.append({"id": _id(context, label)})
        elif isinstance(context, tuple) and len(context) == 2:
            contexts.append({"id": _id(context[0], f"{label}.id"), "display": _text(context[1], f"{label}.display")})
        else:
            raise InvalidRequest(f"{label} must be a care context id or an (id, display) pair")
    if not contexts:
        raise InvalidRequest(f"{where}.care_contexts must hold at least one care context")
    if len({c["id"] for c in contexts}) != len(contexts):
        raise InvalidRequest(f"{where}.care_contexts must not repeat a care context")
    entry["care_contexts"] = contexts
    if item.hi_types is not None:
        entry["hi_types"] = _hi_types(item.hi_types, f"{where}.hi_types")
    duration = _duration(item.start, item.end, f"{where}.")
    if duration:
        entry["duration"] = duration
    if item.erase_at is not None:
        entry["erase_at"] = _when(item.erase_at, f"{where}.erase_at")
    return entry


def _form(fields: Mapping[str, str]) -> StreamBody:
    """An ``application/x-www-form-urlencoded`` body (``FormDataSettingsRequest``)."""
    raw = urllib.parse.urlencode(fields).encode("ascii")

    async def chunks() -> AsyncIterator[bytes]:
        yield raw

    return StreamBody(size=len(raw), content_type="application/x-www-form-urlencoded", factory=chunks)


class Consents(ConsentPinMixin):
    """Consents, the consent PIN and auto-approval: ``client.abdm.consents`` (see the module). The PIN calls and the
    request plumbing are in its base, :class:`~health_async.resources.abdm._consent_pin.ConsentPinMixin`."""

    # -------------------------------------------------------------------- the HIU's side

    @checked
    async def create(
        self,
        abha_address: str,
        *,
        purpose: ConsentPurpose | str,
        hi_types: Iterable[ConsentHiType | HiType | str],
        start: dt.datetime,
        end: dt.datetime,
        expiry: dt.datetime,
        hip_id: str | None = None,
        hip_name: str | None = None,
        patient_oid: str | None = None,
        clinic_id: str | None = None,
        doctor_oid: str | None = None,
        requester_name: str | None = None,
        appointment_id: str | None = None,
        oid: str | None = None,
        partner_user_id: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> ConsentCreated:
        """``POST /abdm/v1/consents/create``: as an HIU, ask the patient ``abha_address`` for their records
        (``ConsentCreateConsentRequest``): the ``purpose`` (a :class:`~health_async.models.ConsentPurpose` or its
        value), the record types ``hi_types`` (wire ``record_types``), the records' date range ``start`` to
        ``end`` and when the consent would expire (``expiry``), optionally the facility to fetch from
        (``hip_id``, ``hip_name``: wire ``hip_identifier``), the patient's OID (``patient_oid``), your clinic,
        doctor and the requester's name (wire ``hiu``) and an ``appointment_id``.

        Checked before anything is sent: the ABHA address (ABDM's format), the purpose and record types (the
        schema's enums; none repeated), the times (timezone-aware; ``start`` before ``end``; ``expiry`` in the
        future), the ids and texts. Sent once (a repeat would ask the patient twice).

        Returns the request's ``consent_init_id`` (``None`` when the service answers without a body, as the OpenAPI's
        204 says: find it with :meth:`list`). The patient answers on their app; ``abha.consent_update`` webhooks
        follow its status.

        Raises:
            InvalidRequest, InvalidAbhaAddress: a rule broken (the message names it, never the value); nothing sent.
            AbhaError: the service refused (e.g. ``ABDM-1063``, an invalid date range).
            OutcomeUnknown: the request may have been made: check :meth:`list` before asking again.
        """
        patient: dict[str, str] = {"health_id": normalize_abha_address(abha_address)}
        if patient_oid is not None:
            patient["oid"] = check_header_value("patient_oid", patient_oid)
        body: dict[str, Any] = {"patient": patient, "purpose": _purpose(purpose)}
        body["record_types"] = _hi_types(hi_types, "hi_types")
        period = _duration(start, end, "")
        period["expiry"] = _when(expiry, "expiry")
        if expiry <= dt.datetime.now(dt.UTC):
            raise InvalidRequest("expiry must be in the future")
        body["period"] = period
        if hip_id is not None or hip_name is not None:
            hip: dict[str, str] = {}
            if hip_id is not None:
                hip["id"] = _id(hip_id, "hip_id")
            if hip_name is not None:
                hip["name"] = _text(hip_name, "hip_name")
            body["hip_identifier"] = hip
        hiu: dict[str, Any] = {}
        if clinic_id is not None:
            hiu["clinic_id"] = _id(clinic_id, "clinic_id")
        if doctor_oid is not None:
            hiu["d_oid"] = _id(doctor_oid, "doctor_oid")
        if requester_name is not None:
            hiu["requester"] = {"name": _text(requester_name, "requester_name")}
        if hiu:
            body["hiu"] = hiu
        if appointment_id is not None:
            body["appointment_id"] = _id(appointment_id, "appointment_id")
        data = await self._call(
            "POST",
            R.PATH_CONSENTS_CREATE,
            "consents_create",
            once=True,
            headers=self._named_patient_headers(oid, partner_user_id),  # the body names the patient
            json=body,
            retry=retry,
            timeout=timeout,
        )
        return ConsentCreated() if data is None else structure(data, ConsentCreated)

    @checked
    async def list(
        self,
        *,
        abha_address: str | None = None,
        patient_oid: str | None = None,
        clinic_id: str | None = None,
        doctor_oid: str | None = None,
        oid: str | None = None,
        partner_user_id: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> tuple[Consent, ...]:
        """``POST /abdm/v1/consents/list``: the consent requests made (``ConsentConsentDetail``: ids, status,
        record types, period), narrowed to a patient (``abha_address``, ``patient_oid``) and to your clinic or
        doctor (``clinic_id``, ``doctor_oid``) when given.

        The operation has no paging (no token, offset or page in ``ConsentListConsentRequest`` or its answer): the
        whole answer is returned as a tuple (judgement call: no iterator where there are no pages). A read, though
        a POST: retried as one, except on HTTP 500 (see the module).
        """
        body: dict[str, Any] = {}
        patient: dict[str, str] = {}
        if abha_address is not None:
            patient["health_id"] = normalize_abha_address(abha_address)
        if patient_oid is not None:
            patient["oid"] = check_header_value("patient_oid", patient_oid)
        if patient:
            body["patient"] = patient
        hiu: dict[str, str] = {}
        if clinic_id is not None:
            hiu["clinic_id"] = _id(clinic_id, "clinic_id")
        if doctor_oid is not None:
            hiu["d_oid"] = _id(doctor_oid, "doctor_oid")
        if hiu:
            body["hiu"] = hiu
        data = await self._call(
            "POST",
            R.PATH_CONSENTS_LIST,
            "consents_list",
            once=False,
            headers=(self._named_patient_headers if patient else self._headers)(oid, partner_user_id),
            json=body,
            retry=retry,
            timeout=timeout,
        )
        if data is None:
            return ()
        if not isinstance(data, dict):
            raise ResponseValidationError("consents_list: the response does not fit: expected a JSON object")
        return structure_many(data.get("consents"), Consent, "consents")

    @checked
    async def details(
        self,
        consent_id: str,
        *,
        abha_address: str | None = None,
        oid: str | None = None,
        partner_user_id: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> ConsentDetails:
        """``POST /abdm/v1/consents/details``: per facility, the care contexts shared under ``consent_id`` and the
        documents received (:class:`~health_async.models.ConsentDetails`; its ``care_context_ids`` are what the
        records API retrieves). ``abha_address`` (wire ``health_id``) is sent when given. A read, retried as one
        except on HTTP 500. An answer without a body is an empty :class:`ConsentDetails`.

        This is also where to look after :class:`~health_async.errors.ConsentOutcomeUnknown`: once approved, the
        shared care contexts are listed.
        """
        cid = _id(consent_id, "consent_id")
        body: dict[str, str] = {"consent_id": cid}
        if abha_address is not None:
            body["health_id"] = normalize_abha_address(abha_address)
        data = await self._call(
            "POST",
            R.PATH_CONSENTS_DETAILS,
            "consents_details",
            once=False,
            headers=(self._named_patient_headers if abha_address is not None else self._headers)(oid, partner_user_id),
            json=body,
            retry=retry,
            timeout=timeout,
        )
        if data is None:
            return ConsentDetails(consent_id=cid)
        return structure(data, ConsentDetails, consent_id=cid)

    # -------------------------------------------------------------------- the patient's answer

    @checked
    async def approve(
        self,
        consent_id: str,
        *,
        pin: str,
        artefacts: Iterable[ConsentArtefact],
        hi_types: Iterable[ConsentHiType | HiType | str] | None = None,
        start: dt.datetime | None = None,
        end: dt.datetime | None = None,
        erase_at: dt.datetime | None = None,
        oid: str | None = None,
        partner_user_id: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> None:
        """Approve the consent request ``consent_id`` with the patient's consent ``pin``: ``POST
        /abdm/v1/consents/pin/verify`` (scope ``consentrequest.approve``), then ``POST /abdm/v1/consents/approve``
        (``ApproveRequest``, access mode ``view``).

        ``artefacts``: one :class:`~health_async.models.ConsentArtefact` per facility shared (ABDM makes one
        consent artefact per HIP), each with the care contexts to share and optionally its own record types, date
        range and ``erase_at``; ``hi_types``, ``start`` / ``end`` and ``erase_at`` here apply to the whole
        approval (wire ``hi_types``, ``duration``, ``erase_at``).

        Checked before anything is sent: the id, the PIN (4 digits), each artefact (a HIP id, at least one care
        context, none repeated, record types from the schema's enum, aware times with start before end) and no HIP
        twice. Both requests are sent once.

        Raises:
            InvalidRequest, InvalidConsentPin: a rule broken; nothing sent.
            ConsentPinMismatch: wrong PIN; the approval was not sent.
            OutcomeUnknown: the PIN check's outcome is unknown; the approval was not sent (calling again is safe).
            ConsentOutcomeUnknown: the approval may have taken effect: check :meth:`details` (``exc.consent_id``)
                before sending it again.
            AbhaRateLimited, AbhaBlocked, AbhaError: the service refused.
        """
        cid = _id(consent_id, "consent_id")
        code = normalize_consent_pin(pin)
        given = artefacts
        entries = [_artefact(item, f"artefacts[{i}]") for i, item in enumerate(given)]
        if not entries:
            raise InvalidRequest("artefacts must hold at least one ConsentArtefact (one per facility shared)")
        hips = [e["hip_id"] for e in entries]
        if len(set(hips)) != len(hips):
            raise InvalidRequest("artefacts must not name a hip_id twice (ABDM makes one artefact per HIP)")
        body: dict[str, Any] = {"id": cid, "access_mode": "view", "consent_artefacts": entries}
        if hi_types is not None:
            body["hi_types"] = _hi_types(hi_types, "hi_types")
        duration = _duration(start, end, "")
        if duration:
            body["duration"] = duration
        if erase_at is not None:
            body["erase_at"] = _when(erase_at, "erase_at")
        headers, params = self._who(oid, partner_user_id)
        await self._pin_check(code, PinScope.APPROVE, "consents_approve", headers, retry, timeout)
        await self._call(
            "POST",
            R.PATH_CONSENTS_APPROVE,
            "consents_approve",
            once=True,
            unknown=self._unknown("consents_approve", cid),
            headers=headers,
            params=params,
            json=body,
            retry=retry,
            timeout=timeout,
        )

    @checked
    async def deny(
        self,
        consent_id: str,
        *,
        reason: str | None = None,
        oid: str | None = None,
        partner_user_id: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> None:
        """``POST /abdm/v1/consents/deny``: deny the consent request ``consent_id``, with the patient's ``reason``
        (plain text, at most 500 characters; optional in ``DenyRequest``). No PIN: the service asks for one only to
        approve or revoke. Sent once.

        Raises:
            InvalidRequest: a rule broken; nothing sent.
            ConsentOutcomeUnknown: the denial may have taken effect: check :meth:`details` / :meth:`list` before
                sending it again.
            AbhaError: the service refused.
        """
        body: dict[str, str] = {"id": _id(consent_id, "consent_id")}
        if reason is not None:
            body["reason"] = _text(reason, "reason", line=False)
        headers, params = self._who(oid, partner_user_id)
        await self._call(
            "POST",
            R.PATH_CONSENTS_DENY,
            "consents_deny",
            once=True,
            unknown=self._unknown("consents_deny", body["id"]),
            headers=headers,
            params=params,
            json=body,
            retry=retry,
            timeout=timeout,
        )

    @checked
    async def revoke(
        self,
        consent_id: str | None = None,
        *,
        pin: str,
        artefact_ids: str | Iterable[str] | None = None,
        oid: str | None = None,
        partner_user_id: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> tuple[str, ...]:
        """Revoke a granted consent with the patient's consent ``pin``: ``POST /abdm/v1/consents/pin/verify``
        (scope ``consent.revoke``), then ``POST /abdm/v1/consents/revoke`` (``RevokeRequest``); returns the
        artefact ids revoked.

        ABDM revokes per consent artefact (one per HIP: a patient may cut off one hospital and not the others):
        give ``artefact_ids`` (one id or several), or only ``consent_id`` to revoke every artefact of that consent,
        read first with ``GET /abdm/v1/request`` (``client.abdm.request(consent_id, kind="consent")``, its
        providers' ``consent_artefact_id``; judgement call: ``RevokeRequest`` takes artefact ids only). With both,
        the artefacts given are revoked and ``consent_id`` only names the consent in an unknown outcome.

        Checked before anything is sent: the PIN (4 digits), the ids (none repeated). The PIN check and the revoke
        are sent once.

        Raises:
            InvalidRequest, InvalidConsentPin: a rule broken, or neither id given, or the consent has no artefact
                (not granted); nothing sent.
            NotFoundError: (``consent_id`` alone) the patient has no such consent request; nothing revoked.
            ConsentPinMismatch: wrong PIN; nothing revoked.
            OutcomeUnknown: the PIN check's outcome is unknown; the revoke was not sent (calling again is safe).
            ConsentOutcomeUnknown: the revoke may have taken effect: check :meth:`details` (or the request's
                status) before sending it again.
        """
        code = normalize_consent_pin(pin)
        cid = None if consent_id is None else _id(consent_id, "consent_id")
        headers, params = self._who(oid, partner_user_id)  # before the lookup below: a bad caller sends nothing
        if artefact_ids is not None:
            ids = _ids(artefact_ids, "artefact_ids")
        elif cid is None:
            raise InvalidRequest("revoke needs consent_id or artefact_ids")
        else:
            request = await self._client.abdm.request(cid, kind="consent", oid=oid, retry=retry, timeout=timeout)
            ids = tuple(dict.fromkeys(p.artefact_id for p in request.providers if p.artefact_id))
            if not ids:
                raise InvalidRequest("revoke: the consent has no consent artefact (is it granted?); nothing sent")
        await self._pin_check(code, PinScope.REVOKE, "consents_revoke", headers, retry, timeout)
        await self._call(
            "POST",
            R.PATH_CONSENTS_REVOKE,
            "consents_revoke",
            once=True,
            unknown=self._unknown("consents_revoke", cid, ids),
            headers=headers,
            params=params,
            json={"consent_artefacts": [*ids]},
            retry=retry,
            timeout=timeout,
        )
        return ids

    # -------------------------------------------------------------------- auto-approval

    @checked
    async def auto_approval(
        self,
        *,
        oid: str | None = None,
        partner_user_id: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> AutoApprovalPolicy:
        """``GET /abdm/v1/consents/auto-approval``: the patient's auto-approval policy (``SettingsResponse``:
        ``enabled`` / ``disabled``). A read, retried as one except on HTTP 500."""
        headers, params = self._who(oid, partner_user_id)
        data = await self._call(
            "GET",
            R.PATH_CONSENTS_AUTO_APPROVAL,
            "consents_auto_approval",
            once=False,
            headers=headers,
            params=params,
            retry=retry,
            timeout=timeout,
        )
        return structure(data, AutoApprovalPolicy)

    @checked
    async def set_auto_approval(
        self,
        *,
        oid: str | None = None,
        partner_user_id: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> AutoApprovalPolicy:
        """``PATCH /abdm/v1/consents/auto-approval``: create or update the patient's auto-approval policy (the
        patient's health locker: ``abha.locker_created`` follows with its ids); returns the policy as answered.

        The operation's body is a form (``FormDataSettingsRequest``) holding only the patient's ``oid`` (this
        ``oid``, else the client's ``user_id``; one of them is required), also sent as the ``oid`` query parameter.
        Judgement call: the vendor documents no field to choose what the policy allows or to turn it off, so
        none is offered. Sent once (a repeat could set up a second locker): on ``OutcomeUnknown`` read
        :meth:`auto_approval` before sending again.
        """
        user = oid if oid is not None else self._client.user_id
        if user is None:
            raise InvalidRequest("set_auto_approval needs the patient: pass oid= here or user_id= to HealthClient")
        user = check_header_value("oid", user)
        data = await self._call(
            "PATCH",
            R.PATH_CONSENTS_AUTO_APPROVAL,
            "consents_set_auto_approval",
            once=True,
            headers=self._headers(oid, partner_user_id),
            params=[("oid", user)],
            body=_form({"oid": user}),
            retry=retry,
            timeout=timeout,
        )
        return AutoApprovalPolicy() if data is None else structure(data, AutoApprovalPolicy)

    # -------------------------------------------------------------------- plumbing

    def _who(self, oid: str | None, partner_user_id: str | None) -> tuple[Headers, Params]:
        """The partner headers, and the ``oid`` query parameter of the operations that define it."""
        params: Params = [] if oid is None else [("oid", check_header_value("oid", oid))]
        return self._headers(oid, partner_user_id), params

    @staticmethod
    def _unknown(
        operation: str, consent_id: str | None, artefact_ids: tuple[str, ...] = ()
    ) -> Callable[[], ConsentOutcomeUnknown]:
        def make() -> ConsentOutcomeUnknown:
            check = (
                "client.abdm.consents.details(exc.consent_id)"
                if consent_id is not None
                else "the consent's status (client.abdm.consents.list(), or client.abdm.request(consent id))"
            )
            return ConsentOutcomeUnknown(
                f"{operation}: the request may have reached the service and was not repeated; check {check} "
                "before sending it again",
                consent_id=consent_id,
                artefact_ids=artefact_ids,
                operation=operation,
            )

        return make
