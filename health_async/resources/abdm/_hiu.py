"""The requester's (HIU's) side: register the HIU's key set, read the health data HIPs push to it, and report
how reading each care context went.

The flow (``abdm-connect/care-contexts/hiu-keys.mdx``, ``webhooks/hiu-data-push.mdx``,
``care-contexts/data-on-push.mdx``): make key material once with
:meth:`KeyMaterial.generate() <health_async.abdm_crypto.KeyMaterial.generate>` and keep its private key; register
its public key and nonce (:meth:`HiuMixin.set_hiu_keys`); the service gives them to the HIPs a consent covers,
which encrypt each care context's FHIR bundle to them (ABDM's ECDH scheme, :mod:`health_async.abdm_crypto`, the
mirror of :meth:`~health_async.resources.Abdm.push_health_data`); the data comes in an ``abha.hiu_data_push``
webhook, which :meth:`HiuMixin.decrypt_health_data` opens with the same key material; then
:meth:`HiuMixin.acknowledge_health_data` tells the service which care contexts were read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

from ... import _json
from ... import _routes as R
from ..._checks import checked
from ..._config import NOT_GIVEN, NotGiven
from ..._retry import RetryPolicy
from ...abdm_crypto import KeyMaterial, checksum_matches
from ...errors import EncryptionError, HealthDataChecksumMismatch, HealthDataUnreadable, InvalidRequest
from ...fhir import validate
from ...models.abdm._events import HiuDataPush
from ...models.abdm._hiu import HealthDataStatus, ReceivedBundle
from ...models.webhooks._events import EventKind, WebhookEvent
from ._base import AbdmBase

__all__ = ["MAX_DESCRIPTION", "HiuMixin"]

#: The longest status description sent (the vendor gives no limit; a status is a short note).
MAX_DESCRIPTION: Final = 1000
_MAX_ID: Final = 256
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


def _id(name: str, value: str) -> str:
    if not value.strip():
        raise InvalidRequest(f"{name} must not be empty")
    if len(value) > _MAX_ID or _CONTROL.search(value):
        raise InvalidRequest(f"{name} must be at most {_MAX_ID} characters, no control characters")
    return value


def _push_of(push: WebhookEvent | HiuDataPush) -> HiuDataPush:
    if isinstance(push, HiuDataPush):
        return push
    if push.kind is not EventKind.HIU_DATA_PUSH:
        raise InvalidRequest("push must be an abha.hiu_data_push event, or its HiuDataPush payload")
    payload = push.payload()
    if not isinstance(payload, HiuDataPush):  # pragma: no cover - EVENT_PAYLOADS maps the event to HiuDataPush
        raise InvalidRequest("push must be an abha.hiu_data_push event, or its HiuDataPush payload")
    return payload


class HiuMixin(AbdmBase):
    """Part of :class:`~health_async.resources.Abdm` (see the module)."""

    @checked
    async def set_hiu_keys(
        self,
        key_material: KeyMaterial,
        *,
        partner_hip_id: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> None:
        """``PATCH /abdm/v1/hiu/keyset``: register the HIU's public key and nonce, which the service gives to the
        HIPs that send you data. Only :attr:`~health_async.abdm_crypto.KeyMaterial.x509_public_key` and
        :attr:`~health_async.abdm_crypto.KeyMaterial.nonce` are sent; the private key never leaves the process
        (keep it: :meth:`decrypt_health_data` needs the same key material).

        ``partner_hip_id``: your facility (sent as ``X-Hip-Id``; default the client's ``partner_hip_id``); the
        operation documents no header, the service knows the HIU by the client's credentials.

        Judgement calls: the public key is sent as the X.509 form (what ABDM's reference HIU and
        :meth:`~health_async.resources.Abdm.push_health_data` send; every ABDM library reads both forms). The
        call replaces the key set with the same value each time, so it is idempotent and retried by the client's
        policy.

        Raises:
            InvalidArgumentType: ``key_material`` is not a :class:`~health_async.abdm_crypto.KeyMaterial`.
        """
        body = {"public_key": key_material.x509_public_key, "nonce": key_material.nonce}
        await self._session.request(
            "PATCH",
            R.PATH_HIU_KEYSET,
            operation="hiu_keyset",
            headers=self._partner_headers(None, None, NOT_GIVEN if partner_hip_id is None else partner_hip_id),
            json=body,
            idempotent=True,
            retry=retry,
            timeout=timeout,
        )

    @checked
    def decrypt_health_data(
        self, push: WebhookEvent | HiuDataPush, key_material: KeyMaterial, *, require_checksum: bool = True
    ) -> tuple[ReceivedBundle, ...]:
        """The FHIR bundles of an ``abha.hiu_data_push`` (the :class:`~health_async.webhooks.WebhookEvent`, or
        its :class:`~health_async.models.HiuDataPush` payload), decrypted with the HIU's ``key_material`` (the one
        registered with :meth:`set_hiu_keys`) and the sender's key in the push; one
        :class:`~health_async.models.ReceivedBundle` per entry, in the push's order. Nothing is sent.

        Each entry's plain text must have the checksum sent with it: the MD5 of the plain text, as hex (either
        case: what ABDM's reference HIPs and this library's HIP side write) or as base64 of the digest (what some
        HIPs write; judgement call: ABDM documents only "MD5 checksum of the content, before encryption").
        ``require_checksum=False`` accepts an entry sent without one (a checksum that is sent is always checked).

        Each bundle comes with its validation report (:attr:`ReceivedBundle.report
        <health_async.models.ReceivedBundle.report>`, :func:`health_async.fhir.validate`: FHIR R4 and the NRCeS
        profiles, offline). Nothing is refused for it: it is the patient's data; read it with
        :func:`health_async.fhir.read` (``read(received.bundle)``, tolerant of any producer), and report it with
        :meth:`HealthDataStatus.from_bundle <health_async.models.HealthDataStatus.from_bundle>` (``success`` when
        the report has no error).

        Judgement call: the first entry that does not open raises, and nothing is returned (a push is read whole
        or not at all; report it with :meth:`acknowledge_health_data`, naming the error's care context). This is
        CPU work in the calling thread; for very large pushes run it with ``asyncio.to_thread``.

        Raises:
            InvalidRequest: ``push`` is another event; nothing decrypted.
            HealthDataUnreadable: an entry has no care context reference or content, the push has no sender key,
                or an entry does not open (another key, a changed byte, a sender key off ABDM's curve) or is not a
                FHIR bundle (a JSON object); :attr:`~HealthDataUnreadable.care_context_id` names the entry.
            HealthDataChecksumMismatch: an entry opened but its checksum does not match (or is missing).
        """
        data = _push_of(push)
        key = data.key
        out: list[ReceivedBundle] = []
        for index, entry in enumerate(data.entries):
            cid = entry.care_context_id
            where = f"care context {cid!r}" if cid else f"entries[{index}]"
            if not cid:
                raise HealthDataUnreadable(f"{where} carries no care_context_id", care_context_id=None)
            if key is None or not key.public_key or not key.nonce:
                raise HealthDataUnreadable(
                    f"{where}: the push carries no sender key (key_information)", care_context_id=cid
                )
            if not entry.content:
                raise HealthDataUnreadable(f"{where} carries no content", care_context_id=cid)
            try:
                plain = key_material.decrypt(entry.content, peer_public_key=key.public_key, peer_nonce=key.nonce)
            except (EncryptionError, InvalidRequest) as exc:
                raise HealthDataUnreadable(
                    f"{where} does not open with this HIU key material ({type(exc).__name__})", care_context_id=cid
                ) from None
            if entry.checksum:
                if not checksum_matches(entry.checksum, plain):
                    raise HealthDataChecksumMismatch(
                        f"{where}: the data does not match its checksum (changed or cut on the way)",
                        care_context_id=cid,
                    )
            elif require_checksum:
                raise HealthDataChecksumMismatch(f"{where} carries no checksum", care_context_id=cid)
            try:
                bundle = _json.loads(plain)
            except ValueError:
                bundle = None
            if not isinstance(bundle, dict):
                raise HealthDataUnreadable(f"{where} is not a FHIR bundle (a JSON object)", care_context_id=cid)
            out.append(ReceivedBundle(care_context_id=cid, bundle=bundle, media=entry.media, report=validate(bundle)))
        return tuple(out)

    @checked
    async def acknowledge_health_data(
        self,
        consent_id: str,
        transaction_id: str,
        statuses: Iterable[HealthDataStatus],
        *,
        oid: str | None = None,
        partner_user_id: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> None:
        """``POST /abdm/v1/hiu/care-context/data/on-push``: tell the service how reading each care context of a
        push went (the FHIR parsing status), one :class:`~health_async.models.HealthDataStatus` per care
        context (:meth:`HealthDataStatus.from_bundle <health_async.models.HealthDataStatus.from_bundle>` makes it
        from a decrypted bundle's validation report). ``consent_id`` and ``transaction_id`` are the push's
        (:attr:`HiuDataPush.consent_id <health_async.models.HiuDataPush.consent_id>`, ``.transaction_id``).
        Answered 202.

        Checked before sending: the ids (non-empty, no control characters), at least one status, each a
        ``HealthDataStatus`` with a care context reference and a ``bool`` ``success``, no care context twice, a
        description of at most :data:`MAX_DESCRIPTION` characters.

        Sent once (judgement call: the service passes the status on to ABDM as a notification, and a repeat
        would notify twice): an unknown outcome raises :class:`~health_async.errors.OutcomeUnknown`.

        Raises:
            InvalidRequest: a rule above broken (the message names the item, never a description); nothing sent.
            OutcomeUnknown: the status may or may not have been taken.
        """
        if isinstance(statuses, str | bytes | dict):
            raise InvalidRequest("statuses must be an iterable of HealthDataStatus")
        items: list[dict[str, Any]] = []
        seen: set[str] = set()
        for i, item in enumerate(statuses):
            where = f"statuses[{i}]"
            if not isinstance(item, HealthDataStatus):
                raise InvalidRequest(f"{where} must be a HealthDataStatus(care_context_id, success, description)")
            if not isinstance(item.care_context_id, str):
                raise InvalidRequest(f"{where}.care_context_id must be a str")
            cid = _id(f"{where}.care_context_id", item.care_context_id)
            if cid in seen:
                raise InvalidRequest(f"{where}: statuses must not name a care context twice")
            seen.add(cid)
            if not isinstance(item.success, bool):
                raise InvalidRequest(f"{where}.success must be a bool")
            entry: dict[str, Any] = {"care_context_id": cid, "success": item.success}
            if item.description is not None:
                if not isinstance(item.description, str) or len(item.description) > MAX_DESCRIPTION:
                    raise InvalidRequest(f"{where}.description must be a str of at most {MAX_DESCRIPTION} characters")
                entry["description"] = item.description
            items.append(entry)
        if not items:
            raise InvalidRequest("statuses must hold at least one HealthDataStatus")
        body = {
            "consent_id": _id("consent_id", consent_id),
            "transaction_id": _id("transaction_id", transaction_id),
            "status_response": items,
        }
        await self._send_once(
            "POST",
            R.PATH_HIU_DATA_ON_PUSH,
            operation="hiu_data_on_push",
            headers=self._headers(oid, partner_user_id),
            json=body,
            retry=retry,
            timeout=timeout,
        )
