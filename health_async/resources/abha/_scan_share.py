"""Scan & Share: the patient side (share, then the token) and the hospital side (the token answered).

The patient scans a facility's QR code at its registration counter; the QR code gives the facility's HIP id and
the counter's id. Patient side (a PHR app)::

    share = await client.abha.scan_and_share("IN2910000223", "counter-3", location=(12.9716, 77.5946))
    print(share.token_number, share.hip_name or share.hip_id)

Hospital side (the facility's software), by hand or through the ABDM webhook handler::

    event = webhooks.verify(body, signature, secret)                   # an abha.hip_profile_share webhook
    await client.abha.answer_profile_share(event, token_number="A-17")

    counter = TokenCounter(prefix="A-")                                # one token per person per counter per day
    handler = webhooks.abdm_handler(secret, client=client, on_profile_share=counter)

**Checked before sending** (:class:`~health_async.errors.InvalidRequest` naming the rule, never the value): the
HIP and counter ids of the QR code (:func:`qr_id`), the location (:class:`~health_async.models.ShareLocation`), the
wait's deadline and poll schedule, the user id the share is made for, the event answered and its token number.

**Never repeated.** The share (``POST /abdm/v2/profile/share``) and the answer
(``POST /abdm/v1/hip/patient/profile/on-share``) go through :meth:`Resource._send_once`. A share whose outcome is
unknown raises :class:`ShareOutcomeUnknown`, which carries the share's ``request_id``: the client chooses it and
sends it in the body (the OpenAPI's ``request_id``, "to track the status of the profile share"), so
:meth:`ScanShareMixin.share_status` can tell whether the share went through before the patient scans again.
The polls are reads, retried as any read.

Judgement calls:

* The wait reuses the records' poll loop (:func:`~health_async.resources.records._polling.poll_until_final`, the one
  ``client.documents.wait_for_result`` uses, and its :class:`~health_async.resources.records._polling.PollPolicy`): the
  same deadline that is never outlived, the same rule that a rate limit, a 5XX or a transport failure does not end
  the wait, the same ``Retry-After`` handling. Its schedule here is :data:`DEFAULT_SHARE_POLL` (first poll after
  1 s, then up to every 5 s): someone is standing at the counter, so a poll every 30 s (the records' cap) would
  be too slow. Its debug lines speak of a "processing result" (the loop's own words).
* The wait is always bounded: ``wait_timeout`` is a positive number of seconds (``None`` is refused), and it
  covers the whole call, the share included (default :data:`DEFAULT_SHARE_WAIT`, 60 s).
* A share is made for a user: it needs ``X-Pt-Id`` (the ``user_id`` of the call or the client), checked before
  sending, although the OpenAPI marks it optional: without it the service cannot tell whose profile to share.
* The errors of this flow (:class:`ScanShareTimeout`, :class:`ScanShareFailed`, :class:`ShareOutcomeUnknown`) live
  here, beside the flow, and subclass the library's own (:class:`~health_async.errors.HealthError`, Python's
  ``TimeoutError``, :class:`~health_async.errors.OutcomeUnknown`): ``except HealthError`` catches them as any other.
* A repeated scan is recognised by the hospital (:class:`TokenCounter`), not by the client: each scan is a new
  share, with a new request id, as a patient who scans again wants to know their token again.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import time
import uuid
from typing import Any, Final, Unpack

import attrs

from ... import _routes as R
from ..._checks import checked
from ..._config import NOT_GIVEN, NotGiven, finite, path_segment
from ..._logging import logger
from ..._wire import structure
from ...errors import (
    InvalidRequest,
    OutcomeUnknown,
    ProcessingTimeout,
    ScanShareFailed,
    ScanShareTimeout,
    ShareOutcomeUnknown,
)
from ...models import ProcessingResult, ProcessingStatus, ProfileShare, ShareLocation, ShareStatus, ShareToken
from ...models.webhooks._events import EventKind, WebhookEvent
from ..records._polling import PollPolicy, poll_until_final
from ._base import AbhaBase, AbhaOptions

__all__ = [
    "DEFAULT_SHARE_POLL",
    "DEFAULT_SHARE_WAIT",
    "QR_ID_MAX",
    "ScanShareMixin",
    "qr_id",
]

#: Seconds a Scan & Share waits by default for the facility's token, the share included.
DEFAULT_SHARE_WAIT: Final = 60.0
#: How often the wait polls by default: after about 1 s, then doubling up to every 5 s (+-20 % jitter).
DEFAULT_SHARE_POLL: Final = PollPolicy(first_poll=1.0, max_poll=5.0)
#: Most characters of a HIP or counter id read from a QR code.
QR_ID_MAX: Final = 128
#: India Standard Time: where a counter's day begins and ends (:class:`TokenCounter`'s default).
#: Most characters of a token number.
TOKEN_MAX: Final = 64

_QR_ID: Final = re.compile(r"[\x21-\x7e]+")  # printable ASCII, no space
_TOKEN: Final = re.compile(r"[^\x00-\x1f\x7f]+")  # no control characters
_TOKEN_INT_LIMIT: Final = 10**TOKEN_MAX  # the least int of more than TOKEN_MAX digits
_FINAL: Final = ProcessingResult(status=ProcessingStatus.COMPLETED)
_WAITING: Final = ProcessingResult(status=ProcessingStatus.IN_PROGRESS)


# ---------------------------------------------------------------------------------------------------- input


def qr_id(name: str, value: str) -> str:
    """A HIP id or counter id read from a facility's QR code, as sent: surrounding whitespace stripped, then 1 to
    :data:`QR_ID_MAX` (128) printable ASCII characters without spaces. :class:`InvalidRequest` naming ``name`` and
    the rule, never the value."""
    if not isinstance(value, str):
        raise InvalidRequest(f"{name} must be a str (as read from the QR code)")
    text = value.strip()
    if not text:
        raise InvalidRequest(f"{name} must not be empty")
    if len(text) > QR_ID_MAX:
        raise InvalidRequest(f"{name} must be at most {QR_ID_MAX} characters")
    if not _QR_ID.fullmatch(text):
        raise InvalidRequest(f"{name} must be printable ASCII without spaces or control characters")
    return text


def _location(location: ShareLocation | tuple[float, float] | None) -> ShareLocation | None:
    if location is None or isinstance(location, ShareLocation):
        return location
    if len(location) != 2:
        raise InvalidRequest("location must be a ShareLocation or a (latitude, longitude) pair")
    return ShareLocation(location[0], location[1])


def _token_text(token_number: str | int) -> str:
    if isinstance(token_number, int) and not isinstance(token_number, bool):
        if token_number < 0:
            raise InvalidRequest("token_number must not be negative")
        if token_number >= _TOKEN_INT_LIMIT:  # before str(): 10**5000 is past Python's int-to-str digit limit
            raise InvalidRequest(f"token_number must be at most {TOKEN_MAX} digits")
        return str(token_number)
    if not isinstance(token_number, str):
        raise InvalidRequest("token_number must be a str or an int")
    text = token_number.strip()
    if not text:
        raise InvalidRequest("token_number must not be empty")
    if len(text) > TOKEN_MAX:
        raise InvalidRequest(f"token_number must be at most {TOKEN_MAX} characters")
    if not _TOKEN.fullmatch(text):
        raise InvalidRequest("token_number must not contain control characters")
    return text


def _epoch(expires_at: dt.datetime) -> int:
    if expires_at.tzinfo is None or expires_at.utcoffset() is None:
        raise InvalidRequest("expires_at must be a timezone-aware datetime")
    return math.floor(expires_at.timestamp())


def _share_of(event: WebhookEvent | ProfileShare) -> ProfileShare:
    """The typed share of an ``abha.hip_profile_share`` event (or the share itself)."""
    if isinstance(event, ProfileShare):
        return event
    if event.kind is not EventKind.HIP_PROFILE_SHARE:
        raise InvalidRequest(f"event must be an {EventKind.HIP_PROFILE_SHARE.value} event")
    share = event.payload()
    if not isinstance(share, ProfileShare):  # pragma: no cover - EVENT_PAYLOADS maps the event to ProfileShare
        raise InvalidRequest(f"event must be an {EventKind.HIP_PROFILE_SHARE.value} event")
    return share


# ---------------------------------------------------------------------------------------------------- resource


class ScanShareMixin(AbhaBase):
    """Part of :class:`~health_async.resources.Abha`: Scan & Share, both sides (see the module)."""

    @checked
    async def scan_and_share(
        self,
        hip_id: str,
        counter_id: str,
        *,
        location: ShareLocation | tuple[float, float] | None = None,
        wait_timeout: float = DEFAULT_SHARE_WAIT,
        poll: PollPolicy | None = None,
        **options: Unpack[AbhaOptions],
    ) -> ShareToken:
        """``POST /abdm/v2/profile/share``, then ``GET /abdm/v2/profile/share/{request_id}`` until the facility
        answers: share the user's ABHA profile with the facility whose QR code was scanned, and return its
        token.

        ``hip_id`` and ``counter_id`` are read from the facility's QR code; ``location`` is the device's
        (a :class:`~health_async.models.ShareLocation` or a ``(latitude, longitude)`` pair; optional, the vendor
        asks for it). Checked before anything is sent: the two ids (:func:`qr_id`), the location, a user id
        (``X-Pt-Id``: the call's ``user_id`` or the client's), ``wait_timeout`` (a positive number) and ``poll``.

        The share is sent once (never repeated once it may have reached the service: :class:`ShareOutcomeUnknown`
        with its ``request_id``). The polls follow ``poll`` (default :data:`DEFAULT_SHARE_POLL`), are retried as
        reads, and a rate limit, 5XX or transport failure does not end the wait. ``wait_timeout`` (default 60 s)
        bounds the whole call, the share included: the wait never outlives it. ``timeout`` bounds each request
        (cut to the time left); ``retry`` is each request's policy. Cancelling the call leaves nothing running.

        Returns the :class:`~health_async.models.ShareToken` of status ``SUCCESS``: :attr:`~ShareToken.token_number`
        (``None`` when the facility registered the patient without a token), the facility
        (:attr:`~ShareToken.hip_id`, and :attr:`~ShareToken.hip_name` when the service sends it), the expiry.

        Raises:
            InvalidRequest: bad input (see above); nothing is sent.
            ScanShareFailed: the share's status is ``failed``.
            ScanShareTimeout: no answer from the facility by the deadline (a ``TimeoutError``); the share was made.
            ShareOutcomeUnknown: the share may or may not have been made; check with :meth:`share_status`.
            AbhaError, ApiError: the service refused the share (as sent) or a poll (a 4XX, a 404...).
        """
        hip = qr_id("hip_id", hip_id)
        counter = qr_id("counter_id", counter_id)
        place = _location(location)
        deadline = finite(wait_timeout)  # its type (a number, never None) is checked
        if deadline is None or deadline <= 0:
            raise InvalidRequest("wait_timeout must be a positive number of seconds")
        policy = PollPolicy.of(poll or DEFAULT_SHARE_POLL)
        self._required_user_id(options.get("user_id", NOT_GIVEN))
        per_request = options["timeout"] if "timeout" in options else self._session.config.timeout
        request_id = str(uuid.uuid4())
        body: dict[str, Any] = {"hip_id": hip, "counter_id": counter, "request_id": request_id}
        if place is not None:
            body["location"] = place.to_wire()
        started = time.monotonic()
        share_options: AbhaOptions = {
            **options,
            "timeout": deadline if per_request is None else min(per_request, deadline),
        }
        try:
            data = await self._post(R.PATH_PROFILE_SHARE, "profile_share", body, once=True, **share_options)
        except OutcomeUnknown as exc:
            raise ShareOutcomeUnknown(
                f"profile_share: the share may have reached the service; it was not repeated. Check its request "
                f"id {request_id} with client.abha.share_status before sharing again",
                request_id=request_id,
                operation="profile_share",
            ) from exc
        accepted = self._token(data, request_id, hip, counter)
        request_id = accepted.request_id or request_id
        logger.info("Scan & Share: profile shared with the facility, waiting for its token")
        latest: ShareToken | None = None
        if accepted.status is ShareStatus.FAILED:
            self._failed(request_id)

        async def fetch(budget: float | None) -> ProcessingResult:
            nonlocal latest
            latest = await self._status(request_id, hip, counter, options, budget)
            if latest.status is ShareStatus.SUCCESS:
                return _FINAL
            if latest.status is ShareStatus.FAILED:
                self._failed(request_id)
            return _WAITING

        left = deadline - (time.monotonic() - started)
        try:
            if left <= 0:
                raise ProcessingTimeout("no time left to wait", document_id=request_id)
            await poll_until_final(fetch, request_id, timeout=left, policy=policy, request_timeout=per_request)
        except ProcessingTimeout as exc:
            last = None if latest is None else latest.status
            logger.warning("Scan & Share: no token from the facility within %g s", deadline)
            raise ScanShareTimeout(
                f"the facility gave no token within {deadline:g} s "
                f"(last status {'none' if last is None else last.name}); the share was made and may still be "
                "answered: ask client.abha.share_status with the request id",
                request_id=request_id,
                last_status=last,
            ) from exc.__cause__
        assert latest is not None
        logger.info("Scan & Share: the facility answered (%s)", "a token" if latest.token_number else "no token")
        return latest

    @checked
    async def share_status(
        self,
        request_id: str,
        *,
        hip_id: str | None = None,
        counter_id: str | None = None,
        **options: Unpack[AbhaOptions],
    ) -> ShareToken:
        """``GET /abdm/v2/profile/share/{request_id}``: where one share is (one read, retried as any read).

        ``request_id`` is the share's (:attr:`ScanShareTimeout.request_id`, :attr:`ShareOutcomeUnknown.request_id`,
        :attr:`ShareToken.request_id`); it must be one path segment (checked before sending). ``hip_id`` and
        ``counter_id``, when given, fill the answer's facility and counter (the answer need not carry them).

        Raises:
            InvalidRequest: a bad request id; nothing is sent.
            NotFoundError: the service knows no such share (404); ApiError: any other refusal.
        """
        path_segment("request_id", request_id)
        return await self._status(request_id, hip_id, counter_id, options, options.get("timeout", NOT_GIVEN))

    @checked
    async def answer_profile_share(
        self,
        event: WebhookEvent | ProfileShare,
        *,
        token_number: str | int,
        expires_at: dt.datetime | None = None,
        **options: Unpack[AbhaOptions],
    ) -> None:
        """``POST /abdm/v1/hip/patient/profile/on-share``: give the patient who scanned your counter's QR code
        their token (the hospital side of Scan & Share).

        ``event`` is the verified ``abha.hip_profile_share`` webhook (or its :meth:`~WebhookEvent.payload`, a
        :class:`~health_async.models.ProfileShare`); the answer names its request id, the patient's ABHA address
        and the counter (``hip_code``). ``token_number`` is the token (a str, or an int sent as its digits);
        ``expires_at``, when given, is when it expires (an aware datetime, sent as epoch seconds). ``X-Hip-Id``
        is the call's ``partner_hip_id``, else the client's, else the share's ``hip_id``.

        Checked before sending: the event is an ``abha.hip_profile_share`` with a request id and an ABHA address,
        the token number is 1 to 64 characters without control characters (or a non-negative int), ``expires_at``
        is timezone-aware. Sent once: never repeated once it may have reached the service.

        With :func:`health_async.webhooks.abdm_handler`'s ``on_profile_share=`` this is called for you.

        Raises:
            InvalidRequest: another event, a share without a request id or ABHA address, a bad token or expiry;
                nothing is sent.
            OutcomeUnknown: the answer may have reached the service; it was not repeated.
            AbhaError, ApiError: the service refused the answer.
        """
        share = _share_of(event)
        token = _token_text(token_number)
        expiry = None if expires_at is None else _epoch(expires_at)
        if not share.request_id:
            raise InvalidRequest("the share carries no request id (req_id): it cannot be answered")
        if not share.abha_address:
            raise InvalidRequest("the share carries no ABHA address: it cannot be answered")
        body: dict[str, Any] = {
            "request_id": share.request_id,
            "abha_address": share.abha_address,
            "token": {"token_number": token} if expiry is None else {"token_number": token, "expires_at": expiry},
        }
        if share.hip_code:
            body["hip_code"] = share.hip_code
        answer_options: AbhaOptions = {**options}
        if "partner_hip_id" not in answer_options and self._client.partner_hip_id is None and share.hip_id:
            answer_options["partner_hip_id"] = share.hip_id
        await self._post(R.PATH_PROFILE_ON_SHARE, "profile_on_share", body, once=True, **answer_options)
        logger.info("Scan & Share: token sent to the service for a profile share")

    # ------------------------------------------------------------------------------------------------ helpers

    async def _status(
        self,
        request_id: str,
        hip_id: str | None,
        counter_id: str | None,
        options: AbhaOptions,
        timeout: float | NotGiven | None,
    ) -> ShareToken:
        data = await self._session.request(
            "GET",
            R.PATH_PROFILE_SHARE_STATUS.format(request_id=path_segment("request_id", request_id)),
            operation="profile_share_status",
            route=R.PATH_PROFILE_SHARE_STATUS,
            headers=self._headers(options),
            idempotent=True,
            retry=options.get("retry", NOT_GIVEN),
            timeout=timeout,
        )
        return self._token(data, request_id, hip_id, counter_id)

    @staticmethod
    def _token(data: Any, request_id: str, hip_id: str | None, counter_id: str | None) -> ShareToken:
        """A share answer as a :class:`ShareToken`; an empty answer (a 202 without a body) is still processing."""
        if data is None:
            data = {"status": ShareStatus.PROCESSING.value}
        token = structure(data, ShareToken, counter_id=counter_id)
        if not token.request_id or (hip_id is not None and token.hip_id is None):
            token = attrs.evolve(token, request_id=token.request_id or request_id, hip_id=token.hip_id or hip_id)
        return token

    @staticmethod
    def _failed(request_id: str) -> None:
        logger.warning("Scan & Share: the share failed (status failed)")
        raise ScanShareFailed(
            "the share failed: it did not reach the facility, or the facility refused it", request_id=request_id
        )
