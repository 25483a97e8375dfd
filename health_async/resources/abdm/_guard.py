"""What a hospital checks before it pushes a patient's records: :class:`ConsentStore`, :class:`ConsentBook` and the
push's guard.

A data request (``abha.hip_data_fetch``) is answered only when everything known about it allows the push:

* ABDM's time window: the push happens within 20 minutes of the request (:data:`PUSH_WINDOW`);
* the consent behind it, when the request names one and a :class:`ConsentStore` is given: granted, not revoked,
  denied or expired by a consent webhook already received, not past its expiry; the requested dates within the
  consent's, the requested types within the consent's;
* each bundle: its record type (as :func:`health_async.fhir.read` finds it: its NRCeS profile, its Composition's
  type) among the types the request asked for.

The request's checks (the window, the consent) are made again before every page of a push and every retry of a
page: a consent revoked, or the window closed, while a push is under way stops the pages not yet sent. Whatever is
refused is not sent; :attr:`~health_async.models.PushResult.refused` says why, per care context, with the
:class:`Rule` broken.

A consent's status only moves forward: revoked, expired and denied are final for a consent id (:func:`advance`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, Final, Protocol, runtime_checkable

import attrs

from ..._logging import logger
from ...errors import InvalidRequest
from ...fhir._recognise import record_type_of
from ...models.abdm._events import ConsentUpdate
from ...models.abdm._hospital import HealthDataRequest
from ...models.records._cases import HiType
from ...models.webhooks._events import EventKind, WebhookEvent
from .consents import aware_datetime

__all__ = ["PUSH_WINDOW", "ConsentBook", "ConsentGrant", "ConsentStore", "advance"]

#: How long after a data request a hospital may push its answer (ABDM's window).
PUSH_WINDOW: Final = dt.timedelta(minutes=20)
#: Consent statuses that end a consent, as ABDM spells them (compared without case).
ENDED: Final = frozenset({"REVOKED", "EXPIRED", "DENIED"})
#: Consents a book holds at most by default.
DEFAULT_MAX_CONSENTS: Final = 100_000

# The rules of the guard, as :attr:`~health_async.models.RefusedCareContext.rule` names them (and the logs).
RULE_WINDOW: Final = "push_window"
RULE_CONSENT_UNKNOWN: Final = "consent_unknown"
RULE_CONSENT_NOT_GRANTED: Final = "consent_not_granted"
RULE_CONSENT_EXPIRED: Final = "consent_expired"
RULE_CONSENT_TYPES: Final = "consent_types"
RULE_CONSENT_DATES: Final = "consent_dates"
RULE_RECORD_TYPE: Final = "record_type"
#: The rule a late or repeated update breaks when it would bring an ended consent back (logged, never the id).
RULE_ENDED_IS_FINAL: Final = "consent_ended_is_final"


@attrs.frozen
class ConsentGrant:
    """What a hospital knows of one consent: its status and, when known, what it allows."""

    #: ``"GRANTED"``, or the status a consent webhook last gave (``"REVOKED"``, ``"EXPIRED"``, ``"DENIED"``, ...).
    status: str = "GRANTED"
    #: The health-information types it covers; ``None`` when not known.
    hi_types: frozenset[str] | None = None
    #: The first and last instants of the records it covers; ``None`` when not known.
    date_from: dt.datetime | None = None
    date_to: dt.datetime | None = None
    #: When it stops allowing anything; ``None`` when not known.
    expires_at: dt.datetime | None = None

    @property
    def ended(self) -> bool:
        """Revoked, denied or expired by a consent webhook: final, for its consent id."""
        return self.status.upper() in ENDED


def advance(known: ConsentGrant | None, new: ConsentGrant) -> ConsentGrant | None:
    """What a consent's record becomes when ``new`` is learnt (a grant, or a webhook's status over what was known),
    or ``None`` when ``new`` must be ignored: a consent's status only moves forward, and revoked, expired and denied
    are final for a consent id, so nothing replaces an ended consent (a redelivered ``GRANTED`` arriving after the
    revocation, a second ending status: the first one stands). Any other change is taken as it comes (a status
    other than ``GRANTED`` reads as not granted: the safe side). Pure: a shared :class:`ConsentStore` applies the
    same rule (atomically, in its own store)."""
    if known is not None and known.ended:
        return None
    return new


@runtime_checkable
class ConsentStore(Protocol):
    """Where the push's guard and the ABDM receivers find the consents a hospital knows of, by id: a
    :class:`ConsentBook` in this process, or a store shared by several workers.

    ``push_health_data(..., consents=store)`` calls :meth:`lookup` before every page it sends (and every retry of
    one); ``webhooks.abdm_handler(..., consents=store)`` / ``abdm_asgi`` call :meth:`take` with each
    ``abha.consent_update`` event, and :meth:`lookup` before loading a data request's records. The methods are
    ``async``: a shared store does I/O and must not block the event loop.

    An implementation keeps a consent's status moving forward only: revoked, expired and denied are final for a
    consent id (:func:`advance` is the rule), however late or repeated the deliveries.
    """

    async def lookup(self, consent_id: str) -> ConsentGrant | None:
        """What the store knows of ``consent_id``, or ``None``."""
        ...

    async def take(self, update: WebhookEvent | ConsentUpdate) -> None:
        """Record an ``abha.consent_update`` webhook (the event or its :class:`~health_async.models.ConsentUpdate`):
        its consent (artefact ids and request id) gets the status sent, unless it already ended."""
        ...


class ConsentBook:
    """The consents a hospital knows of, by id, in this process: the default :class:`ConsentStore`, checked before
    every page of a push (``push_health_data(..., consents=book)``, or ``webhooks.abdm_handler(...,
    consents=book)``, which also keeps it current).

    :meth:`grant` records a consent the hospital knows to be granted, with what it allows when known (types, dates,
    expiry); :meth:`record` takes each ``abha.consent_update`` webhook (the event or its
    :class:`~health_async.models.ConsentUpdate`) and marks the consent (its artefact id and its request id) with the
    status sent, so a revoked consent is never pushed for again. :meth:`lookup` and :meth:`take` are the same as
    the :class:`ConsentStore` protocol's ``async`` methods.

    **A consent's status only moves forward.** Revoked, expired and denied are final for a consent id: a later
    ``GRANTED`` (a redelivered grant notification arriving after the revocation) or :meth:`grant` of that id is
    ignored, and logged at WARNING by the rule's name (``consent_ended_is_final``), never the id.

    Judgement calls: a request that names no consent cannot be matched to one (the vendor's documented request names
    none), so only the time window and the types are checked for it; a request naming a consent this book does not
    know is refused ("consent not known to be granted"), since the book is given precisely to push only under
    known consents; the book is bounded (``max_consents``, the oldest forgotten first; a forgotten ended consent
    is then not known, so a late grant of it would be taken: keep the bound above the consents of a day) and in
    this process only (a store shared by several workers implements :class:`ConsentStore`).
    """

    def __init__(self, *, max_consents: int = DEFAULT_MAX_CONSENTS) -> None:
        self._max = checked_max_consents(max_consents)
        self._consents: dict[str, ConsentGrant] = {}

    def __len__(self) -> int:
        return len(self._consents)

    def __repr__(self) -> str:
        return f"ConsentBook(consents={len(self._consents)})"

    def get(self, consent_id: str) -> ConsentGrant | None:
        """What the book knows of ``consent_id``, or ``None``."""
        return self._consents.get(consent_id)

    async def lookup(self, consent_id: str) -> ConsentGrant | None:
        """:meth:`get`, as the :class:`ConsentStore` protocol asks."""
        return self._consents.get(consent_id)

    async def take(self, update: WebhookEvent | ConsentUpdate) -> None:
        """:meth:`record`, as the :class:`ConsentStore` protocol asks."""
        self.record(update)

    def grant(
        self,
        consent_id: str,
        *,
        hi_types: object = None,
        date_from: dt.datetime | None = None,
        date_to: dt.datetime | None = None,
        expires_at: dt.datetime | None = None,
    ) -> None:
        """Record ``consent_id`` as granted, with what it allows when known (``hi_types``: an iterable of
        :class:`~health_async.models.HiType` or their values; times timezone-aware). A consent the book knows as
        revoked, expired or denied stays so (the grant is ignored and logged, see the class)."""
        checked_id(consent_id)
        self._advance(consent_id, granted(hi_types, date_from, date_to, expires_at))

    def record(self, update: WebhookEvent | ConsentUpdate) -> None:
        """Take an ``abha.consent_update`` webhook: its consent (artefact id and request id) gets the status sent,
        unless it already ended (see the class). Any other event is refused (``InvalidRequest``); an update without
        an id or a status changes nothing."""
        for consent_id, status in consent_statuses(update):
            known = self._consents.get(consent_id)
            self._advance(consent_id, attrs.evolve(known, status=status) if known else ConsentGrant(status))

    def _advance(self, consent_id: str, new: ConsentGrant) -> None:
        known = self._consents.get(consent_id)
        taken = advance(known, new)
        if taken is None:
            if known is None or known.status.upper() != new.status.upper():  # a repeat of the ending is no news
                logger.warning(
                    "consent update ignored: %s (revoked, expired and denied are final)", RULE_ENDED_IS_FINAL
                )
            return
        self._consents.pop(consent_id, None)
        self._consents[consent_id] = taken
        while len(self._consents) > self._max:
            del self._consents[next(iter(self._consents))]


def checked_max_consents(max_consents: object) -> int:
    """``max_consents`` of a consent store, checked: a positive ``int``."""
    if isinstance(max_consents, bool) or not isinstance(max_consents, int) or max_consents < 1:
        raise InvalidRequest("max_consents must be a positive number")
    return max_consents


def checked_id(consent_id: object) -> str:
    """A consent id given to a store's ``grant``, checked: a non-empty string."""
    if not isinstance(consent_id, str) or not consent_id:
        raise InvalidRequest("consent_id must be a non-empty string")
    return consent_id


