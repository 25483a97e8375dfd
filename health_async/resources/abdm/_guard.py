"""What a hospital checks before it pushes a patient's records: :class:`ConsentBook` and the push's guard.

A data request (``abha.hip_data_fetch``) is answered only when everything known about it allows the push:

* ABDM's time window: the push happens within 20 minutes of the request (:data:`PUSH_WINDOW`);
* the consent behind it, when the request names one and a :class:`ConsentBook` is given: granted, not revoked,
  denied or expired by a consent webhook already received, not past its expiry; the requested dates within the
  consent's, the requested types within the consent's;
* each bundle: its record type (as :func:`health_async.fhir.read` finds it: its NRCeS profile, its Composition's
  type) among the types the request asked for.

Whatever is refused is not sent; :attr:`~health_async.models.PushResult.refused` says why, per care context.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, Final

import attrs

from ...errors import InvalidRequest
from ...fhir._recognise import record_type_of
from ...models.abdm._events import ConsentUpdate
from ...models.abdm._hospital import HealthDataRequest
from ...models.records._cases import HiType
from ...models.webhooks._events import EventKind, WebhookEvent
from .consents import aware_datetime

__all__ = ["PUSH_WINDOW", "ConsentBook", "ConsentGrant"]

#: How long after a data request a hospital may push its answer (ABDM's window).
PUSH_WINDOW: Final = dt.timedelta(minutes=20)
#: Consent statuses that end a consent, as ABDM spells them (compared without case).
ENDED: Final = frozenset({"REVOKED", "EXPIRED", "DENIED"})
#: Consents a book holds at most by default.
DEFAULT_MAX_CONSENTS: Final = 100_000


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
        """Revoked, denied or expired by a consent webhook."""
        return self.status.upper() in ENDED


class ConsentBook:
    """The consents a hospital knows of, by id, checked before every push (``push_health_data(...,
    consents=book)``, or ``webhooks.abdm_handler(..., consents=book)``, which also keeps it current).

    :meth:`grant` records a consent the hospital knows to be granted, with what it allows when known (types, dates,
    expiry); :meth:`record` takes each ``abha.consent_update`` webhook (the event or its
    :class:`~health_async.models.ConsentUpdate`) and marks the consent (its artefact id and its request id) with the
    status sent, so a revoked consent is never pushed for again.

    Judgement calls: a request that names no consent cannot be matched to one (the vendor's documented request names
    none), so only the time window and the types are checked for it; a request naming a consent this book does not
    know is refused ("consent not known to be granted"), since the book is given precisely to push only under
    known consents; the book is bounded (``max_consents``, the oldest forgotten first) and in this process only.
    """

    def __init__(self, *, max_consents: int = DEFAULT_MAX_CONSENTS) -> None:
        if isinstance(max_consents, bool) or not isinstance(max_consents, int) or max_consents < 1:
            raise InvalidRequest("max_consents must be a positive number")
        self._max = max_consents
        self._consents: dict[str, ConsentGrant] = {}

    def __len__(self) -> int:
        return len(self._consents)

    def __repr__(self) -> str:
        return f"ConsentBook(consents={len(self._consents)})"

    def get(self, consent_id: str) -> ConsentGrant | None:
        """What the book knows of ``consent_id``, or ``None``."""
        return self._consents.get(consent_id)

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
        :class:`~health_async.models.HiType` or their values; times timezone-aware)."""
        if not isinstance(consent_id, str) or not consent_id:
            raise InvalidRequest("consent_id must be a non-empty string")
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
        self._put(consent_id, ConsentGrant("GRANTED", types, date_from, date_to, expires_at))

    def record(self, update: WebhookEvent | ConsentUpdate) -> None:
        """Take an ``abha.consent_update`` webhook: its consent (artefact id and request id) gets the status sent.
        Any other event is refused (``InvalidRequest``); an update without an id or a status changes nothing."""
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
        if not status:
            return
        ids: list[str | None] = []
        if notification is not None:
            ids = [artefact.id for artefact in notification.consent_artefacts] + [notification.consent_request_id]
        for consent_id in ids:
            if consent_id:
                known = self._consents.get(consent_id)
                self._put(consent_id, attrs.evolve(known, status=status) if known else ConsentGrant(status))

    def _put(self, consent_id: str, grant: ConsentGrant) -> None:
        self._consents.pop(consent_id, None)
        self._consents[consent_id] = grant
        while len(self._consents) > self._max:
            del self._consents[next(iter(self._consents))]


def refusals(
    request: HealthDataRequest,
    bundles: Mapping[str, Mapping[str, Any]],
    *,
    consents: ConsentBook | None,
    now: dt.datetime,
) -> dict[str, str]:
    """``{care_context_id: why it must not be pushed}`` for the care contexts of ``bundles`` (decoded) that fail a
    check; the reasons name rules, never data."""
    whole = _request_refusal(request, consents, now)
    if whole is not None:
        return dict.fromkeys(bundles, whole)
    asked = {t.casefold() for t in request.hi_types}
    found: dict[str, str] = {}
    if asked:
        for cid, bundle in bundles.items():
            record = record_type_of(bundle)
            if record is not None and record.hi_type.value.casefold() not in asked:
                found[cid] = f"its record type ({record.value}) is not among the types the request asked for"
    return found


def _request_refusal(request: HealthDataRequest, consents: ConsentBook | None, now: dt.datetime) -> str | None:
    if request.requested_at is not None and now - request.requested_at > PUSH_WINDOW:
        return "the request is older than ABDM's 20-minute window to answer it"
    if consents is None or not request.consent_id:
        return None
    grant = consents.get(request.consent_id)
    if grant is None:
        return "its consent is not known to be granted"
    if grant.ended:
        return f"its consent is {grant.status.lower()}"
    if grant.status.upper() != "GRANTED":
        return "its consent is not granted"
    if grant.expires_at is not None and grant.expires_at <= now:
        return "its consent has expired"
    if grant.hi_types is not None:
        outside = {t for t in request.hi_types if t not in grant.hi_types}
        if outside:
            return "the request asks for types its consent does not cover"
    start, end = request.starts_at, request.ends_at
    if (grant.date_from is not None and (start is None or start < grant.date_from)) or (
        grant.date_to is not None and (end is None or end > grant.date_to)
    ):
        return "the request asks for dates outside its consent's"
    return None
