"""The fake requester's (HIU's) side: the HIU's key set, the parsing statuses it sends back, and an HIP pushing
encrypted health data to it as the signed ``abha.hiu_data_push`` webhook.

Written from ``registration.yml`` (``RecordsUpdateKeysetRequest``: ``public_key`` and ``nonce`` required, 200;
``RecordsHiuDataPushRequest``: ``consent_id``, ``transaction_id``, ``status_response[]`` of
``{care_context_id, success, description}``, 202) and the pages ``care-contexts/hiu-keys.mdx``,
``care-contexts/data-on-push.mdx`` and ``webhooks/hiu-data-push.mdx``. ABDM's encryption is done with
:mod:`health_async.abdm_crypto`, as the hospital side's fake (``_abdm.py``) does.

Routes (names for ``server.inject`` and ``server.calls``): ``hiu_keyset`` (PATCH; 400 unless ``public_key`` and
``nonce`` are non-empty base64, the nonce 32 bytes; 200), ``hiu_data_on_push`` (POST; 400 unless the ids are
non-empty strings and ``status_response`` a list of ``{care_context_id: str, success: bool}``; 202).

State and test controls: :attr:`FakeHiu.keysets` (HIU -> the key set as received, ``{"public_key", "nonce"}``;
the HIU is the call's ``X-Hip-Id``, else the server's ``client_id``); :attr:`FakeHiu.acknowledgements` (every
status body, as received); :attr:`FakeHiu.pushes` (the ``data`` of every push sent).
``await`` :meth:`FakeHiu.push_for_consent` ``(consent, ...)`` plays the HIP: one FHIR bundle per care context of
the consent, encrypted to the HIU's registered key set, sent as a signed ``abha.hiu_data_push`` webhook through
the hospital side's webhook sender (``server.abdm.webhooks(url, secret)``: the same target, signature and
redelivery); it returns :class:`DataPushSent` with the bundles it encrypted, for tests to compare.

The documents it sends are the NRCeS guide's own example bundles, one per health-information type
(:func:`example_document`; the files and their source are in ``_documents/``, see its README), not made with the
library's builders: a requester's test then reads what another producer wrote.

Judgement calls: a push carries every care context of the consent in one webhook, from the consent's first HIP
(the consent dict does not say which HIP holds which care context), under one fresh sender key material (one
``key_information`` a push, as the page shows); the checksum is the MD5 hex of the plain text (as the hospital
side's fake checks it); ``abha_number`` is ``""`` and ``oid``/``partner_patient_id`` are ``null``, as in the page's
example where the fake knows no better.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from aiohttp import web

from ... import _json
from ...abdm_crypto import KeyMaterial
from .. import _routes as R
from .._domain import Domain
from ..webhooks._send import Outcome
from ._hospital import CONSENT_UPDATE_EVENT, CONSENT_UPDATE_SERVICE, FakeAbdm, consent_update_data

if TYPE_CHECKING:
    from .._common import RecordedRequest
    from .._domain import Server

__all__ = [
    "CONSENT_UPDATE_EVENT",
    "DATA_PUSH_EVENT",
    "DOCUMENTS",
    "ROUTES",
    "DataPushSent",
    "FakeHiu",
    "example_document",
]

ROUTES: Final[tuple[str, ...]] = ("hiu_keyset", "hiu_data_on_push")
DATA_PUSH_EVENT: Final = "abha.hiu_data_push"
_NONCE_SIZE: Final = 32
#: ABDM health-information type -> the guide's example document sent for it (a file of ``_documents/``).
DOCUMENTS: Final = {
    "OPConsultation": "Bundle-OPConsultNote-example-05.json",
    "Prescription": "Bundle-Prescription-example-06.json",
    "DiagnosticReport": "Bundle-DiagnosticReport-Lab-example-03.json",
    "DischargeSummary": "Bundle-DischargeSummary-example-04.json",
    "ImmunizationRecord": "Bundle-ImmunizationRecord-example-07.json",
    "WellnessRecord": "Bundle-WellnessRecord-example-01.json",
    "HealthDocumentRecord": "Bundle-HealthDocumentRecord-example-01.json",
    "Invoice": "Bundle-InvoiceRecord-example-01.json",
}


class DataPushSent(NamedTuple):
    """What :meth:`FakeHiu.push_for_consent` returns."""

    #: The push's transaction id (its ``data.transaction_id`` and the webhook's).
    transaction_id: str
    #: The last attempt's outcome: the receiver's HTTP status, or the exception's type name.
    status: Outcome
    #: care context reference -> the FHIR bundle that was encrypted for it.
    bundles: dict[str, dict[str, Any]]


def _error(message: str, status: int = 400) -> web.Response:
    """``GenericError`` of registration.yml."""
    return web.json_response({"code": status, "error": message}, status=status)


def _b64(value: object) -> bytes | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def _text(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def example_document(hi_type: str) -> dict[str, Any]:
    """The NRCeS guide's example document of ``hi_type`` (an ABDM health-information type: ``"OPConsultation"``,
    ``"DiagnosticReport"``, ...; :data:`DOCUMENTS`), a fresh dict each call: what the fake HIP sends unless told
    otherwise. ``ValueError`` for another type."""
    name = DOCUMENTS.get(hi_type)
    if name is None:
        raise ValueError(f"hi_type must be one of {', '.join(sorted(DOCUMENTS))}")
    text = resources.files(__package__).joinpath("_documents", name).read_text(encoding="utf-8")
    document: dict[str, Any] = json.loads(text, strict=False)  # as published: raw control characters in narratives
    return document


class FakeHiu(Domain):
    """State and routes of the requester's side (see the module docstring)."""

    ROUTES = ROUTES

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        #: HIU (``X-Hip-Id``, else the server's client id) -> the key set as received.
        self.keysets: dict[str, dict[str, Any]] = {}
        #: Every ``on-push`` status body, as received.
        self.acknowledgements: list[dict[str, Any]] = []
        #: The ``data`` of every push :meth:`push_for_consent` sent.
        self.pushes: list[dict[str, Any]] = []

    def add_routes(self, app: web.Application) -> None:
        route = self.server._route
        app.router.add_patch(R.HIU_KEYSET, route("hiu_keyset", self._keyset))
        app.router.add_post(R.HIU_DATA_ON_PUSH, route("hiu_data_on_push", self._on_push))

    def reset(self) -> None:
        self.keysets.clear()
        self.acknowledgements.clear()
        self.pushes.clear()

    # ------------------------------------------------------------------------------ routes

    async def _keyset(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        body = await self.server._read_json(request, rec)
        if not isinstance(body, dict):
            return _error("a JSON body is required")
        public_key, nonce = _b64(body.get("public_key")), _b64(body.get("nonce"))
        if public_key is None or len(public_key) < 65:
            return _error("public_key must be a base64 ECDH public key")
        if nonce is None or len(nonce) != _NONCE_SIZE:
            return _error("nonce must be 32 bytes, base64")
        hiu = request.headers.get(R.HIP_ID) or self.server.client_id
        self.keysets[hiu] = dict(body)
        return web.Response(status=200)

    async def _on_push(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        body = await self.server._read_json(request, rec)
        if not isinstance(body, dict) or not _text(body.get("consent_id")) or not _text(body.get("transaction_id")):
            return _error("consent_id and transaction_id are required")
        statuses = body.get("status_response")
        if not isinstance(statuses, list) or not all(
            isinstance(s, dict) and _text(s.get("care_context_id")) and isinstance(s.get("success"), bool)
            for s in statuses
        ):
            return _error("status_response must be a list of {care_context_id, success, description}")
        self.acknowledgements.append(body)
        return web.Response(status=202)

    # ------------------------------------------------------------------------------ the HIP's push

    async def answer_approval(self, approved: Mapping[str, Any]) -> None:
        """What ABDM sets going when a patient approves a consent: each HIP of the consent pushes the approved care
        contexts to the HIU. The server wires this to :attr:`FakeConsents.on_approved
        <health_async.testing.abdm._consents.FakeConsents.on_approved>` (``approved`` is its dict): one
        :meth:`push_for_consent` per artefact (one HIP each), in the background after the approval's answer, as
        the real exchange runs. Nothing is pushed while no webhook URL or no HIU key set is registered (a consent
        test without an HIU); a push that fails is given up as :meth:`push_for_consent` gives up."""
        abdm = getattr(self.server, "abdm", None)
        if not isinstance(abdm, FakeAbdm) or not abdm.webhooks_registered or not self.keysets:
            return
        for artefact in approved.get("artefacts") or ():
            consent = {
                "consent_id": approved["consent_id"],
                "patient": approved.get("abha_address"),
                "hip_ids": [artefact["hip_id"]],
                "care_contexts": list(artefact["care_context_ids"]),
                "hi_types": list(artefact["hi_types"]),
                "artefact_ids": [artefact["artefact_id"]],
            }
            abdm.in_background(self._push_quietly(consent))

    async def consent_changed(self, change: Mapping[str, Any]) -> None:
        """Tell the HIU that a consent's status changed: the signed ``abha.consent_update`` webhook as
        ``webhooks/consent-update.mdx`` shows it (envelope ``service`` ``abha``; ``data`` ``{timestamp, status,
        notification: {consentRequestId, status, consentArtefacts}}``, ``consentArtefacts`` one ``{id}`` object;
        judgement call: a change of several artefacts, or of none, sends a list of them, which the page does not
        show), in the background, when a webhook URL is registered. The server wires this to
        :attr:`FakeConsents.on_status_changed <health_async.testing.abdm._consents.FakeConsents.on_status_changed>`."""
        abdm = getattr(self.server, "abdm", None)
        if not isinstance(abdm, FakeAbdm) or not abdm.webhooks_registered:
            return
        data = consent_update_data(change["consent_id"], change["status"], change["artefact_ids"])
        abdm.in_background(self._notify(data))

    async def _notify(self, data: dict[str, Any]) -> None:
        abdm = getattr(self.server, "abdm", None)
        if isinstance(abdm, FakeAbdm) and abdm.webhooks_registered:  # still registered when the task runs
            await abdm.send_webhook(CONSENT_UPDATE_EVENT, str(uuid.uuid4()), data, service=CONSENT_UPDATE_SERVICE)

    async def _push_quietly(self, consent: dict[str, Any]) -> None:
        try:
            await self.push_for_consent(consent)
        except RuntimeError:  # the key set or URL went away in between (a reset): nothing to push to
            return

    def _keyset_for(self, hiu: str | None) -> dict[str, Any]:
        if hiu is not None:
            if hiu not in self.keysets:
                raise RuntimeError("no key set registered for that HIU: call client.abdm.set_hiu_keys first")
            return self.keysets[hiu]
        if len(self.keysets) == 1:
            return next(iter(self.keysets.values()))
        if self.server.client_id in self.keysets:
            return self.keysets[self.server.client_id]
        raise RuntimeError("no single HIU key set registered: call client.abdm.set_hiu_keys first, or pass hiu=")

    async def push_for_consent(
        self,
        consent: Mapping[str, Any],
        *,
        hiu: str | None = None,
        bundles: Mapping[str, dict[str, Any]] | None = None,
        bad_checksum: Iterable[str] = (),
        expires_in: float = 600.0,
    ) -> DataPushSent:
        """Play the HIP answering a granted consent: encrypt one FHIR bundle per care context of ``consent``
        (keys ``consent_id``, ``patient`` (ABHA address), ``hip_ids``, ``care_contexts`` (references),
        ``hi_types``, ``artefact_ids``) to the key set of ``hiu`` (default: the only one registered, else the
        server client's) and send it to the registered URL as a signed ``abha.hiu_data_push`` webhook,
        redelivered as the hospital side's webhooks; returns once it was taken or given up.

        ``bundles``: care context -> the bundle to send (default the guide's example document of the consent's
        first HI type, :func:`example_document`); ``bad_checksum``: care contexts sent with a checksum that does
        not match.
        ``RuntimeError`` without a registered URL (``server.abdm.webhooks``) or key set; ``ValueError`` for a
        consent dict without its keys, or whose first HI type is not one of ABDM's."""
        abdm = getattr(self.server, "abdm", None)
        if not isinstance(abdm, FakeAbdm):  # pragma: no cover - every FakeHealthServer has one
            raise RuntimeError("this server has no ABDM domain to send webhooks with")
        if not abdm.webhooks_registered:
            raise RuntimeError("no webhook URL registered: call server.abdm.webhooks(url, secret) first")
        keyset = self._keyset_for(hiu)
        cids = consent.get("care_contexts")
        if not isinstance(consent.get("consent_id"), str) or not isinstance(cids, list | tuple) or not cids:
            raise ValueError("consent needs consent_id and care_contexts (a non-empty list of references)")
        hip_ids = list(consent.get("hip_ids") or ["HIP-1"])
        hi_types = list(consent.get("hi_types") or ["OPConsultation"])
        plain = {
            cid: dict(bundles[cid]) if bundles and cid in bundles else example_document(hi_types[0]) for cid in cids
        }
        broken = set(bad_checksum)
        sender = KeyMaterial.generate()
        entries = []
        for cid, bundle in plain.items():
            raw = _json.dumps(bundle)
            checksum = hashlib.md5(raw + (b"x" if cid in broken else b""), usedforsecurity=False).hexdigest()
            # A real HIP puts every entry of a page under the page's one key_information, so they share one AES-GCM
            # key and IV: KeyMaterial refuses a second message, so each entry is encrypted by the same key material
            # rebuilt (what this fake must send, not what this library's HIP side does: a page per entry).
            one_message = KeyMaterial.from_private_key(sender.private_key, sender.nonce)
            content = one_message.encrypt(raw, peer_public_key=keyset["public_key"], peer_nonce=keyset["nonce"])
            entries.append(
                {"care_context_id": cid, "checksum": checksum, "content": content, "media": "application/fhir+json"}
            )
        transaction_id = str(uuid.uuid4())
        expiry = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=expires_in)
        data = {
            "abha_address": consent.get("patient"),
            "abha_number": "",
            "hip_id": hip_ids[0],
            "oid": None,
            "partner_patient_id": None,
            "consent_id": consent["consent_id"],
            "transaction_id": transaction_id,
            "entries": entries,
            "key_information": {
                "crypto_alg": "ECDH",
                "curve": "Curve25519",
                "dh_public_key": {
                    "expiry": expiry.isoformat().replace("+00:00", "Z"),
                    "key_value": sender.x509_public_key,
                    "parameters": "Curve25519/32byte random key",
                },
                "nonce": sender.nonce,
            },
        }
        self.pushes.append(data)
        outcome = await abdm.send_webhook(DATA_PUSH_EVENT, transaction_id, data)
        return DataPushSent(transaction_id, outcome, plain)