def granted(
    hi_types: object, date_from: dt.datetime | None, date_to: dt.datetime | None, expires_at: dt.datetime | None
) -> ConsentGrant:
    """The :class:`ConsentGrant` a store's ``grant`` records (status ``GRANTED``), its arguments checked
    (``hi_types``: an iterable of :class:`~health_async.models.HiType` or their values; times timezone-aware):
    what :meth:`ConsentBook.grant` and every other store's ``grant`` share."""
    for name, value in (("date_from", date_from), ("date_to", date_to), ("expires_at", expires_at)):
        if value is not None:
            aware_datetime(value, name)
    types: frozenset[str] | None = None
    if hi_types is not None:
        if isinstance(hi_types, str) or not hasattr(hi_types, "__iter__"):
            raise InvalidRequest("hi_types must be an iterable of HiType values")
        try:
            types = frozenset(HiType(t).value for t in hi_types)
        except ValueError:
            raise InvalidRequest("hi_types holds a value that is not a HiType") from None
    return ConsentGrant("GRANTED", types, date_from, date_to, expires_at)


def consent_statuses(update: WebhookEvent | ConsentUpdate) -> list[tuple[str, str]]:
    """``[(consent_id, status)]`` an ``abha.consent_update`` webhook (the event or its ``ConsentUpdate``) gives:
    each consent artefact's id and the consent request's id, with the status sent; empty without a status.
    :class:`InvalidRequest` for any other event."""
    if isinstance(update, WebhookEvent):
        if update.kind is not EventKind.CONSENT_UPDATE:
            raise InvalidRequest("record takes abha.consent_update events")
        payload = update.payload()
        if not isinstance(payload, ConsentUpdate):  # pragma: no cover - EVENT_PAYLOADS maps it so
            raise InvalidRequest("record takes abha.consent_update events")
        update = payload
    if not isinstance(update, ConsentUpdate):
        raise InvalidRequest("record takes an abha.consent_update event or its ConsentUpdate")
    notification = update.notification
    status = (notification.status if notification is not None else None) or update.status
    if not status or notification is None:
        return []
    ids = [artefact.id for artefact in notification.consent_artefacts] + [notification.consent_request_id]
    return [(consent_id, status) for consent_id in dict.fromkeys(ids) if consent_id]


