"""``client.abdm``: the hospital's side of ABDM's exchange (milestone 2): link care contexts to a patient's ABHA,
list the linked ones, tell a patient by SMS that records wait to be linked, and answer an HIU's data request with
the bundles encrypted by ABDM's ECDH scheme (:mod:`health_async.abdm_crypto`).

Paths and shapes: ``registration.yml`` (``/abdm/v1/care-contexts/*``, ``/abdm/v1/hip/care-context/data/on-fetch``).
Every call sends the optional ``X-Pt-Id`` / ``X-Partner-Pt-Id`` / ``X-Hip-Id`` headers the call gives, and the
client's ``partner_hip_id``; the client's ``user_id`` / ``partner_user_id`` are not sent by a call that names its
patient in the body (a link, by ABHA address or id; an SMS, by mobile). Links and pushes are not idempotent (a
repeat would link or deliver twice): they are sent once, and an unknown outcome raises
:class:`~health_async.errors.OutcomeUnknown` (check :meth:`Abdm.linked_care_contexts` before linking again).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from functools import cached_property
from typing import Any, Final

import attrs
import pybase64

from ... import _json, fhir
from ... import _routes as R
from ..._abha_input import normalize_abha_address
from ..._checks import checked
from ..._config import NOT_GIVEN, NotGiven, check_header_value, optional_header_value, pick
from ..._logging import logger
from ..._mobile import normalize_mobile
from ..._retry import RetryPolicy, retry_reason
from ..._session import json_body
from ..._telemetry import span
from ..._wire import structure_many
from ...abdm_crypto import KeyMaterial, checksum
from ...errors import BundleInvalid, HealthError, InvalidArgumentType, InvalidRequest
from ...fhir import validate as validate_bundle
from ...models.abdm._hospital import (
    CareContext,
    HealthDataRequest,
    LinkedCareContext,
    PushResult,
    RefusedCareContext,
)
from ...models.records._cases import HiType
from ._base import AbdmBase
from ._discover import DiscoverMixin
from ._guard import ConsentStore, Refusal, request_refusal, type_refusals
from ._hiu import HiuMixin
from ._requests import RequestsMixin
from ._user_linking import UserLinkingMixin
from .consents import Consents, aware_datetime

__all__ = ["MAX_CARE_CONTEXT_ID", "MEDIA", "Abdm", "bundle_bytes", "check_bundle", "checksum", "link_entry"]

#: The longest care context id accepted (the vendor gives none; ABDM's gateway takes ids of up to 255).
MAX_CARE_CONTEXT_ID: Final = 255
#: The media type of every pushed entry (``RecordsEntry.media``'s only value).
MEDIA: Final = "application/fhir+json"
_HI_TYPES: Final = frozenset(t.value for t in HiType)
#: How long our one-page key material is said to be valid (the HIU decrypts at once; ABDM sets no rule).
_KEY_LIFE: Final = dt.timedelta(hours=24)
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
#: How many errors a :class:`BundleInvalid` message names (all of them are in its ``problems``).
_NAMED_ERRORS: Final = 10


def _built(care_context_id: str, bundle: object) -> object:
    """A :class:`~health_async.fhir.Record` built for its care context; anything else as given. The builder's
    refusal (it names the field, never the value) is an :class:`InvalidRequest` naming the care context."""
    if not isinstance(bundle, fhir.Record):
        return bundle
    try:
        return bundle.build(care_context_id)
    except (TypeError, ValueError) as exc:
        raise InvalidRequest(f"bundles[{care_context_id!r}]: {exc}") from None


def _decoded(raw: bytes) -> dict[str, Any]:
    """The bytes that are sent, decoded (a JSON object: :func:`bundle_bytes` checked it): what is validated and
    guarded is what the requester receives, not the value it was encoded from."""
    decoded: dict[str, Any] = _json.loads(raw)
    return decoded


def bundle_bytes(name: str, bundle: object, *, care_context_id: str | None = None) -> bytes:
    """A FHIR bundle as the UTF-8 JSON bytes that are sent: a ``dict`` is encoded (once); ``bytes``/``str`` must
    already be a JSON object. :class:`InvalidRequest` naming ``name`` (never the content) otherwise, and for a
    ``dict`` holding a number JSON cannot carry (NaN, ±infinity: encoded as ``null``, the requester would receive
    another document than the one checked, one the validation itself refuses; that message also names
    ``care_context_id`` when given)."""
    if isinstance(bundle, dict):
        try:
            return _json.dumps_finite(bundle)
        except _json.NonFiniteNumber:
            named = name if care_context_id is None else f"{name} (care context {care_context_id!r})"
            raise InvalidRequest(f"{named} holds a number JSON cannot carry (NaN or infinity); nothing sent") from None
        except (TypeError, ValueError, OverflowError):
            return json_body(bundle, name)  # raises its InvalidRequest, naming the value's kind of fault
    if isinstance(bundle, str):
        try:
            bundle = bundle.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate
            raise InvalidRequest(f"{name} cannot be sent as JSON (text that is not valid Unicode)") from None
    if not isinstance(bundle, bytes | bytearray | memoryview):
        raise InvalidRequest(f"{name} must be a FHIR bundle: a dict, or its JSON as bytes or str")
    raw = bytes(bundle)
    try:
        parsed = _json.loads(raw)
    except ValueError:
        raise InvalidRequest(f"{name} is not JSON (a FHIR bundle is a JSON object)") from None
    if not isinstance(parsed, dict):
        raise InvalidRequest(f"{name} must be a JSON object (a FHIR bundle)")
    return raw


def check_bundle(care_context_id: str, bundle: dict[str, Any], where: str | None = None) -> None:
    """Validate one decoded bundle (:func:`health_async.fhir.validate`): :class:`BundleInvalid` when it has an
    error, naming ``where`` (default: the care context), the care context, and each error's path and rule (never a
    value); warnings pass."""
    report = validate_bundle(bundle)
    if report.ok:
        return
    errors = report.errors
    named = "; ".join(f"{p.path} ({p.rule})" for p in errors[:_NAMED_ERRORS])
    if len(errors) > _NAMED_ERRORS:
        named += f"; and {len(errors) - _NAMED_ERRORS} more"
    subject = f"care context {care_context_id!r}" if where is None else f"{where} (care context {care_context_id!r})"
    raise BundleInvalid(
        f"{subject}: its FHIR bundle is not valid ({len(errors)} error(s): {named}); nothing sent",
        care_context_id=care_context_id,
        problems=report.problems,
    )


def _care_context_id(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest(f"{where}.care_context_id must be a non-empty str")
    if len(value) > MAX_CARE_CONTEXT_ID or _CONTROL.search(value):
        raise InvalidRequest(f"{where}.care_context_id must be at most {MAX_CARE_CONTEXT_ID} printable characters")
    return value


def link_entry(item: object, where: str) -> dict[str, Any]:
    """The wire entry of one :class:`CareContext` (``LinkCareContextMeta``), every rule checked; ``where`` names
    the item in the :class:`InvalidRequest` (never its content). Shared by :meth:`Abdm.link_care_contexts` and the
    bulk link job (``health_async.ingest``), which checks each input row with it before anything is sent."""
    if not isinstance(item, CareContext):
        raise InvalidRequest(f"{where} must be a CareContext(care_context_id, display, hi_type, data=None)")
    entry: dict[str, Any] = {"care_context_id": _care_context_id(item.care_context_id, where)}
    if not isinstance(item.display, str) or not item.display.strip() or _CONTROL.search(item.display):
        raise InvalidRequest(f"{where}.display must be a non-empty line of text")
    entry["display"] = item.display
    hi_type = item.hi_type.value if isinstance(item.hi_type, HiType) else item.hi_type
    if not isinstance(hi_type, str):  # before the set lookup: an unhashable value would be a raw TypeError
        raise InvalidArgumentType(f"{where}.hi_type must be a HiType or its str value, not {type(hi_type).__name__}")
    if hi_type not in _HI_TYPES:
        raise InvalidRequest(f"{where}.hi_type must be one of {', '.join(sorted(_HI_TYPES))}")
    entry["hi_type"] = hi_type
    if item.data is not None:
        raw = bundle_bytes(f"{where}.data", item.data, care_context_id=entry["care_context_id"])
        entry["data"] = pybase64.b64encode(raw).decode("ascii")
        entry["hi_types"] = [hi_type]
    return entry


def _linked_bundle(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The ``data`` of a wire entry :func:`link_entry` made, decoded from the exact bytes that are sent."""
    return _decoded(pybase64.b64decode(entry["data"]))


