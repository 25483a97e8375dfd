"""The fake server's ABDM exchange, hospital side (milestone 2): care-context links, the linked list, the SMS
notification, the data pushes that answer an HIU's request, and the signed webhooks ABDM sends about them.

Written from ``registration.yml`` (``LinkCareContextLinkingRequest``, ``RecordsResponse``,
``LinkUnlinkedRecordsNotificationRequest``, ``RecordsHipDataPushRequest``) and the webhook pages
(``webhooks/link-care-context.mdx``, ``webhooks/hip-data-fetch.mdx``); ABDM's encryption is checked with
:mod:`health_async.abdm_crypto` here (and the tests check the same pushes with the vendor's ``abdm-ecdh``).

Routes (names for ``server.inject`` and ``server.calls``): ``care_contexts_link`` (202, then one
``abha.link_care_context`` webhook per care context when webhooks are registered; a linked care context is listed
once its webhook was sent (delivered or given up; at once when no webhooks are registered), with status ``null``:
``RecordsCareContext`` has no "linked" status, and the consent states that follow are not simulated),
``care_contexts_linked`` (``hip_id``
required: 400 without; every link whose OID, or patient, is the ``oid`` query, else the ``X-Pt-Id`` header),
``care_contexts_notify`` (202; 400 unless 10 digits), ``hip_data_push`` (202; every page kept).

State and test controls: :attr:`FakeAbdm.links` (patient -> care context id -> what was linked: ``display``,
``hi_type``, the decoded ``data`` bundle or ``None``, and the patient's ``oid`` or ``None``);
:attr:`FakeAbdm.notified` (mobile numbers); a data request with :meth:`FakeAbdm.data_request` (a fresh HIU key,
the webhook's ``data`` returned); the pushes of a transaction decrypted and checked with :meth:`FakeAbdm.received`,
or as sent with :meth:`FakeAbdm.pages`.

Webhooks: :meth:`FakeAbdm.webhooks` ``(url, secret)`` registers where ABDM's webhooks go (http(s) on loopback
only, as :func:`~health_async.testing.send_webhook`: ``ValueError`` otherwise, or without a secret; ``None``
unregisters); unregistered, nothing is sent. :meth:`FakeAbdm.fail_links` ``(care_context_ids, error=LINK_ERROR)``
makes every later link of those ids end ``ERRORED`` with that ``error`` (the others end ``LINKED``).
``await`` :meth:`FakeAbdm.send_data_request` ``(care_contexts, **as data_request)`` sends a data request as an
``abha.hip_data_fetch`` webhook and returns ``(transaction_id, status)`` (:class:`DataRequestSent`); with
``consent_id=`` the request names the consent it is made under (``data.consent_id``, which the vendor's page does
not show: a test of a hospital's consent checks). ``await`` :meth:`FakeAbdm.send_consent_update`
``(consent_id, status, artefact_ids=())`` tells the hospital a consent changed (an ``abha.consent_update``
webhook, as ``consent-update.mdx`` shows it) and returns ``(transaction_id, status)``. :meth:`FakeAbdm.received`
and :meth:`FakeAbdm.hiu_key` raise :class:`UnknownTransaction` (a ``LookupError``) for a transaction the fake
made no data request for.
:attr:`FakeAbdm.deliveries` lists every attempt as ``(event name, HTTP status or the exception's type name)``;
``await`` :meth:`FakeAbdm.flush` waits for the webhooks still being sent.

Judgement calls: a patient is the ``abha_address`` of a link, else its ``oid``, else ``X-Pt-Id``; a link's OID is
its body's ``oid``, else ``X-Pt-Id``, else ``None``; a link a test puts in :attr:`FakeAbdm.links` itself, without an
``oid``, is listed under its patient key; the list holds each care context id once (the first link found); a care
context linked twice keeps the first link and is counted in :attr:`FakeAbdm.relinked`, and still gets its ``LINKED``
webhook (the service sends one per link call); a link made to fail is neither held nor counted as relinked; the
checksum is MD5 hex of the plain text (ABDM's HIP specification: "Md5 checksum of the content, before encryption").

Webhook judgement calls: the envelope is the vendor pages' (``service`` ``abdm``, ``event``, ``event_time``,
``transaction_id``, ``timestamp``, ``business_id`` :attr:`FakeAbdm.business_id`, ``client_id`` the server's);
each link webhook has a transaction id of its own (receivers may de-duplicate on event, transaction id and
status); a data request's webhook, as ``hip-data-fetch.mdx`` shows it, has a transaction id of its own in the
envelope and ``data.transaction_id`` ``""``, and the request is held under the envelope's id (the page: push with
"the ``transaction_id`` from this webhook"; what :meth:`FakeAbdm.received` takes), while :meth:`FakeAbdm.data_request`
fills ``data.transaction_id`` for a test to send itself; ``abha.consent_update`` has ``service`` ``abha`` (its page's);
``hip_id`` is the link call's ``X-Hip-Id`` else ``"HIP-1"``, ``partner_patient_id`` its ``partner_user_id`` else
``X-Partner-Pt-Id``. A webhook the receiver does not take (not 2xx, or no answer) is sent again up to
:data:`REDELIVERIES` (2) times, so :data:`DELIVERY_ATTEMPTS` (3) in all, :data:`REDELIVERY_DELAY` (0.05) s apart, each
time re-signed with a fresh ``timestamp``. Link webhooks go out in a background task per link call, after the 202,
in the order of the care contexts; a data request is sent while ``send_data_request`` waits (``RuntimeError``
when no URL is registered). The server's ``close`` cancels and awaits what is being sent (and sends nothing for
a link that arrives while it closes); ``reset`` cancels it too, unregisters the URL and forgets the failures and
deliveries.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import re
import time
import uuid
from collections.abc import Coroutine, Iterable
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from aiohttp import web

from ... import _json
from ...abdm_crypto import KeyMaterial
from .. import _routes as R
from ..webhooks._domain import WebhookDomain
from ..webhooks._send import REDELIVERIES, REDELIVERY_DELAY, Outcome, Target, deliver
from ._user_linking import USER_LINKING_ROUTES, PatientSearch, UserLinkingFake

if TYPE_CHECKING:
    from .._common import RecordedRequest
    from .._domain import Server

__all__ = [
    "CONSENT_UPDATE_EVENT",
    "CONSENT_UPDATE_SERVICE",
    "DELIVERY_ATTEMPTS",
    "REDELIVERIES",
    "REDELIVERY_DELAY",
    "ROUTES",
    "DataRequestSent",
    "FakeAbdm",
    "PatientSearch",
    "UnknownTransaction",
    "consent_update_data",
]

ROUTES: Final[tuple[str, ...]] = (
    "care_contexts_link",
    "care_contexts_linked",
    "care_contexts_notify",
    "hip_data_push",
    *USER_LINKING_ROUTES,
)
_MOBILE: Final = re.compile(r"^[6-9]\d{9}$")

#: Attempts at one webhook in all: the first delivery and its redeliveries.
DELIVERY_ATTEMPTS: Final = 1 + REDELIVERIES
#: ``error`` of an ``ERRORED`` link made to fail with :meth:`FakeAbdm.fail_links` and no text of its own.
LINK_ERROR: Final = "care context could not be linked (FakeAbdm.fail_links)"
LINK_EVENT: Final = "abha.link_care_context"
DATA_FETCH_EVENT: Final = "abha.hip_data_fetch"
CONSENT_UPDATE_EVENT: Final = "abha.consent_update"
#: The envelope's ``service`` of :data:`CONSENT_UPDATE_EVENT` (``consent-update.mdx``; the other ABDM pages: ``abdm``).
CONSENT_UPDATE_SERVICE: Final = "abha"


class UnknownTransaction(LookupError):
    """The fake made no data request with this transaction id (:meth:`FakeAbdm.received`, :meth:`FakeAbdm.hiu_key`).

    A ``LookupError``: give them the id :meth:`FakeAbdm.send_data_request` returned (the webhook envelope's), or the
    ``transaction_id`` of the ``data`` :meth:`FakeAbdm.data_request` returned; :meth:`FakeAbdm.reset` forgets them."""

    def __init__(self, method: str) -> None:
        super().__init__(
            f"server.abdm.{method}: the fake made no data request with this transaction id; pass the one "
            "send_data_request(...) returned (.transaction_id), or data_request(...)['transaction_id'] (made "
            "since the last reset)"
        )


def consent_update_data(consent_id: str, status: str, artefact_ids: Iterable[str] = ()) -> dict[str, Any]:
    """The ``data`` of an ``abha.consent_update`` webhook as ``consent-update.mdx`` shows it: ``{timestamp, status,
    notification: {consentRequestId, status, consentArtefacts}}``, ``consentArtefacts`` one ``{id}`` object when
    one artefact is named (the page's shape), a list of them otherwise (judgement call: the page shows no other
    case)."""
    refs = [{"id": artefact_id} for artefact_id in artefact_ids]
    return {
        "timestamp": _now(),
        "status": status,
        "notification": {
            "consentRequestId": consent_id,
            "status": status,
            "consentArtefacts": refs[0] if len(refs) == 1 else refs,
        },
    }


class DataRequestSent(NamedTuple):
    """What :meth:`FakeAbdm.send_data_request` and :meth:`FakeAbdm.send_consent_update` return."""

    #: The data request's transaction id (the webhook envelope's; its ``data``'s is ``""``, as the vendor's page
    #: shows): give it to :meth:`FakeAbdm.received`.
    transaction_id: str
    #: The last attempt's outcome: the receiver's HTTP status, or the exception's type name when it did not answer.
    status: Outcome


def _text(value: object) -> str | None:
    """``value`` when it is a non-empty str, else None."""
    return value if isinstance(value, str) and value else None


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _error(message: str, status: int = 400) -> web.Response:
    """``GenericError`` of registration.yml: ``{"code", "error"}``."""
    return web.json_response({"code": status, "error": message}, status=status)


class FakeAbdm(UserLinkingFake, WebhookDomain):
    """State and routes of the ABDM exchange, hospital side (see the module docstring); a patient's own search,
    the onboarding and the providers list in :class:`~._user_linking.UserLinkingFake`."""

    ROUTES = ROUTES

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        #: patient (ABHA address, else OID) -> care context id -> {"display", "hi_type", "data"}.
        self.links: dict[str, dict[str, dict[str, Any]]] = {}
        #: Links of a care context already linked (ignored, counted).
        self.relinked = 0
        #: Mobile numbers an SMS notification was asked for.
        self.notified: list[str] = []
        #: transaction id -> the pushed pages, as received.
        self._pages: dict[str, list[dict[str, Any]]] = {}
        #: transaction id -> the HIU's key material of a data request made by :meth:`data_request`.
        self._hiu: dict[str, KeyMaterial] = {}
        #: ``business_id`` of every webhook sent.
        self.business_id = "fake-business"
        self._failing: dict[str, str] = {}  # care context id -> the error text of its ERRORED link
        self._init_user_linking()

    def add_routes(self, app: web.Application) -> None:
        route = self.server._route
        app.router.add_post(R.CARE_CONTEXTS_LINK, route("care_contexts_link", self._link))
        app.router.add_get(R.CARE_CONTEXTS_LINKED, route("care_contexts_linked", self._linked))
        app.router.add_post(R.CARE_CONTEXTS_NOTIFY, route("care_contexts_notify", self._notify))
        app.router.add_post(R.HIP_DATA_ON_FETCH, route("hip_data_push", self._push))
        self._add_user_linking_routes(app)

    def reset(self) -> None:
        self.links.clear()
        self.notified.clear()
        self._pages.clear()
        self._hiu.clear()
        self.relinked = 0
        self._forget_webhooks()
        self._failing.clear()
        self._reset_user_linking()

    # ------------------------------------------------------------------------------ routes

    async def _link(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        body = await self.server._read_json(request, rec)
        if not isinstance(body, dict) or not isinstance(body.get("care_contexts"), list) or not body["care_contexts"]:
            return _error("care_contexts is required")
        patient = (
            body.get("abha_address")
            or body.get("oid")
            or request.headers.get(R.PT_ID)
            or body.get("partner_user_id")
            or request.headers.get(R.PARTNER_PT_ID)
        )  # the vendor's file names the patient by any of these (the partner's own id through X-Partner-Pt-Id)
        if not isinstance(patient, str) or not patient:
            return _error("abha_address, oid or a partner user id is required")
        oid = _text(body.get("oid")) or _text(request.headers.get(R.PT_ID))
        checked: list[dict[str, Any]] = []
        for item in body["care_contexts"]:
            if not isinstance(item, dict):
                return _error("care_contexts[] must be objects")
            cid, display, hi_type = item.get("care_context_id"), item.get("display"), item.get("hi_type")
            if not isinstance(cid, str) or not cid or not isinstance(display, str) or not display:
                return _error("care_context_id and display are required")
            if hi_type not in R.HI_TYPES:
                return _error("hi_type is not one of the enum's values")
            data = item.get("data")
            bundle = None
            if data is not None:
                try:
                    bundle = _json.loads(base64.b64decode(data, validate=True))
                except (binascii.Error, ValueError, TypeError):
                    return _error("data must be a base64 encoded FHIR bundle")
            hip = _text(request.headers.get(R.HIP_ID)) or "HIP-1"
            checked.append(
                {
                    "care_context_id": cid,
                    "display": display,
                    "hi_type": hi_type,
                    "data": bundle,
                    "oid": oid,
                    "hip_id": hip,
                    "listed_at": None,  # set once its webhook was sent (at once without webhooks): then listed
                }
            )
        held = self.links.setdefault(patient, {})
        results: list[tuple[str, str | None]] = []  # care context id, error text of an ERRORED link
        for link in checked:
            cid = link["care_context_id"]
            if cid in self._failing:
                results.append((cid, self._failing[cid]))
                continue
            if cid in held:
                self.relinked += 1
            else:
                held[cid] = link
            results.append((cid, None))
        if not held:
            del self.links[patient]  # every link failed: the patient holds nothing
        target = self._target
        if target is not None and not self._closed:  # after the 202, in the background, as the service
            address, hip_id = _text(body.get("abha_address")), _text(request.headers.get(R.HIP_ID)) or "HIP-1"
            partner = _text(body.get("partner_user_id")) or _text(request.headers.get(R.PARTNER_PT_ID))
            events = [
                self._envelope(
                    LINK_EVENT,
                    str(uuid.uuid4()),
                    {
                        "abha_address": address,
                        "hip_id": hip_id,
                        "care_context_id": cid,
                        "status": "LINKED" if error is None else "ERRORED",
                        "error": error,
                        "retry_count": 0,
                        "oid": oid,
                        "partner_patient_id": partner,
                    },
                )
                for cid, error in results
            ]
            self._spawn(self._deliver_all(target, events, held))
        else:
            for link in checked:  # no webhook to wait for: listed at once
                link["listed_at"] = _now()
        return web.Response(status=202)

    async def _linked(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:  # noqa: ARG002
        if not request.query.get("hip_id"):
            return _error("hip_id is required")
        oid = request.query.get("oid") or request.headers.get(R.PT_ID) or ""
        found: dict[str, dict[str, Any]] = {}
        for patient, held in self.links.items():
            for cid, link in held.items():
                if "listed_at" in link and link["listed_at"] is None:  # its link webhook not sent yet
                    continue
                if oid and (link.get("oid") == oid or patient == oid):  # the key: a link a test put in links
                    found.setdefault(cid, link)
        items = [
            {"care_context_id": cid, "display": link["display"], "status": None, "created_at": None}
            for cid, link in found.items()
        ]
        return self.server._json(request, {"care_contexts": items})

    async def _notify(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        body = await self.server._read_json(request, rec)
        mobile = body.get("mobile_number") if isinstance(body, dict) else None
        if not isinstance(mobile, str) or not _MOBILE.match(mobile):
            return _error("mobile_number must be a 10 digit mobile number")
        self.notified.append(mobile)
        return web.Response(status=202)

    async def _push(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        body = await self.server._read_json(request, rec)
        if not isinstance(body, dict) or not isinstance(body.get("transaction_id"), str):
            return _error("transaction_id is required")
        entries, key = body.get("entries"), body.get("key_information")
        if not isinstance(entries, list) or not isinstance(key, dict):
            return _error("entries and key_information are required")
        self._pages.setdefault(body["transaction_id"], []).append(body)
        return web.Response(status=202)

    # ------------------------------------------------------------------------------ webhooks

    def _envelope(
        self, event: str, transaction_id: str, data: dict[str, Any], *, service: str = "abdm"
    ) -> dict[str, Any]:
        """A webhook body as the vendor's pages show it (``timestamp`` is set again at each attempt; ``service``
        is ``abdm`` on every ABDM page but ``consent-update.mdx``'s, which has ``abha``)."""
        now = int(time.time())
        return {
            "service": service,
            "event": event,
            "event_time": now,
            "transaction_id": transaction_id,
            "timestamp": now,
            "business_id": self.business_id,
            "client_id": self.server.client_id,
            "data": data,
        }

    # what the fake's other ABDM domains send webhooks with (one sender, one retry rule, one flush)

    @property
    def webhooks_registered(self) -> bool:
        """Whether a webhook URL is registered (:meth:`webhooks`)."""
        return self._target is not None

    async def send_webhook(
        self, event: str, transaction_id: str, data: dict[str, Any], *, service: str = "abdm"
    ) -> Outcome:
        """Send one signed webhook ``event`` with ``data`` (envelope ``service`` as given) to the registered URL,
        redelivered as the hospital side's are; ``RuntimeError`` when no URL is registered."""
        target = self._target
        if target is None:
            raise RuntimeError("no webhook URL registered: call server.abdm.webhooks(url, secret) first")
        return await self._deliver(target, self._envelope(event, transaction_id, data, service=service))

    def in_background(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` as a background task of this domain: awaited by :meth:`flush`, cancelled on close."""
        self._spawn(work)

    async def _deliver_all(
        self, target: Target, events: list[dict[str, Any]], held: dict[str, dict[str, Any]] | None = None
    ) -> None:
        for event in events:
            await self._deliver(target, event)
            link = None if held is None else held.get(event["data"]["care_context_id"])
            if link is not None and link.get("listed_at") is None:  # its webhook sent: now listed as linked
                link["listed_at"] = _now()

    async def _deliver(self, target: Target, event: dict[str, Any]) -> Outcome:
        """Send ``event`` as the service does (:func:`~._webhooks.deliver`), each attempt recorded in
        :attr:`deliveries`; the last attempt's outcome."""
        return await deliver(target, event, lambda outcome: self.deliveries.append((event["event"], outcome)))

    def fail_links(self, care_context_ids: Iterable[str], error: str = LINK_ERROR) -> None:
        """Make every later link of these care context ids end ``ERRORED`` with ``error`` (added to the ids
        already failing; :meth:`reset` forgets them). A failed link is not held."""
        if isinstance(care_context_ids, str):
            raise ValueError("fail_links takes a collection of care context ids, not one str")
        for cid in care_context_ids:
            self._failing[cid] = error

    async def send_data_request(
        self,
        care_contexts: list[str],
        *,
        abha_address: str = "shyam@sbx",
        oid: str | None = None,
        hip_id: str = "HIP-1",
        expires_in: float = 600.0,
        hi_types: tuple[str, ...] = ("OPConsultation",),
        consent_id: str | None = None,
    ) -> DataRequestSent:
        """Make a data request with :meth:`data_request` (same arguments) and send it to the registered URL as a
        signed ``abha.hip_data_fetch`` webhook, redelivered as the others; returns once it was taken or given up.

        As ``hip-data-fetch.mdx`` shows it: the envelope has a webhook transaction id of its own and
        ``data.transaction_id`` is ``""``; the page says to push with "the ``transaction_id`` from this webhook",
        so the request is held under the envelope's id (the returned one, for :meth:`received` and :meth:`pages`).

        ``RuntimeError`` when no URL is registered (:meth:`webhooks`)."""
        target = self._target
        if target is None:
            raise RuntimeError("no webhook URL registered: call server.abdm.webhooks(url, secret) first")
        data = self.data_request(
            care_contexts,
            abha_address=abha_address,
            oid=oid,
            hip_id=hip_id,
            expires_in=expires_in,
            hi_types=hi_types,
            consent_id=consent_id,
        )
        transaction_id = str(uuid.uuid4())  # the webhook's own id: the one the push must name
        self._hiu[transaction_id] = self._hiu.pop(data["transaction_id"])
        data["transaction_id"] = ""
        outcome = await self._deliver(target, self._envelope(DATA_FETCH_EVENT, transaction_id, data))
        return DataRequestSent(transaction_id, outcome)

    async def send_consent_update(
        self, consent_id: str, status: str = "REVOKED", *, artefact_ids: Iterable[str] = ()
    ) -> DataRequestSent:
        """Tell the hospital that a consent changed: a signed ``abha.consent_update`` webhook (envelope ``service``
        ``abha``, ``data`` as :func:`consent_update_data` builds it) sent to the registered URL and redelivered as
        the others; returns once it was taken or given up, with its transaction id and the last attempt's outcome.
        ``consent_id`` is the consent request's id (wire ``consentRequestId``), ``artefact_ids`` the consent
        artefacts it changed (a data request names one of these, or the request's id, as its ``consent_id``).

        ``RuntimeError`` when no URL is registered (:meth:`webhooks`); ``ValueError`` for an ``artefact_ids`` that
        is one ``str``."""
        if isinstance(artefact_ids, str):
            raise ValueError("artefact_ids takes a collection of artefact ids, not one str")
        target = self._target
        if target is None:
            raise RuntimeError("no webhook URL registered: call server.abdm.webhooks(url, secret) first")
        transaction_id = str(uuid.uuid4())
        data = consent_update_data(consent_id, status, list(artefact_ids))
        event = self._envelope(CONSENT_UPDATE_EVENT, transaction_id, data, service=CONSENT_UPDATE_SERVICE)
        return DataRequestSent(transaction_id, await self._deliver(target, event))

    # ------------------------------------------------------------------------------ test controls

    def data_request(
        self,
        care_contexts: list[str],
        *,
        abha_address: str = "shyam@sbx",
        oid: str | None = None,
        hip_id: str = "HIP-1",
        expires_in: float = 600.0,
        hi_types: tuple[str, ...] = ("OPConsultation",),
        consent_id: str | None = None,
    ) -> dict[str, Any]:
        """A fresh HIU data request: the ``data`` of the ``abha.hip_data_fetch`` webhook, as the vendor's page
        shows it (``transaction_id`` filled), with a new HIU key the fake keeps to check the pushes.

        ``consent_id``: the consent the request is made under, as ``data.consent_id`` (judgement call: the vendor's
        page shows none, ABDM's requests carry one; a hospital's consent checks read it); left out when ``None``."""
        transaction_id = str(uuid.uuid4())
        hiu = KeyMaterial.generate()
        self._hiu[transaction_id] = hiu
        expiry = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=expires_in)
        return {
            "abha_address": abha_address,
            "oid": oid,
            "partner_patient_id": None,
            "hip_id": hip_id,
            "transaction_id": transaction_id,
            "care_contexts": list(care_contexts),
            "key_information": {
                "crypto_alg": "ECDH",
                "curve": "Curve25519",
                "dh_public_key": {
                    "expiry": expiry.isoformat().replace("+00:00", "Z"),
                    "parameters": "Curve25519/32byte random key",
                    "key_value": hiu.x509_public_key,
                },
                "nonce": hiu.nonce,
            },
            "hi_types": list(hi_types),
            **({} if consent_id is None else {"consent_id": consent_id}),
        }

    def hiu_key(self, transaction_id: str) -> KeyMaterial:
        """The HIU's key material of a request made by :meth:`data_request` (its private key opens the pushes);
        :class:`UnknownTransaction` (a ``LookupError``) for a transaction it did not make."""
        try:
            return self._hiu[transaction_id]
        except KeyError:
            raise UnknownTransaction("hiu_key") from None

    def pages(self, transaction_id: str) -> list[dict[str, Any]]:
        """The pushed pages of a transaction, as received."""
        return list(self._pages.get(transaction_id, []))

    def received(self, transaction_id: str) -> dict[str, bytes]:
        """The plain bundles pushed for a transaction, each decrypted with the HIU's key and its checksum checked
        (``AssertionError`` on a page that does not open, a wrong checksum, or page numbers that do not add up;
        :class:`UnknownTransaction`, a ``LookupError``, for a transaction the fake made no data request for)."""
        hiu = self._hiu.get(transaction_id)
        if hiu is None:
            raise UnknownTransaction("received")
        pages = self._pages.get(transaction_id, [])
        numbers = sorted(int(p.get("page_number", 0)) for p in pages)
        count = {int(p.get("page_count", 0)) for p in pages}
        assert not pages or (len(count) == 1 and numbers == list(range(1, count.pop() + 1))), "pages do not add up"
        out: dict[str, bytes] = {}
        for page in pages:
            key = page["key_information"]
            for entry in page["entries"]:
                assert entry.get("media") == "application/fhir+json", "media must be application/fhir+json"
                plain = hiu.decrypt(
                    entry["content"], peer_public_key=key["dh_public_key"]["key_value"], peer_nonce=key["nonce"]
                )
                assert hashlib.md5(plain, usedforsecurity=False).hexdigest() == entry.get("checksum"), "checksum"
                assert entry["care_context_id"] not in out, "a care context pushed twice"
                out[entry["care_context_id"]] = plain
        return out