@attrs.frozen
class Refusal:
    """Why something must not be pushed: the rule broken (a short name) and the reason (a sentence); never data."""

    rule: str
    reason: str


async def request_refusal(
    request: HealthDataRequest, consents: ConsentStore | None, now: dt.datetime, received: dt.datetime
) -> Refusal | None:
    """Why nothing of ``request`` may be pushed at ``now``, or ``None``: ABDM's window (counted from
    ``request.requested_at``, else from ``received``, the moment the request was first known) and the consent.
    Asked before the records are loaded and before every page (and every retry of one)."""
    requested = request.requested_at if request.requested_at is not None else received
    if now - requested > PUSH_WINDOW:
        return Refusal(RULE_WINDOW, "the request is older than ABDM's 20-minute window to answer it")
    if consents is None or not request.consent_id:
        return None
    grant = await consents.lookup(request.consent_id)
    if grant is None:
        return Refusal(RULE_CONSENT_UNKNOWN, "its consent is not known to be granted")
    if grant.ended:
        status = grant.status.lower()
        return Refusal(f"consent_{status}", f"its consent is {status}")
    if grant.status.upper() != "GRANTED":
        return Refusal(RULE_CONSENT_NOT_GRANTED, "its consent is not granted")
    if grant.expires_at is not None and grant.expires_at <= now:
        return Refusal(RULE_CONSENT_EXPIRED, "its consent has expired")
    if grant.hi_types is not None:
        outside = {t for t in request.hi_types if t not in grant.hi_types}
        if outside:
            return Refusal(RULE_CONSENT_TYPES, "the request asks for types its consent does not cover")
    start, end = request.starts_at, request.ends_at
    if (grant.date_from is not None and (start is None or start < grant.date_from)) or (
        grant.date_to is not None and (end is None or end > grant.date_to)
    ):
        return Refusal(RULE_CONSENT_DATES, "the request asks for dates outside its consent's")
    return None


def type_refusals(request: HealthDataRequest, bundles: Mapping[str, Mapping[str, Any]]) -> dict[str, Refusal]:
    """``{care_context_id: refusal}`` for the bundles (decoded) whose record type the request did not ask for."""
    asked = {t.casefold() for t in request.hi_types}
    found: dict[str, Refusal] = {}
    if asked:
        for cid, bundle in bundles.items():
            record = record_type_of(bundle)
            if record is not None and record.hi_type.value.casefold() not in asked:
                found[cid] = Refusal(
                    RULE_RECORD_TYPE,
                    f"its record type ({record.value}) is not among the types the request asked for",
                )
    return found
