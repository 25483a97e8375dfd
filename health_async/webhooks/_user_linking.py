"""A patient's own search answered by the ABDM receivers (``care-contexts/discover/introduction.mdx``): the three
webhooks, each acknowledged at once and answered in the background by :class:`_UserLinking`.

1. ``abha.care_context_discover``: ``await on_discover(request)`` searches your records and returns the one
   matching patient (a :class:`~health_async.models.MatchedPatient`) or ``None``; the offer is kept in the
   store (no OTP) under the discovery's ``txn_id``, and ``client.abdm.answer_discover`` answers with it, or with
   :attr:`~health_async.models.LinkingError.NO_MATCH`.
2. ``abha.care_context_discover_link_init``: the care contexts asked for must be ones the discovery (same
   ``txn_id``) offered, for the patient it offered; a fresh OTP (:func:`new_otp`) is kept hashed in the store with
   them for ``otp_ttl`` seconds, ``await on_link_otp(mobile, otp, request)`` sends it (your SMS gateway), and
   ``client.abdm.answer_link_init`` says so with the OTP's expiry, or refuses (unknown discovery, something not
   offered, no mobile, the sender failed).
3. ``abha.context_discover_link_confirm``: the store checks the token (constant time, expiry, ``max_otp_tries``
   wrong tries, one use); ``client.abdm.answer_link_confirm`` answers with the care contexts linked, or with
   ``OTP_MISMATCH``, ``TOO_MANY_ATTEMPTS`` or ``INVALID_LINK``; then ``await on_linked(link)`` tells you, so you
   can record the verified ABHA address against your patient, as ABDM advises.

Nothing about the OTP, the mobile number, the ABHA address, the patient or the transaction is logged: only the
step and its outcome.

Judgement calls:

* The confirmation (``discover-link-confirm.mdx``) carries no ``txn_id``, only ``linkRefNumber``; the vendor's
  example shows it equal to the link request's patient ``ref_num`` (both ``"temp"``), and ``on-init``'s own
  ``ref_num`` is "patient reference number". So ``on-init`` sends the patient's reference, and the pending link is
  kept under (``hip_id``, that reference): a second link request for the same patient replaces the first (its
  OTP no longer confirms), as a new OTP replaces an old one.
* The linked care contexts go to a callback of their own, ``on_linked``, not to ``on_event``: ``on_event`` gets
  the service's verified webhooks, before any answer; a link is known only after the OTP check and the answer,
  and is not a webhook.
* A confirmation whose answer failed is not put back: the OTP was used by its check (one use). The patient asks
  for a new OTP.
* A callback's failure is logged by type and the step is not answered (the PHR app times out); its request id is
  forgotten, so the service's redelivery runs it again. Each callback is bounded (``callback_timeout``): one that
  takes longer is cancelled and counts as failed (``on_link_otp``: the OTP was not sent; ``on_linked``: logged,
  the link stays made).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final, TypeAlias

import attrs

from .._logging import logger
from ..errors import HealthError, InvalidRequest
from ..models.abdm._events import CareContextDiscover, DiscoverLinkConfirm, DiscoverLinkInit
from ..models.abdm._user_linking import LinkingError, MatchedPatient
from ..models.webhooks._events import EventKind, WebhookEvent
from ..resources.abdm._user_linking import discovered_patients
from ._link_otp import LinkOtpStore, OtpOutcome, PendingLink, new_otp
from ._receiving import DEFAULT_CALLBACK_TIMEOUT, _bounded

if TYPE_CHECKING:
    from .._client import HealthClient

__all__ = [
    "DEFAULT_MAX_OTP_TRIES",
    "DEFAULT_OFFER_TTL",
    "DEFAULT_OTP_TTL",
    "DiscoverCallback",
    "LinkOtpSender",
    "LinkedCallback",
]

#: ``on_discover``: your search; the one matching patient with their unlinked care contexts, or ``None``.
DiscoverCallback: TypeAlias = Callable[[CareContextDiscover], Awaitable["MatchedPatient | None"]]
#: ``on_link_otp(mobile, otp, request)``: send ``otp`` to ``mobile`` (your SMS gateway); raise if it was not sent.
LinkOtpSender: TypeAlias = Callable[[str, str, DiscoverLinkInit], Awaitable[object]]
#: ``on_linked(link)``: the care contexts just linked to the patient's ABHA address (record it).
LinkedCallback: TypeAlias = Callable[[PendingLink], Awaitable[object]]

#: Seconds a linking OTP is valid (ABDM's own OTPs: 10 minutes).
DEFAULT_OTP_TTL: Final = 600.0
#: Wrong OTPs accepted for one link before it is refused for good.
DEFAULT_MAX_OTP_TRIES: Final = 3
#: Seconds a discovery's offer waits for the patient's link request.
DEFAULT_OFFER_TTL: Final = 1800.0

LINKING_EVENTS: Final = frozenset(
    {EventKind.CARE_CONTEXT_DISCOVER, EventKind.DISCOVER_LINK_INIT, EventKind.DISCOVER_LINK_CONFIRM}
)


def _offer_key(txn_id: str) -> str:
    return f"offer\x1f{txn_id}"


def _link_key(hip_id: str | None, reference: str) -> str:
    return f"link\x1f{hip_id or ''}\x1f{reference}"


@attrs.frozen
class _UserLinking:
    """The three steps (see the module); :class:`~health_async.webhooks._abdm._AbdmReceiver` runs
    :meth:`answer` in the background."""

    client: HealthClient
    on_discover: DiscoverCallback
    on_link_otp: LinkOtpSender
    on_linked: LinkedCallback | None
    store: LinkOtpStore
    otp_ttl: float
    max_tries: int
    offer_ttl: float = DEFAULT_OFFER_TTL
    #: Seconds each callback (``on_discover``, ``on_link_otp``, ``on_linked``) may take before it is cancelled.
    callback_timeout: float = DEFAULT_CALLBACK_TIMEOUT

    async def answer(self, event: WebhookEvent) -> None:
        """Answer one of the three events; a failure is logged (by type) and raised, so the caller forgets the
        request id; cancellation propagates."""
        step = event.kind.value
        try:
            if event.kind is EventKind.CARE_CONTEXT_DISCOVER:
                outcome = await self._discover(event)
            elif event.kind is EventKind.DISCOVER_LINK_INIT:
                outcome = await self._link_init(event)
            else:
                outcome = await self._confirm(event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.error("ABDM %s not answered: %s", step, type(exc).__name__)
            raise
        logger.info("ABDM %s answered: %s", step, outcome)

    async def _discover(self, event: WebhookEvent) -> str:
        request = event.payload()
        assert isinstance(request, CareContextDiscover)
        patient = await _bounded(self.on_discover(request), self.callback_timeout, "on_discover", event)
        if patient is not None:
            try:
                discovered_patients(patient, "on_discover's patient")
            except InvalidRequest as exc:
                logger.error("ABDM discovery: %s; answered as no match", exc)  # names the rule, never the value
                patient = None
        if patient is None or not patient.care_contexts:
            await self.client.abdm.answer_discover(request, None)
            return "no match"
        if request.txn_id:  # kept before the answer: the link request may follow it at once
            mobile = patient.mobile or request.identifier("MOBILE")
            offer = PendingLink(
                request.hip_id,
                patient.reference,
                patient.display,
                patient.care_contexts,
                mobile=mobile,
                abha_address=request.abha_address,
                oid=request.oid,
                partner_patient_id=request.partner_patient_id,
            )
            await self.store.put(_offer_key(request.txn_id), offer, otp=None, ttl=self.offer_ttl)
        await self.client.abdm.answer_discover(request, patient)
        return f"{len(patient.care_contexts)} care context(s) offered"

    async def _link_init(self, event: WebhookEvent) -> str:
        request = event.payload()
        assert isinstance(request, DiscoverLinkInit)
        offer = None if not request.txn_id else await self.store.get(_offer_key(request.txn_id))
        if offer is None:
            return await self._refuse_init(request, LinkingError.UNKNOWN_DISCOVERY)
        offered = {cc.care_context_id: cc for cc in offer.care_contexts}
        asked = [ref.reference_number for p in request.patients for ref in p.care_contexts]
        patients = {p.ref_num for p in request.patients if p.ref_num is not None}
        if not asked or patients - {offer.reference} or any(ref not in offered for ref in asked):
            return await self._refuse_init(request, LinkingError.NOT_OFFERED)
        if not offer.mobile:
            return await self._refuse_init(request, LinkingError.NO_MOBILE)
        chosen = tuple(offered[ref] for ref in dict.fromkeys(asked) if ref is not None)
        link = attrs.evolve(offer, care_contexts=chosen)
        key = _link_key(request.hip_id, offer.reference)
        otp = new_otp()
        await self.store.put(key, link, otp=otp, ttl=self.otp_ttl)
        expires_at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=self.otp_ttl)
        try:
            await _bounded(self.on_link_otp(offer.mobile, otp, request), self.callback_timeout, "on_link_otp", event)
        except asyncio.CancelledError:
            await asyncio.shield(self.store.discard(key))
            raise
        except Exception as exc:
            await self.store.discard(key)
            logger.error("ABDM link OTP not sent: on_link_otp raised %s", type(exc).__name__)
            return await self._refuse_init(request, LinkingError.OTP_NOT_SENT)
        del otp
        await self.client.abdm.answer_link_init(request, reference=offer.reference, otp_expires_at=expires_at)
        return f"OTP sent for {len(chosen)} care context(s)"

    async def _refuse_init(self, request: DiscoverLinkInit, error: LinkingError) -> str:
        await self.client.abdm.answer_link_init(request, error=error)
        return f"refused ({error.name})"

    async def _confirm(self, event: WebhookEvent) -> str:
        request = event.payload()
        assert isinstance(request, DiscoverLinkConfirm)
        if not request.token or not request.link_ref_number:
            await self.client.abdm.answer_link_confirm(request, None, error=LinkingError.INVALID_LINK)
            return f"refused ({LinkingError.INVALID_LINK.name})"
        key = _link_key(request.hip_id, request.link_ref_number)
        check = await self.store.consume(key, request.token, max_tries=self.max_tries)
        if check.outcome is not OtpOutcome.MATCHED or check.link is None:
            error = {
                OtpOutcome.WRONG: LinkingError.OTP_MISMATCH,
                OtpOutcome.LOCKED: LinkingError.TOO_MANY_ATTEMPTS,
            }.get(check.outcome, LinkingError.INVALID_LINK)
            await self.client.abdm.answer_link_confirm(request, None, error=error)
            return f"refused ({error.name})"
        link = check.link
        await self.client.abdm.answer_link_confirm(
            request, MatchedPatient(link.reference, link.display, link.care_contexts)
        )
        if self.on_linked is not None:
            try:
                await _bounded(self.on_linked(link), self.callback_timeout, "on_linked", event)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the link is made: the answer must not be sent again
                logger.error("ABDM link confirmed, but on_linked raised %s", type(exc).__name__)
        return f"{len(link.care_contexts)} care context(s) linked"


def request_id_of(event: WebhookEvent) -> str | None:
    """The ``data.request_id`` of a linking event, or ``None`` (a redelivery is recognised by it)."""
    try:
        data = event.payload()
    except HealthError:
        return None
    value = getattr(data, "request_id", None)
    return value if isinstance(value, str) and value else None
