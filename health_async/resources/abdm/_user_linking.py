"""The hospital's answers to a patient's own search (user-initiated linking,
``care-contexts/discover/introduction.mdx``), and the facility's onboarding.

A patient looks for their records at your facility from a PHR app; the service sends you three webhooks and you
answer each with a call (``registration.yml``)::

    abha.care_context_discover              -> await client.abdm.answer_discover(event, patient_or_None)
    abha.care_context_discover_link_init    -> (send an OTP) await client.abdm.answer_link_init(event, ...)
    abha.context_discover_link_confirm      -> (check it)   await client.abdm.answer_link_confirm(event, ...)

:func:`health_async.webhooks.abdm_handler` (and :func:`~health_async.webhooks.abdm_asgi`) make these three calls for
you, the OTP included, given ``on_discover=`` and ``on_link_otp=``.

**Sent once.** Each answer goes through :meth:`Resource._send_once`: never repeated once it may have reached the
service (an unknown outcome is :class:`~health_async.errors.OutcomeUnknown`). **Checked before sending**
(:class:`~health_async.errors.InvalidRequest`, naming the rule, never the value): the event is the right one and
carries the ids the answer names, the patient's reference and display are lines of text, every care context as for
:meth:`Abdm.link_care_contexts`, an error is a :class:`~health_async.models.LinkingError`, an expiry is
timezone-aware.

**Headers.** ``X-Hip-Id`` is the event's ``hip_id`` (the facility the patient searched), else the client's;
``X-Pt-Id`` and ``X-Partner-Pt-Id`` the event's ``oid`` and ``partner_patient_id``, else the client's.

Judgement calls:

* A :class:`~health_async.models.MatchedPatient` becomes one ``patients`` item per HI type (``ModelsPatient``
  has one ``hi_type`` for all its care contexts), each with the patient's ``ref_num`` and ``display``, in the order
  the care contexts were given.
* A patient with no care contexts is answered as no match (:attr:`LinkingError.NO_MATCH`): ABDM has nothing to
  offer the patient.
* ``otp_expiry`` is sent as ISO 8601 UTC with milliseconds (``2025-06-19T07:30:00.000Z``): the schema says only
  "string".
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any, Final, TypeVar

from ... import _routes as R
from ..._checks import checked
from ..._config import NOT_GIVEN, NotGiven, check_header_value
from ..._retry import RetryPolicy
from ..._wire import structure, structure_many
from ...errors import InvalidRequest
from ...models.abdm._events import CareContextDiscover, DiscoverLinkConfirm, DiscoverLinkInit
from ...models.abdm._hospital import CareContext
from ...models.abdm._user_linking import CareContextProvider, FacilityOnboarded, LinkingError, MatchedPatient
from ...models.records._cases import HiType
from ...models.webhooks._events import EventKind, WebhookEvent
from ._base import AbdmBase
from .consents import aware_datetime

__all__ = ["MAX_REFERENCE", "UserLinkingMixin", "discovered_patients"]

#: The longest patient reference or display accepted (the vendor gives none; ABDM's gateway takes 255).
MAX_REFERENCE: Final = 255
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_HI_TYPES: Final = frozenset(t.value for t in HiType)
_T = TypeVar("_T")


def _line(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest(f"{name} must be a non-empty str")
    if len(value) > MAX_REFERENCE or _CONTROL.search(value):
        raise InvalidRequest(f"{name} must be at most {MAX_REFERENCE} printable characters")
    return value


def _offered(item: object, where: str) -> tuple[str, str, str]:
    """``(care_context_id, display, hi_type)`` of one care context offered, checked as
    :meth:`Abdm.link_care_contexts` checks it (its ``data`` is not sent, so not read)."""
    if not isinstance(item, CareContext):
        raise InvalidRequest(f"{where} must be a CareContext(care_context_id, display, hi_type)")
    hi_type = item.hi_type.value if isinstance(item.hi_type, HiType) else item.hi_type
    if not isinstance(hi_type, str) or hi_type not in _HI_TYPES:
        raise InvalidRequest(f"{where}.hi_type must be one of {', '.join(sorted(_HI_TYPES))}")
    return _line(item.care_context_id, f"{where}.care_context_id"), _line(item.display, f"{where}.display"), hi_type


def discovered_patients(patient: MatchedPatient, where: str = "patient") -> list[dict[str, Any]]:
    """The wire ``patients`` (``ModelsPatient`` items) of one patient: one item per HI type, every rule checked
    (the :class:`InvalidRequest` names ``where``'s field, never its value)."""
    if not isinstance(patient, MatchedPatient):
        raise InvalidRequest(f"{where} must be a MatchedPatient(reference, display, care_contexts) or None")
    reference = _line(patient.reference, f"{where}.reference")
    display = _line(patient.display, f"{where}.display")
    groups: dict[str, list[dict[str, str]]] = {}
    seen: set[str] = set()
    for i, item in enumerate(patient.care_contexts):
        cid, shown, hi_type = _offered(item, f"{where}.care_contexts[{i}]")
        if cid in seen:
            raise InvalidRequest(f"{where}.care_contexts must not repeat a care_context_id")
        seen.add(cid)
        groups.setdefault(hi_type, []).append({"ref_num": cid, "display": shown})
    return [
        {"ref_num": reference, "display": display, "hi_type": hi_type, "care_contexts": items}
        for hi_type, items in groups.items()
    ]


def _error(error: LinkingError) -> dict[str, Any]:
    if not isinstance(error, LinkingError):
        raise InvalidRequest("error must be a LinkingError")
    return {"code": int(error), "message": error.message}


def _payload(event: WebhookEvent | _T, model: type[_T], kind: EventKind) -> _T:
    """The typed data of ``event`` (an event of ``kind``, or its data already typed)."""
    if isinstance(event, model):
        return event
    if not isinstance(event, WebhookEvent) or event.kind is not kind:
        raise InvalidRequest(f"event must be an {kind.value} event (or its payload())")
    data = event.payload()
    if not isinstance(data, model):  # pragma: no cover - EVENT_PAYLOADS maps the event to the model
        raise InvalidRequest(f"event must be an {kind.value} event")
    return data


def _need(value: str | None, what: str) -> str:
    if not value:
        raise InvalidRequest(f"the event carries no {what}: it cannot be answered")
    return check_header_value(what, value)


class UserLinkingMixin(AbdmBase):
    """``client.abdm``'s answers to a patient's own search, and the facility's onboarding (see the module)."""

    def _answer_headers(self, hip_id: str | None, oid: str | None, partner: str | None) -> dict[str, str]:
        return self._partner_headers(
            NOT_GIVEN if not oid else oid, NOT_GIVEN if not partner else partner, NOT_GIVEN if not hip_id else hip_id
        )

    @checked
    async def answer_discover(
        self,
        event: WebhookEvent | CareContextDiscover,
        patient: MatchedPatient | None,
        *,
        error: LinkingError = LinkingError.NO_MATCH,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> None:
        """``POST /abdm/v1/care-contexts/on-discover``: answer a patient's discovery (the
        ``abha.care_context_discover`` webhook, or its :meth:`~WebhookEvent.payload`) with the one patient of your
        records it matched and their unlinked care contexts, or with ``error`` (default
        :attr:`~health_async.models.LinkingError.NO_MATCH`) when ``patient`` is ``None`` or has no care contexts.

        ABDM's rule: when several of your patients match, answer no match (``None``) rather than guess.

        Raises:
            InvalidRequest: not a discovery, one without ``request_id`` / ``txn_id``, a bad patient or error;
                nothing is sent.
            OutcomeUnknown: the answer may have reached the service; it was not repeated.
            ApiError: the service refused the answer.
        """
        request = _payload(event, CareContextDiscover, EventKind.CARE_CONTEXT_DISCOVER)
        body: dict[str, Any] = {
            "request_id": _need(request.request_id, "request_id"),
            "txn_id": _need(request.txn_id, "txn_id"),
        }
        await self._answer_patients(
            R.PATH_ON_DISCOVER, "on_discover", request, body, patient, error, retry=retry, timeout=timeout
        )

    @checked
    async def answer_link_init(
        self,
        event: WebhookEvent | DiscoverLinkInit,
        *,
        reference: str | None = None,
        otp_expires_at: dt.datetime | None = None,
        error: LinkingError | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> None:
        """``POST /abdm/v1/care-contexts/discover/link/on-init``: tell the service the linking OTP was sent (the
        answer to an ``abha.care_context_discover_link_init`` webhook): ``reference`` is the link reference (wire
        ``ref_num``, which the PHR app's confirmation names as ``linkRefNumber``), ``otp_expires_at`` when the OTP
        expires (aware). Or refuse the link with ``error`` (then neither is needed).

        Make ``reference`` a fresh, unguessable token per link request (:func:`secrets.token_urlsafe`), kept with
        the OTP and the requester (the discovery's ABHA address and ``oid``), rather than your patient's
        reference: two ABHA users may discover the same patient of yours, and the confirmation names only this
        reference, so a reference shared by their link requests lets one confirm the other's (the receivers do
        this for you).

        Raises:
            InvalidRequest: not a link request, one without ``request_id`` / ``txn_id``, a missing reference or
                expiry, a naive expiry, a bad error; nothing is sent.
            OutcomeUnknown: the answer may have reached the service; it was not repeated.
            ApiError: the service refused the answer.
        """
        request = _payload(event, DiscoverLinkInit, EventKind.DISCOVER_LINK_INIT)
        body: dict[str, Any] = {
            "request_id": _need(request.request_id, "request_id"),
            "txn_id": _need(request.txn_id, "txn_id"),
        }
        if error is not None:
            body["error"] = _error(error)
        else:
            if reference is None or otp_expires_at is None:
                raise InvalidRequest("answer_link_init needs reference= and otp_expires_at= (or error=)")
            body["ref_num"] = _line(reference, "reference")
            moment = aware_datetime(otp_expires_at, "otp_expires_at").astimezone(dt.UTC)
            body["otp_expiry"] = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        await self._send_once(
            "POST",
            R.PATH_DISCOVER_LINK_ON_INIT,
            operation="discover_link_on_init",
            headers=self._answer_headers(request.hip_id, request.oid, request.partner_patient_id),
            json=body,
            retry=retry,
            timeout=timeout,
        )

    @checked
    async def answer_link_confirm(
        self,
        event: WebhookEvent | DiscoverLinkConfirm,
        patient: MatchedPatient | None,
        *,
        error: LinkingError = LinkingError.OTP_MISMATCH,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> None:
        """``POST /abdm/v1/care-contexts/discover/link/on-confirm``: answer the patient's OTP (an
        ``abha.context_discover_link_confirm`` webhook) with the care contexts now linked (``patient``, the ones
        the link request named), or with ``error`` when ``patient`` is ``None`` (default
        :attr:`~health_async.models.LinkingError.OTP_MISMATCH`). Check the OTP yourself first, in constant time,
        against the one sent at link init (the receivers do this for you).

        Raises:
            InvalidRequest: not a confirmation, one without ``request_id``, a bad patient or error; nothing is sent.
            OutcomeUnknown: the answer may have reached the service; it was not repeated.
            ApiError: the service refused the answer.
        """
        request = _payload(event, DiscoverLinkConfirm, EventKind.DISCOVER_LINK_CONFIRM)
        body: dict[str, Any] = {"request_id": _need(request.request_id, "request_id")}
        await self._answer_patients(
            R.PATH_DISCOVER_LINK_ON_CONFIRM,
            "discover_link_on_confirm",
            request,
            body,
            patient,
            error,
            retry=retry,
            timeout=timeout,
        )

    async def _answer_patients(
        self,
        path: str,
        operation: str,
        request: CareContextDiscover | DiscoverLinkConfirm,
        body: dict[str, Any],
        patient: MatchedPatient | None,
        error: LinkingError,
        *,
        retry: RetryPolicy | NotGiven,
        timeout: float | NotGiven | None,
    ) -> None:
        """Send ``body`` once with the patient's care contexts, or the error when there are none: the shape that
        ``on-discover`` and ``on-confirm`` share."""
        patients = [] if patient is None else discovered_patients(patient)
        if patients:
            body["patients"] = patients
        else:
            body["error"] = _error(error)
        await self._send_once(
            "POST",
            path,
            operation=operation,
            headers=self._answer_headers(request.hip_id, request.oid, request.partner_patient_id),
            json=body,
            retry=retry,
            timeout=timeout,
        )

    @checked
    async def onboard_facility(
        self,
        hip_id: str,
        name: str,
        *,
        clinic_id: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> FacilityOnboarded:
        """``POST /abdm/v1/hip/onboard``: onboard your facility ``hip_id`` (its ABDM HFR id) under ``name``
        (``ModelsAddFacilityRequest``; ``clinic_id``: your clinic it belongs to). Sent once.

        Raises:
            InvalidRequest: an empty or multi-line id or name; nothing is sent.
            OutcomeUnknown: the onboarding may have happened; it was not repeated.
            ApiError: the service refused it.
        """
        body: dict[str, Any] = {"hip_id": _line(hip_id, "hip_id"), "name": _line(name, "name")}
        if clinic_id is not None:
            body["clinic_id"] = _line(clinic_id, "clinic_id")
        data = await self._send_once(
            "POST", R.PATH_HIP_ONBOARD, operation="hip_onboard", json=body, retry=retry, timeout=timeout
        )
        return structure(data if isinstance(data, Mapping) else {}, FacilityOnboarded)

    @checked
    async def linked_providers(
        self,
        *,
        oid: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> tuple[CareContextProvider, ...]:
        """``GET /abdm/v1/care-contexts/providers``: the facilities the user ``oid`` (else the client's
        ``user_id``) has care contexts linked with (``ProviderResponse``; ``null``: none)."""
        params = [] if oid is None else [("oid", check_header_value("oid", oid))]
        data = await self._session.request(
            "GET",
            R.PATH_CARE_CONTEXTS_PROVIDERS,
            operation="care_contexts_providers",
            params=params,
            headers=self._headers(oid),
            idempotent=True,
            retry=retry,
            timeout=timeout,
        )
        items = data.get("providers") if isinstance(data, dict) else None
        return structure_many(items or [], CareContextProvider, "providers")