def _clock(now: dt.datetime | Callable[[], dt.datetime] | None) -> Callable[[], dt.datetime]:
    """The push's clock: a fixed ``now``, a callable asked at every check, or the current UTC time. Each reading is
    checked to be timezone-aware (``InvalidRequest``): it is compared with ABDM's window and the key's expiry."""
    if now is None:
        return lambda: dt.datetime.now(dt.UTC)
    if isinstance(now, dt.datetime):
        aware_datetime(now, "now")
        return lambda: now
    if not callable(now):  # pragma: no cover - @checked refuses it first
        raise InvalidArgumentType("now must be a datetime or a callable returning one")
    clock = now

    def read() -> dt.datetime:
        moment = clock()
        if not isinstance(moment, dt.datetime):
            raise InvalidArgumentType("now() must return a datetime.datetime")
        aware_datetime(moment, "now()")
        return moment

    return read


class Abdm(DiscoverMixin, RequestsMixin, HiuMixin, UserLinkingMixin, AbdmBase):
    """ABDM's exchange: the hospital's side here (see the module); the patient's app and the requester's side in
    the mixins (``_abdm_discover.py``: providers, discover and link; ``_abdm_requests.py``: the patient's request
    inbox; ``_abdm_hiu.py``: the HIU's keys and the data pushed to it; ``_user_linking.py``: the answers to a patient's
    own search, the facility's onboarding) and :attr:`consents`."""

    @cached_property
    def consents(self) -> Consents:
        """Consents and the consent PIN: :class:`~health_async.resources.Consents`."""
        return Consents(self._client)

    @checked
    async def link_care_contexts(
        self,
        care_contexts: Iterable[CareContext],
        *,
        abha_address: str | None = None,
        oid: str | None = None,
        partner_user_id: str | None = None,
        validate: bool = True,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> None:
        """``POST /abdm/v1/care-contexts/link``: link visits to the patient's ABHA (named by ``abha_address``,
        or by ``oid`` / ``partner_user_id`` when the service knows the patient by them; those two are also sent as
        ``X-Pt-Id`` / ``X-Partner-Pt-Id``, the client's ``user_id`` / ``partner_user_id`` never: the body names the
        patient). Answered 202: the outcome of each link comes later, in an ``abha.link_care_context`` webhook
        (``LINKED`` / ``ERRORED``).

        A care context with ``data`` (its FHIR bundle) is stored by the service, which then answers data requests
        for it itself; without, you answer them (:meth:`push_health_data`). Each ``data`` bundle is validated
        first (:func:`health_async.fhir.validate`, offline): one with an error refuses the whole call, nothing sent;
        ``validate=False`` sends the bundles as they are (still checked to be JSON objects).

        Raises:
            BundleInvalid: a ``data`` bundle has a validation error (the message names the care context and the
                errors' paths and rules; :attr:`~health_async.errors.BundleInvalid.problems` holds them); nothing
                sent.
            InvalidRequest: a rule broken (the message names the field, never health data); nothing sent.
            OutcomeUnknown: the links may or may not have been made: check :meth:`linked_care_contexts` before
                linking again (a repeat would not be harmful to ABDM, but it triggers a second webhook).
        """
        items = list(care_contexts)
        entries = [link_entry(item, f"care_contexts[{i}]") for i, item in enumerate(items)]
        if not entries:
            raise InvalidRequest("care_contexts must hold at least one CareContext")
        ids = [e["care_context_id"] for e in entries]
        if len(set(ids)) != len(ids):
            raise InvalidRequest("care_contexts must not repeat a care_context_id")
        if abha_address is None and oid is None and partner_user_id is None:
            raise InvalidRequest("link_care_contexts needs the patient: abha_address=, oid= or partner_user_id=")
        body: dict[str, Any] = {"care_contexts": entries}
        if abha_address is not None:
            body["abha_address"] = normalize_abha_address(abha_address)
        if oid is not None:
            body["oid"] = optional_header_value("oid", oid)
        if partner_user_id is not None:
            body["partner_user_id"] = optional_header_value("partner_user_id", partner_user_id)
        if validate:  # last: the costliest check, once every cheap one passed
            for i, entry in enumerate(entries):
                if "data" in entry:  # the bytes that are sent, decoded: what is validated is what is linked
                    check_bundle(entry["care_context_id"], _linked_bundle(entry), f"care_contexts[{i}]")
        await self._send_once(
            "POST",
            R.PATH_CARE_CONTEXTS_LINK,
            operation="care_contexts_link",
            headers=self._named_patient_headers(oid, partner_user_id),
            json=body,
            retry=retry,
            timeout=timeout,
        )

    @checked
    async def linked_care_contexts(
        self,
        hip_id: str,
        *,
        oid: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> tuple[LinkedCareContext, ...]:
        """``GET /abdm/v1/care-contexts/linked``: the care contexts linked at your facility ``hip_id`` (for the
        patient ``oid``, or the client's ``user_id``), with where each stands in the exchange.

        Raises:
            InvalidRequest: no patient (neither ``oid`` here nor ``user_id`` on the client: the service would answer
                an empty list, which reads as "nothing linked"), or a value not sendable; nothing sent.
        """
        if oid is None and self._client.user_id is None:
            raise InvalidRequest(
                "linked_care_contexts needs the patient: pass oid= here or user_id= to HealthClient (nothing sent)"
            )
        params = [("hip_id", check_header_value("hip_id", hip_id))]
        if oid is not None:
            params.append(("oid", check_header_value("oid", oid)))
        data = await self._session.request(
            "GET",
            R.PATH_CARE_CONTEXTS_LINKED,
            operation="care_contexts_linked",
            params=params,
            headers=self._headers(oid),
            idempotent=True,
            retry=retry,
            timeout=timeout,
        )
        items = data.get("care_contexts") if isinstance(data, dict) else None
        return structure_many(items or [], LinkedCareContext, "care_contexts")

    @checked
    async def notify_unlinked(
        self,
        mobile: str,
        *,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> None:
        """``POST /abdm/v1/care-contexts/sms/notify``: tell the patient by SMS that records at your facility wait to
        be linked to their ABHA. ``mobile``: an Indian mobile number in any common form (sent as 10 digits).
        Sent once (a repeat sends a second SMS)."""
        await self._send_once(
            "POST",
            R.PATH_CARE_CONTEXTS_NOTIFY,
            operation="care_contexts_notify",
            headers=self._named_patient_headers(),  # the patient is the mobile: no default X-Pt-Id
            json={"mobile_number": normalize_mobile(mobile)},
            retry=retry,
            timeout=timeout,
        )

    @checked
    async def push_health_data(
        self,
        request: HealthDataRequest,
        bundles: Mapping[str, dict[str, Any] | bytes | str | fhir.Record],
        *,
        consents: ConsentStore | None = None,
        now: dt.datetime | Callable[[], dt.datetime] | None = None,
        validate: bool = True,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> PushResult:
        """``POST /abdm/v1/hip/care-context/data/on-fetch``: answer an HIU's data request (from an
        ``abha.hip_data_fetch`` webhook) with the FHIR bundle of each care context it asked for
        (``bundles``: ``{care_context_id: bundle}``; a bundle is a ``dict`` or its JSON, or builder inputs, a
        :class:`~health_async.fhir.Record`, built here with the care context's id).

        Each bundle is encrypted to the HIU's key with ABDM's ECDH scheme and sent as **its own page**, under its
        own fresh key material (judgement call: all entries of a page share one key material, so one key and one
        AES-GCM IV; a page per entry is the only way two bundles never meet under one IV). Each entry carries the
        checksum of its plain text (:func:`checksum`). Bundles the request did not ask for are refused; care
        contexts asked for but absent from ``bundles`` are reported in :attr:`PushResult.missing` (nothing is sent
        for them). An expired HIU key (``key.expiry`` before the first check's time) is refused before anything is
        sent.

        ``now`` is the push's clock: a fixed timezone-aware datetime, a callable returning one (asked at every
        check: before anything is sent, then before every page and every retry of a page), or by default the
        current UTC time. A naive time is refused (``InvalidRequest``).

        Each page is sent once (a repeat would deliver a bundle twice): a page whose outcome is unknown raises
        :class:`~health_async.errors.OutcomeUnknown` and the pages after it are not sent. A page is retried (by
        ``retry``'s policy) only when its request cannot have reached the service.

        **The guard** (:mod:`health_async.resources.abdm._guard`) holds for every page, not only the first: before
        each page, and each retry of one, nothing more is pushed for a request older than ABDM's 20-minute window
        (from :attr:`~health_async.models.HealthDataRequest.requested_at`, the webhook's time; a request built
        without it is counted from this push's first check, the moment it is first known here, so the window is
        never skipped); with ``consents`` (a :class:`~health_async.resources.ConsentStore`, e.g. a
        :class:`~health_async.resources.ConsentBook`), nothing for a request whose consent is not known to be
        granted, is revoked, denied or expired (also when recorded while the push is under way), or does not cover
        the requested types or dates. Before the first page, a bundle whose record type (its NRCeS profile) is not
        among the requested ``hi_types`` is refused alone. What is refused is not sent, and
        :attr:`~health_async.models.PushResult.refused` says why, per care context, with the rule
        (:attr:`~health_async.models.RefusedCareContext.rule`); the rest is pushed. Pages refused after others
        were sent leave the HIU with fewer pages than the ``page_count`` announced: judgement call, nothing is
        sent past the consent or the window, and ABDM's own timeout ends the HIU's wait.

        Each bundle is encoded once, and what is validated and sent are those bytes: a ``dict`` holding a number
        JSON cannot carry (NaN, ±infinity) is refused (``InvalidRequest`` naming the care context, never the
        value). Then each bundle to be pushed is validated as decoded from those bytes
        (:func:`health_async.fhir.validate`, offline: FHIR R4 and the NRCeS profile of its record type): one with
        an error refuses the whole push, nothing sent (:class:`~health_async.errors.BundleInvalid`, naming the
        first such care context in the request's order and its errors' paths and rules, never a value).
        ``validate=False`` pushes the bundles as they are (still checked to be JSON objects). Bundles refused by
        the guard are not validated (they are not sent).

        Raises:
            BundleInvalid: a bundle to be pushed has a validation error; nothing sent.
            InvalidRequest: a rule above broken (a bundle not asked for, an expired HIU key, a non-finite number,
                a naive ``now``, ...); nothing sent.
            OutcomeUnknown: a page may or may not have been taken; the pages after it were not sent.
        """
        clock = _clock(now)
        if not isinstance(request, HealthDataRequest):
            raise InvalidRequest("request must be the HealthDataRequest of an abha.hip_data_fetch event")
        if not isinstance(bundles, Mapping):
            raise InvalidRequest("bundles must be a mapping {care_context_id: FHIR bundle}")
        asked = list(dict.fromkeys(request.care_contexts))
        extra = [key for key in bundles if key not in asked]
        if extra:
            raise InvalidRequest(f"bundles holds {len(extra)} care context(s) the request did not ask for")
        first = clock()
        received = request.requested_at if request.requested_at is not None else first
        expires = request.key.expires_at
        if expires is not None and expires <= first:
            raise InvalidRequest("the HIU's key has expired: nothing pushed (the HIU must ask again)")
        given = {cid: _built(cid, bundles[cid]) for cid in asked if cid in bundles}
        plain = {cid: bundle_bytes(f"bundles[{cid!r}]", bundle) for cid, bundle in given.items()}
        decoded = {cid: _decoded(raw) for cid, raw in plain.items()}  # the bytes sent, as the requester reads them
        whole = await request_refusal(request, consents, first, received)
        refused = dict.fromkeys(plain, whole) if whole is not None else type_refusals(request, decoded)
        order = [cid for cid in plain if cid not in refused]  # the request's order: plain was filled in it
        if validate:  # every bundle before the first page: a refusal sends nothing
            for cid in order:
                check_bundle(cid, decoded[cid])

        async def guard() -> tuple[Refusal | None, dt.datetime]:
            moment = clock()
            return await request_refusal(request, consents, moment, received), moment

        pushed: list[str] = []
        telemetry = self._session.telemetry
        for page, cid in enumerate(order, start=1):
            # telemetry: a span per page, its number and the count only (never a care context or transaction id)
            attributes = {"health_async.operation": "abdm.push_health_data", "health_async.page": page,
                          "health_async.page_count": len(order)}  # fmt: skip
            with span(telemetry, "abdm.push_health_data.page", attributes):
                stopped = await self._push_page(request, page, len(order), cid, plain[cid], guard, retry, timeout)
            if stopped is not None:  # this page and every later one: the request's own rules broke
                refused.update(dict.fromkeys(order[page - 1 :], stopped))
                break
            pushed.append(cid)
        return PushResult(
            transaction_id=request.transaction_id,
            pushed=tuple(pushed),
            missing=tuple(cid for cid in asked if cid not in plain),
            refused=tuple(
                RefusedCareContext(cid, refused[cid].reason, refused[cid].rule) for cid in plain if cid in refused
            ),
        )

    async def _push_page(
        self,
        request: HealthDataRequest,
        page: int,
        pages: int,
        cid: str,
        plain: bytes,
        guard: Callable[[], Awaitable[tuple[Refusal | None, dt.datetime]]],
        retry: RetryPolicy | NotGiven,
        timeout: float | NotGiven | None,
    ) -> Refusal | None:
        """Send one page, ``guard`` asked before each attempt: the refusal it gives (nothing of the page sent), or
        ``None`` once sent. The attempts are the retry policy's, made here rather than in the session so that the
        guard runs before each: a page is retried only when its request cannot have reached the service (sent
        once), within the policy's attempts and deadline and the call's time budget (``timeout``, else the
        client's), counted from the page's first attempt."""
        policy = pick(retry, self._session.config.retry)
        policy = attrs.evolve(policy, retry_non_idempotent=False)
        once = attrs.evolve(policy, attempts=1)
        budget = self._session.config.timeout if isinstance(timeout, NotGiven) else timeout
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            refusal, moment = await guard()
            if refusal is not None:
                return refusal
            material = KeyMaterial.generate()  # fresh for every page: no IV ever serves twice
            content = material.encrypt(plain, peer_public_key=request.key.public_key, peer_nonce=request.key.nonce)
            body = {
                "transaction_id": request.transaction_id,
                "page_number": page,
                "page_count": pages,
                "entries": [{"care_context_id": cid, "content": content, "media": MEDIA, "checksum": checksum(plain)}],
                "key_information": {
                    "crypto_alg": "ECDH",
                    "curve": "Curve25519",
                    "dh_public_key": {
                        "expiry": (moment + _KEY_LIFE).isoformat().replace("+00:00", "Z"),
                        "parameters": "Curve25519/32byte random key",
                        "key_value": material.x509_public_key,
                    },
                    "nonce": material.nonce,
                },
            }
            left: float | NotGiven | None = timeout
            if attempt > 1 and budget is not None:
                left = budget - (time.monotonic() - started)
            try:
                await self._send_once(
                    "POST",
                    R.PATH_HIP_DATA_ON_FETCH,
                    operation="hip_data_push",
                    headers=self._headers(request.oid),
                    json=body,
                    retry=once,
                    timeout=left,
                )
            except HealthError as exc:
                if attempt >= policy.attempts or not policy.should_retry(exc, idempotent=False):
                    raise
                delay = policy.delay(attempt, exc)
                spent = time.monotonic() - started + delay
                if (policy.deadline is not None and spent > policy.deadline) or (
                    budget is not None and spent >= budget
                ):
                    raise
                logger.info(
                    "retrying POST %s in %.2fs after attempt %d: %s",
                    R.PATH_HIP_DATA_ON_FETCH,
                    delay,
                    attempt,
                    retry_reason(exc),
                )
                await asyncio.sleep(delay)
                continue
            return None
