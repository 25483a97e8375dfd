"""The ABHA profile after registration: profile, update, delete, card, QR, search by mobile, pincode.

Paths and shapes: ``registration.yml`` (``/abdm/v1/profile`` GET, PATCH and DELETE, ``/abdm/v1/profile/asset/card``,
``/abdm/v1/profile/asset/qr``, ``/abdm/v1/profile/search``, ``/abdm/v1/registration/pincode/{pincode}``) and the
pages ``profile/**``, ``phr/profile.mdx``, ``commons/pincode-details.mdx``::

    profile = await client.abha.profile(user_id=oid)          # AbhaProfile (personal data out of repr)
    await client.abha.update_profile(pincode="560001", user_id=oid)
    kind = await client.abha.card("abha-card.png", user_id=oid)   # "image/png" (or "application/pdf")
    found = await client.abha.search("98765 43210")           # KYC-verified ABHAs of a mobile number
    where = await client.abha.pincode("834001")               # PincodeDetails(state_name="Jharkhand", ...)

**Who the user is.** The vendor identifies the user of the profile, card, QR, update and delete calls by their OID
(``X-Pt-Id``, or an ``oid`` query): these calls need one (the call's ``user_id``, else the client's), else
:class:`~health_async.errors.InvalidRequest` before anything is sent. Judgement call: the OID goes in ``X-Pt-Id``
only, as on every other call (the ``oid`` query says the same thing, and would put it in access logs). No ABHA
user token is sent: none of these paths declares one; the service holds the user's ABHA session
(``phr/profile.mdx``: a live session is needed, see ``GET /abdm/v1/session/status``). The partner headers
(``X-Partner-Pt-Id``, ``X-Hip-Id``) go as on every ``client.abha`` call. ``search`` declares no header at all: it
sends none (it takes only ``encrypt``, ``retry`` and ``timeout``). ``pincode`` declares the three, all optional.

**Retried or not.** ``profile``, ``card``, ``qr``, ``search`` and ``pincode`` are reads, retried as any read.
``update_profile`` and ``delete_profile`` are sent once (:meth:`Resource._send_once`): an unknown outcome raises
:class:`~health_async.errors.OutcomeUnknown` (read the profile to see whether it took effect).

**The card and the QR are streamed** to a path or a binary file object, never held whole in memory, under the
client's ``max_response_size`` (:class:`~health_async.errors.ResponseTooLarge` at once when ``Content-Length``
says so, else as soon as the count passes it). The answer's content type must be one the vendor documents for
the asset and the first bytes must be what that type says (a PNG signature, ``%PDF-``); otherwise, or for a JSON
error body answered with 200, :class:`~health_async.errors.ResponseValidationError`. Nothing partial is left
behind: a path is written to a hidden temporary file beside it (``.<name>.<random>.part``, readable by the owner
only) that is flushed, synced and renamed over the path only when complete (an existing file there stays as it
was until then); a seekable file object is cut back to where it was. The request goes through the session's
chokepoint as every other (its limits, token refresh, error and transport mapping, retry policy), the 200's body
handed to this module's receiver instead of read whole (``Session.request(receive=...)``).

**Errors.** The service's error body (``GenericError``: ``code``, ``error``, ``source_error``) comes as an
:class:`~health_async.errors.ApiError` by status (404: :class:`~health_async.errors.NotFoundError`, e.g. no profile
for that OID or an unknown pincode; 5XX: :class:`~health_async.errors.ServerError`) with the body on ``.body``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import io
import os
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, BinaryIO, Final, TypeAlias, TypedDict, Unpack

import aiohttp
import attrs

from ... import _constants as C
from ... import _json
from ... import _routes as R
from ..._checks import checked
from ..._config import NOT_GIVEN, NotGiven
from ..._files import SNIFF_BYTES, sniff_content_type
from ..._mobile import normalize_mobile
from ..._retry import RetryPolicy
from ..._session import _looks_encrypted, _read_capped, _Request
from ..._wire import structure
from ...errors import InvalidArgumentType, InvalidRequest, ResponseTooLarge, ResponseValidationError, _abha_code
from ...models import AbhaProfile, AbhaSearchResult, NewAbhaProfile, PincodeDetails
from ...models.patients._patients import Gender
from ._base import AbhaBase, AbhaOptions

__all__ = ["CARD_TYPES", "QR_TYPES", "AbhaCallOptions", "AbhaProfileMixin", "DownloadTarget", "normalize_pincode"]

#: Where ``card`` and ``qr`` write: a filesystem path, or a binary file object opened for writing.
DownloadTarget: TypeAlias = str | os.PathLike[str] | BinaryIO

#: What the card may be: the vendor documents ``image/png``; ABDM's card service also answers a PDF.
CARD_TYPES: Final = frozenset({"image/png", "application/pdf"})
#: What the QR may be: the QR image, or (``registration.yml``'s only documented answer, ``AssetQRData``) the JSON
#: data to draw a QR code from.
QR_TYPES: Final = frozenset({"image/png", "application/json"})
#: The most JSON a QR answer may hold (``AssetQRData`` is a dozen short strings).
_QR_JSON_CAP: Final = 64 * 1024
#: Read step of a streamed body.
_CHUNK: Final = 64 * 1024
_PINCODE_LENGTH: Final = 6
#: The profile fields ``update_profile`` may change, and those a KYC-verified (Aadhaar) ABHA keeps (the vendor's
#: pages: "first_name, gender, and date_of_birth cannot be modified" / "Name, gender and date of birth cannot be
#: edited for a KYC verified ABHA").
_KYC_LOCKED: Final = ("first_name", "gender", "date_of_birth")


class AbhaCallOptions(TypedDict, total=False):
    """The per-call options of a ``client.abha`` call that sends no partner header (``search``)."""

    #: Send the body as a JWE envelope (default: the client's ``encrypt``).
    encrypt: bool | None
    #: This call's :class:`~health_async.RetryPolicy`.
    retry: RetryPolicy
    #: Seconds for the whole call, or ``None`` for no limit.
    timeout: float | None


def normalize_pincode(pincode: str) -> str:
    """An Indian pincode as sent: surrounding whitespace stripped, then 6 ASCII digits, not starting with 0.
    :class:`~health_async.errors.InvalidRequest` naming the rule otherwise."""
    if not isinstance(pincode, str):
        raise InvalidArgumentType(f"pincode must be a str, not {type(pincode).__name__}")
    value = pincode.strip()
    if len(value) != _PINCODE_LENGTH or not value.isascii() or not value.isdigit():
        raise InvalidRequest(f"pincode must have {_PINCODE_LENGTH} digits")
    if value[0] == "0":
        raise InvalidRequest("pincode must not start with 0")
    return value


class AbhaProfileMixin(AbhaBase):
    """Part of :class:`~health_async.resources.Abha` (see the module)."""

    # -------------------------------------------------------------------- the profile

    @checked
    async def profile(self, **options: Unpack[AbhaOptions]) -> AbhaProfile:
        """``GET /abdm/v1/profile``: the user's ABHA profile (names, date of birth, gender, mobile, address, ABHA
        number and addresses, KYC flag, photo), all of it out of ``repr``.

        Needs the user's OID (``user_id``, else the client's). A read: retried as one. The vendor asks to cache
        it (not one call per page view) and to drop the cache after an update.

        Raises:
            InvalidRequest: no user id; nothing sent.
            NotFoundError: no ABHA profile for that user (e.g. deleted).
            ApiError: any other refusal (the vendor's error body on ``.body``).
        """
        data = await self._session.request(
            "GET",
            R.PATH_ABHA_PROFILE,
            operation="abha_profile",
            headers=self._user_headers(options),
            idempotent=True,
            retry=options.get("retry", NOT_GIVEN),
            timeout=options.get("timeout", NOT_GIVEN),
        )
        return structure(data, AbhaProfile)

    @checked
    async def update_profile(
        self,
        *,
        first_name: str | NotGiven = NOT_GIVEN,
        middle_name: str | NotGiven | None = NOT_GIVEN,
        last_name: str | NotGiven | None = NOT_GIVEN,
        gender: Gender | NotGiven = NOT_GIVEN,
        date_of_birth: dt.date | NotGiven = NOT_GIVEN,
        pincode: str | NotGiven = NOT_GIVEN,
        address: str | NotGiven | None = NOT_GIVEN,
        **options: Unpack[AbhaOptions],
    ) -> None:
        """``PATCH /abdm/v1/profile``: change the given fields of the user's ABHA profile; the others stay.

        What can change: ``first_name``, ``middle_name``, ``last_name``, ``gender`` (``"M"``, ``"F"``, ``"O"``),
        ``date_of_birth`` (a ``datetime.date``), ``pincode`` and ``address``; ``None`` clears ``middle_name``,
        ``last_name`` or ``address``. A KYC-verified (Aadhaar) ABHA keeps its name, gender and date of birth:
        giving a different ``first_name``, ``gender`` or ``date_of_birth`` for one is refused here before the
        PATCH (``InvalidRequest``); the vendor's update page says "name", so ``middle_name`` and ``last_name`` are
        left for the service to judge.

        How: the vendor's PATCH takes the whole profile ("expects all the fields returned by the Get Profile API",
        ``DetailsRequestType2``: first name, gender, date of birth and pincode required), so the profile is read
        first (``GET``, a read) and sent back with the given fields changed. Judgement call: a change made by
        someone else between the read and the PATCH is overwritten. The given fields are checked before anything
        is sent (:class:`~health_async.models.NewAbhaProfile`'s rules: names non-empty, at most 100 characters;
        a pincode of 6 digits not starting with 0; a date of birth after 1900, not in the future); a required
        field the stored profile lacks must be given. ``timeout`` applies to each of the two requests.

        Not idempotent: the PATCH is sent once (an unknown outcome raises ``OutcomeUnknown``: read the profile).
        Answered 204; read the profile again for the new state.

        Raises:
            InvalidRequest: no field given, a field breaking a rule, no user id (nothing sent), or a locked field
                of a KYC-verified ABHA (only the read was sent).
            NotFoundError: no ABHA profile for that user.
            OutcomeUnknown: the PATCH may or may not have taken effect; it was not repeated.
            ApiError: the service refused (e.g. a change it does not allow).
        """
        given: dict[str, Any] = {
            name: value
            for name, value in (
                ("first_name", first_name),
                ("middle_name", middle_name),
                ("last_name", last_name),
                ("gender", gender),
                ("date_of_birth", date_of_birth),
                ("pincode", pincode),
                ("address", address),
            )
            if value is not NOT_GIVEN
        }
        if not given:
            raise InvalidRequest("update_profile needs at least one field to change")
        if "pincode" in given:
            given["pincode"] = normalize_pincode(given["pincode"])
        rules = attrs.fields_dict(NewAbhaProfile)
        for name, value in given.items():
            rule = rules[name]
            if rule.validator is not None:
                rule.validator(None, rule, value)
        headers = self._user_headers(options)
        current = await self.profile(**options)
        if current.kyc_verified:
            for name in _KYC_LOCKED:
                if name in given and _differs(given[name], getattr(current, name)):
                    raise InvalidRequest(
                        f"{name} cannot change on a KYC-verified ABHA (name, gender and date of birth come from "
                        "Aadhaar); nothing was updated"
                    )
        merged: dict[str, Any] = {
            "first_name": current.first_name,
            "middle_name": current.middle_name,
            "last_name": current.last_name,
            "gender": current.gender,
            "date_of_birth": current.date_of_birth,
            "pincode": current.pincode,
            "address": current.address,
        }
        merged.update(given)
        body = NewAbhaProfile(**merged).to_wire()
        encrypt = options.get("encrypt")
        await self._send_once(
            "PATCH",
            R.PATH_ABHA_PROFILE,
            operation="abha_profile_update",
            headers=headers,
            json=body,
            encrypt=self._client.encrypt if encrypt is None else encrypt,
            retry=options.get("retry", NOT_GIVEN),
            timeout=options.get("timeout", NOT_GIVEN),
        )

    @checked
    async def delete_profile(self, *, confirm: bool = False, **options: Unpack[AbhaOptions]) -> None:
        """``DELETE /abdm/v1/profile``: delete the user's ABHA profile here, with every document, vital record
        and related data, for good (ABDM keeps the ABHA itself: it offers no delete).

        Irreversible, so it needs ``confirm=True``: without it, :class:`~health_async.errors.InvalidRequest` and
        nothing is sent. Needs the user's OID. Not idempotent: sent once; an unknown outcome raises
        ``OutcomeUnknown`` (then :meth:`profile` raising ``NotFoundError`` says it is gone). Answered 204.

        Raises:
            InvalidRequest: ``confirm`` is not ``True``, or no user id; nothing sent.
            NotFoundError: no ABHA profile for that user.
            OutcomeUnknown: the profile may or may not be deleted; the call was not repeated.
        """
        if confirm is not True:
            raise InvalidRequest(
                "delete_profile removes the ABHA profile and every document and record linked to it, for good: "
                "pass confirm=True"
            )
        await self._send_once(
            "DELETE",
            R.PATH_ABHA_PROFILE,
            operation="abha_profile_delete",
            headers=self._user_headers(options),
            retry=options.get("retry", NOT_GIVEN),
            timeout=options.get("timeout", NOT_GIVEN),
        )

    # -------------------------------------------------------------------- the card and the QR

    @checked
    async def card(self, to: DownloadTarget, **options: Unpack[AbhaOptions]) -> str:
        """``GET /abdm/v1/profile/asset/card``: the user's ABHA card, streamed to ``to`` (a path, or a binary file
        object opened for writing); returns its content type, ``"image/png"`` (what the vendor documents) or
        ``"application/pdf"``.

        Streamed under the client's ``max_response_size``, its type and first bytes checked, nothing partial left
        behind (see the module). Needs the user's OID. A read: retried as one (a path target starts over; a file
        object that cannot seek back is not retried once written to). The vendor asks to cache the card and
        fetch it again after a profile update.

        Raises:
            InvalidRequest: no user id, a folder or a missing folder as ``to``; nothing sent.
            InvalidArgumentType: ``to`` is a text file object, or one not open for writing; nothing sent.
            PermissionError: the folder of ``to`` cannot be written; nothing sent.
            ResponseTooLarge: the card is over ``max_response_size``.
            ResponseValidationError: the answer is not a card (another content type, a JSON body, bytes that are
                not what the type says).
            NotFoundError: no ABHA profile for that user. ApiError: any other refusal.
            OSError: writing ``to`` failed (the partial file removed).
        """
        return await self._asset(R.PATH_ABHA_CARD, "abha_card", to, CARD_TYPES, [], options)

    @checked
    async def qr(self, to: DownloadTarget, *, as_json: bool = False, **options: Unpack[AbhaOptions]) -> str:
        """``GET /abdm/v1/profile/asset/qr``: the user's ABHA QR code, streamed to ``to`` like :meth:`card`;
        returns the content type of what was written.

        ``"image/png"``: the QR code as an image. ``"application/json"``: the data to draw a QR code from
        (``registration.yml``'s ``AssetQRData``: ``hid``, ``hidn``, ``name``, ``dob``, ``mobile``, ...; "no fixed
        structure"), written as the service's JSON object (decrypted when the service encrypted it; personal data:
        keep the file as such). Without ``as_json`` no ``format`` is sent and either is accepted (the vendor's
        pages speak of the QR code, its OpenAPI only of the JSON); ``as_json=True`` sends ``format=json`` and
        accepts JSON only. A JSON answer is at most 64 KiB and must be an object, not the service's error body.

        Raises: as :meth:`card`.
        """
        accept = frozenset({"application/json"}) if as_json else QR_TYPES
        params = [("format", "json")] if as_json else []
        return await self._asset(R.PATH_ABHA_QR, "abha_qr", to, accept, params, options)

    # -------------------------------------------------------------------- search and pincode

    @checked
    async def search(self, mobile: str, **options: Unpack[AbhaCallOptions]) -> AbhaSearchResult:
        """``POST /abdm/v1/profile/search``: the KYC-verified ABHAs of an Indian mobile number, their ABHA numbers
        masked by the service (``xx-xxxx-xxxx-1525``), names and addresses out of ``repr``.

        ``mobile`` is checked before anything is sent (:func:`~health_async._mobile.normalize_mobile`: 10 digits
        after an optional ``+91``, starting with 6-9) and sent as its 10 digits. No partner header (the path
        declares none). A read: retried as one. To log into a match:
        ``login_init("search", str(match.index), txn_id=result.txn_id)``.

        Raises:
            InvalidMobileNumber: a mobile number breaking a rule (never echoed); nothing sent.
            ApiError: the service refused (the vendor's error body on ``.body``).
        """
        number = normalize_mobile(mobile)
        encrypt = options.get("encrypt")
        data = await self._session.request(
            "POST",
            R.PATH_ABHA_SEARCH,
            operation="abha_search",
            json={"mobile": number},
            encrypt=self._client.encrypt if encrypt is None else encrypt,
            idempotent=True,
            retry=options.get("retry", NOT_GIVEN),
            timeout=options.get("timeout", NOT_GIVEN),
        )
        return structure(data, AbhaSearchResult)

    @checked
    async def pincode(self, pincode: str, **options: Unpack[AbhaOptions]) -> PincodeDetails:
        """``GET /abdm/v1/registration/pincode/{pincode}``: the state and district of an Indian pincode (names and
        LGD codes), e.g. for a registration form.

        ``pincode`` is checked before anything is sent (:func:`normalize_pincode`: 6 digits, not starting with 0;
        surrounding whitespace stripped). The partner headers are optional here (a user being registered has no
        OID yet). A read: retried as one.

        Raises:
            InvalidRequest: a pincode breaking a rule; nothing sent.
            NotFoundError / ApiError: the service does not know it (the vendor's error body on ``.body``).
        """
        value = normalize_pincode(pincode)
        data = await self._session.request(
            "GET",
            R.PATH_PINCODE.format(pincode=value),
            operation="abha_pincode",
            route=R.PATH_PINCODE,
            headers=self._headers(options),
            idempotent=True,
            retry=options.get("retry", NOT_GIVEN),
            timeout=options.get("timeout", NOT_GIVEN),
        )
        return structure(data, PincodeDetails)

    # -------------------------------------------------------------------- machinery

    def _user_headers(self, options: AbhaOptions) -> dict[str, str]:
        """The partner headers of a call about one user: ``X-Pt-Id`` required (the call's or the client's)."""
        headers = self._headers(options)
        if C.H_PT_ID not in headers:
            raise InvalidRequest("this call needs the user's OID (X-Pt-Id): pass user_id= here or to HealthClient")
        return headers

    async def _asset(
        self,
        path: str,
        operation: str,
        to: DownloadTarget,
        accept: frozenset[str],
        params: list[tuple[str, str]],
        options: AbhaOptions,
    ) -> str:
        target = _target(to)
        headers = {**self._user_headers(options), "Accept": ", ".join(sorted(accept))}
        return await self._download(
            path,
            operation=operation,
            params=params,
            headers=headers,
            target=target,
            receive=lambda resp, req: self._receive(resp, req, target, accept),
            retry=options.get("retry", NOT_GIVEN),
            timeout=options.get("timeout", NOT_GIVEN),
        )

    async def _receive(
        self, resp: aiohttp.ClientResponse, req: _Request, target: _Target, accept: frozenset[str]
    ) -> str:
        """Check a 200 answer's type and stream its body to ``target``; the content type written."""
        operation = req.operation
        kind = resp.content_type.lower()
        cap = self._session.config.max_response_size
        if kind not in accept:
            detail = ""
            if kind == "application/json":  # an error body answered with 200: say which, if it says
                try:
                    data = _json.loads(await _read_capped(resp, min(cap, _QR_JSON_CAP), req.operation))
                except (_json.JSONDecodeError, ResponseTooLarge):
                    data = None
                code = _source_code(data)
                detail = " (an error body" + (f": {code})" if code else ")")
            raise ResponseValidationError(
                f"{operation}: the service answered HTTP 200 with {_describe(kind)}{detail}, not "
                f"{' or '.join(sorted(accept))}"
            )
        if kind == "application/json":
            raw = await _read_capped(resp, min(cap, _QR_JSON_CAP), req.operation)
            try:
                data = _json.loads(raw)
            except _json.JSONDecodeError:
                raise ResponseValidationError(f"{operation}: the JSON answer is not JSON") from None
            if _looks_encrypted(data):
                data = await self._session._decrypt(data, operation)
                raw = _json.dumps(data)
            if not isinstance(data, dict) or _source_code(data) is not None:
                raise ResponseValidationError(f"{operation}: the JSON answer is not the QR data (a JSON object)")
            await target.write(raw)
            return kind
        length = resp.content_length
        if length is not None and aiohttp.hdrs.CONTENT_ENCODING not in resp.headers and length > cap:
            raise ResponseTooLarge(f"{operation}: the response is {length} bytes, over the {cap}-byte limit")
        head: bytearray | None = bytearray()
        total = 0
        async for chunk in resp.content.iter_chunked(_CHUNK):
            total += len(chunk)
            if total > cap:
                raise ResponseTooLarge(f"{operation}: the response is over the {cap}-byte limit")
            if head is None:
                await target.write(chunk)
                continue
            head += chunk
            if len(head) >= SNIFF_BYTES:
                _check_head(operation, kind, head)
                await target.write(bytes(head))
                head = None
        if head is not None:
            _check_head(operation, kind, head)
            await target.write(bytes(head))
        return kind

    async def _download(
        self,
        path: str,
        *,
        operation: str,
        params: list[tuple[str, str]],
        headers: dict[str, str],
        target: _Target,
        receive: Callable[[aiohttp.ClientResponse, _Request], Awaitable[str]],
        retry: RetryPolicy | NotGiven,
        timeout: float | NotGiven | None,
    ) -> str:
        """A GET whose 200 body ``receive`` streams to ``target``, through the session as a read (retried as
        one); ``receive``'s return value is returned. ``target`` is started over before each retry (none when it
        cannot be), committed at the end, discarded on any failure (cancellation included)."""
        try:
            result: str = await self._session.request(
                "GET",
                path,
                operation=operation,
                params=params,
                headers=headers,
                idempotent=True,
                retry=retry,
                timeout=timeout,
                receive=receive,
                restart=target.restart,
            )
            await target.commit()
            return result
        except _TargetFailed as exc:
            target.discard()
            raise exc.error from None
        except BaseException:
            target.discard()
            raise


# ------------------------------------------------------------------------------------------------ targets


class _TargetFailed(Exception):
    """Writing the target failed (its ``OSError``/``ValueError`` in :attr:`error`): not a transport failure, never
    retried; :meth:`AbhaProfileMixin._download` raises the error itself."""

    def __init__(self, error: Exception) -> None:
        super().__init__(type(error).__name__)
        self.error = error


class _Target:
    """Where a streamed body goes: written only once the answer's checks passed."""

    async def write(self, chunk: bytes) -> None:
        raise NotImplementedError

    def restart(self) -> bool:
        """Back to empty before another attempt; False when that cannot be done (then no retry)."""
        raise NotImplementedError

    async def commit(self) -> None:
        """The body is complete."""

    def discard(self) -> None:
        """A failure (or cancellation): leave nothing partial."""


class _PathTarget(_Target):
    """A path: written to a temporary file beside it (created at the first byte), renamed over it when complete."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._tmp: Path | None = None
        self._fh: BinaryIO | None = None

    async def write(self, chunk: bytes) -> None:
        try:
            if self._fh is None:
                fd, name = tempfile.mkstemp(dir=self._path.parent, prefix=f".{self._path.name}.", suffix=".part")
                self._tmp = Path(name)
                self._fh = os.fdopen(fd, "wb")
            self._fh.write(chunk)  # at most 64 KiB into the page cache: as _files reads, inline
        except (OSError, ValueError) as exc:
            raise _TargetFailed(exc) from exc

    def restart(self) -> bool:
        self.discard()
        return True

    async def commit(self) -> None:
        fh, tmp = self._fh, self._tmp
        if fh is None or tmp is None:  # pragma: no cover - every accepted answer wrote its checked head
            raise ResponseValidationError("the answer had no body")
        # flush, fsync and rename off the event loop; a cancellation waits for the thread, so the file is either
        # complete at the path or gone (discard), never handled by both at once
        job = asyncio.ensure_future(asyncio.to_thread(_finish, fh, tmp, self._path))
        try:
            await asyncio.shield(job)
        except asyncio.CancelledError:
            await asyncio.wait({job})
            raise
        except OSError as exc:
            raise _TargetFailed(exc) from exc
        self._fh = self._tmp = None

    def discard(self) -> None:
        fh, tmp = self._fh, self._tmp
        self._fh = self._tmp = None
        if fh is not None:
            with contextlib.suppress(OSError):
                fh.close()
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)


class _FileTarget(_Target):
    """A binary file object: written in place; cut back to where it was on failure when it can seek."""

    def __init__(self, fh: BinaryIO) -> None:
        self._fh = fh
        self._start = fh.tell() if fh.seekable() else None
        self._written = 0

    async def write(self, chunk: bytes) -> None:
        try:
            view = memoryview(chunk)
            while view:
                count = self._fh.write(view)
                if count is None:  # a non-blocking raw stream that would block
                    raise BlockingIOError("the file object would block")
                self._written += count
                view = view[count:]
        except (OSError, ValueError) as exc:
            raise _TargetFailed(exc) from exc

    def restart(self) -> bool:
        if self._written and self._start is None:
            return False
        self.discard()
        return True

    def discard(self) -> None:
        if self._start is not None and self._written:
            with contextlib.suppress(OSError, ValueError):
                self._fh.seek(self._start)
                self._fh.truncate()
        self._written = 0


def _target(to: DownloadTarget) -> _Target:
    """The target of ``to``, checked before anything is sent (messages never name the path)."""
    if isinstance(to, str | os.PathLike):
        path = Path(to)
        if path.is_dir():
            raise InvalidRequest("to must be a file path, not a folder")
        folder = path.parent
        if not folder.is_dir():
            raise InvalidRequest("to must be a path in an existing folder")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError("the folder of `to` is not writable")
        return _PathTarget(path)
    if isinstance(to, io.TextIOBase):  # type: ignore[unreachable]
        raise InvalidArgumentType("to must be opened in binary mode ('wb'), not text mode")
    if not callable(getattr(to, "write", None)):
        raise InvalidArgumentType("to must be a path or a binary file object with a write() method")
    writable = getattr(to, "writable", None)  # a file opened "rb" has write() too, which fails once data came
    try:
        can_write = callable(writable) and bool(writable())
    except ValueError:  # a closed file
        raise InvalidRequest("to must be an open file object") from None
    if not can_write:
        raise InvalidArgumentType("to must be a binary file object opened for writing ('wb'): writable() is False")
    return _FileTarget(to)


def _finish(fh: BinaryIO, tmp: Path, path: Path) -> None:
    try:
        fh.flush()
        os.fsync(fh.fileno())
    finally:
        fh.close()
    os.replace(tmp, path)


def _differs(given: object, current: object) -> bool:
    """Whether a given profile value changes the stored one (names compared without surrounding spaces)."""
    if isinstance(given, str) and isinstance(current, str):
        return given.strip() != current.strip()
    return given != current


def _check_head(operation: str, kind: str, head: bytes | bytearray) -> None:
    """The first bytes must be what the content type says (a PNG signature, ``%PDF-``)."""
    if sniff_content_type(bytes(head)) != kind:
        raise ResponseValidationError(f"{operation}: the body is not the {kind} its content type says")


def _source_code(data: object) -> str | None:
    """The vendor's error code of a ``GenericError`` body (``source_error.code``, else ``code``), or None."""
    if not isinstance(data, dict) or "error" not in data:
        return None
    source = data.get("source_error")
    code = source.get("code") if isinstance(source, dict) else data.get("code")
    text = str(code) if isinstance(code, str | int) and not isinstance(code, bool) else ""
    if not text.replace("-", "").replace("_", "").isalnum():
        return "no code"
    return _abha_code(text) or "no code"  # shaped like a code, else redacted (a bare mobile number) and cut


def _describe(kind: str) -> str:
    """A content type for a message: as sent when it looks like one, else not shown."""
    plain = kind.replace("/", "").replace("-", "").replace(".", "").replace("+", "")
    return f"{kind!r}" if kind and len(kind) <= 100 and plain.isascii() and plain.isalnum() else "an unexpected type"
