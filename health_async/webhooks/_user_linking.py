"""A patient's own search answered by the ABDM receivers (``care-contexts/discover/introduction.mdx``): the three
webhooks, each acknowledged at once and answered in the background by :class:`_UserLinking`.

1. ``abha.care_context_discover``: ``await on_discover(request)`` searches your records and returns the one
   matching patient (a :class:`~health_async.models.MatchedPatient`) or ``None``; the offer is kept in the
   store (no OTP) under the discovery's ``txn_id``, and ``client.abdm.answer_discover`` answers with it, or with
   :attr:`~health_async.models.LinkingError.NO_MATCH`.
2. ``abha.care_context_discover_link_init``: the request must come from the discovery's requester (same ``txn_id``,
   and the same ABHA address and ``oid`` where both name one) and ask for care contexts that discovery offered,
   for the patient it offered; a fresh OTP (:func:`new_otp`) is kept hashed in the store with them for
   ``otp_ttl`` seconds under a fresh **link reference** of this request's own, ``await on_link_otp(mobile, otp,
   request)`` sends it (your SMS gateway), and ``client.abdm.answer_link_init`` says so with that reference and
   the OTP's expiry, or refuses (unknown discovery or another requester's, something not offered, no mobile, the
   discovery's tries spent, the sender failed).
3. ``abha.context_discover_link_confirm``: the link is found by its reference (``linkRefNumber``); a confirmation
   naming another requester (``oid``) than the one the link was made for is refused without a try counted; the
   store checks the token (constant time, expiry, ``max_otp_tries`` wrong tries per discovery, one use);
   ``client.abdm.answer_link_confirm`` answers with the care contexts linked, or with ``OTP_MISMATCH``,
   ``TOO_MANY_ATTEMPTS`` or ``INVALID_LINK``; then ``await on_linked(link)`` tells you, so you can record the
   verified ABHA address against your patient, as ABDM advises.

Nothing about the OTP, the mobile number, the ABHA address, the patient or the transaction is logged: only the
step and its outcome.

Judgement calls:

* **A link is bound to its requester** (issue 42). The confirmation (``discover-link-confirm.mdx``) carries no
  ``txn_id`` and no ABHA address, only ``linkRefNumber`` (the PHR app echoes ``on-init``'s ``ref_num``), the
  token, ``hip_id`` and ``oid``. The vendor's example shows ``linkRefNumber`` equal to the patient's ``ref_num``
  (both ``"temp"``), but a patient's reference names the *patient*, not the *requester*: two ABHA users who
  discover the same hospital patient (a family sharing the mobile number on file) would share one pending link,
  and one's confirmation could link the other's ABHA address. So ``on-init`` answers with a fresh, unguessable
  reference per link request (:func:`secrets.token_urlsafe`, 24 characters), the pending link is kept under
  (``hip_id``, that reference) with the discovery's requester (ABHA address, ``oid``), and is never replaced by
  another request. A confirmation naming an ``oid`` other than the link's is refused (``INVALID_LINK``) without
  touching the link's tries. :attr:`PendingLink.reference` stays your patient's reference.
* **Tries are bounded per discovery.** Every link request of one discovery counts its wrong OTPs on the
  discovery's offer (``tries_key``): ``max_otp_tries`` wrong OTPs in all, whatever the number of link requests,
  pending at once or one after another. Then the discovery is locked: its pending links are refused
  (``TOO_MANY_ATTEMPTS``), and so is any new link request under it (``TOO_MANY_ATTEMPTS``, whose message asks to
  try again later); the patient starts a new discovery. Several link requests of one discovery (the same requester)
  may be pending at once, each with its OTP.
* A link request whose OTP could not be sent forgets only the entry it put (``discard(key, only=version)``).
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
import secrets
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
#: Wrong OTPs accepted for one discovery (all its link requests together) before it is refused for good.
DEFAULT_MAX_OTP_TRIES: Final = 3
#: Seconds a discovery's offer waits for the patient's link request.
DEFAULT_OFFER_TTL: Final = 1800.0

LINKING_EVENTS: Final = frozenset(
    {EventKind.CARE_CONTEXT_DISCOVER, EventKind.DISCOVER_LINK_INIT, EventKind.DISCOVER_LINK_CONFIRM}
)


def _offer_key(txn_id: str) -> str:
    return f"offer\x1f{txn_id}"


def _link_key(hip_id: str | None, link_ref: str) -> str:
    return f"link\x1f{hip_id or ''}\x1f{link_ref}"


def _new_link_reference() -> str:
    """A fresh, unguessable link reference (``on-init``'s ``ref_num``, the confirmation's ``linkRefNumber``)."""
    return secrets.token_urlsafe(18)


def _same(asked: str | None, kept: str | None, *, fold: bool = False) -> bool:
    """Whether a request's requester id agrees with the one kept (unknown on either side: nothing to compare)."""
    if not asked or not kept:
        return True
    return asked.casefold() == kept.casefold() if fold else asked == kept


def _same_requester(request: DiscoverLinkInit, offer: PendingLink) -> bool:
    return _same(request.abha_address, offer.abha_address, fold=True) and _same(request.oid, offer.oid)


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
        offer_key = None if not request.txn_id else _offer_key(request.txn_id)
        offer = None if offer_key is None else await self.store.get(offer_key)
        if offer_key is None or offer is None or not _same_requester(request, offer):
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
        link_ref = _new_link_reference()
        key = _link_key(request.hip_id, link_ref)
        otp = new_otp()
        version = await self.store.put(key, link, otp=otp, ttl=self.otp_ttl, tries_key=offer_key)
        if version is None:  # the discovery's tries are spent (or it ended meanwhile)
            del otp
            return await self._refuse_init(request, LinkingError.TOO_MANY_ATTEMPTS)
        expires_at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=self.otp_ttl)
        try:
            await _bounded(self.on_link_otp(offer.mobile, otp, request), self.callback_timeout, "on_link_otp", event)
        except asyncio.CancelledError:
            await asyncio.shield(self.store.discard(key, only=version))
            raise
        except Exception as exc:
            await self.store.discard(key, only=version)
            logger.error("ABDM link OTP not sent: on_link_otp raised %s", type(exc).__name__)
            return await self._refuse_init(request, LinkingError.OTP_NOT_SENT)
        del otp
        await self.client.abdm.answer_link_init(request, reference=link_ref, otp_expires_at=expires_at)
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
        pending = await self.store.get(key)  # the requester is fixed for the key's life: references are fresh
        if pending is not None and not _same(request.oid, pending.oid):  # another requester's link: no try counted
            await self.client.abdm.answer_link_confirm(request, None, error=LinkingError.INVALID_LINK)
            return f"refused ({LinkingError.INVALID_LINK.name}, another requester)"
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
