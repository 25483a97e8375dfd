"""The patient's app: find a hospital (providers) and discover and link its records to the ABHA (a guided flow).

The vendor's ``phr/discover-and-link.mdx``: the patient picks a facility they visited, the facility matches the
person's verified ABHA details against its own records and answers the ones not yet linked, the patient picks one,
the facility sends an OTP to the patient's mobile, and confirming it links the record::

    found = await client.abdm.providers("apollo")                    # search facilities by name (3+ characters)
    flow = await client.abdm.discover_and_link(found[0].hip_id, oid=oid)
    if flow.next_step is LinkStep.SELECT_CARE_CONTEXT:               # several records (or patients) matched
        for patient in flow.choices:
            ...                                                      # show patient.care_contexts[i].display
        await flow.link(chosen_care_context_id)                      # the OTP goes to the patient
    linked = await flow.confirm(otp)                                 # LinkStep.DONE

Paths and shapes: ``registration.yml`` (``GET /abdm/v1/providers``, ``GET /abdm/v1/provider/{hip_id}``,
``POST /abdm/v1/care-contexts/discover``, ``.../discover/link/init``, ``.../discover/link/confirm``). The flow is
:class:`~health_async.resources.abdm._discover_flow.DiscoverAndLink` (its module says what it keeps and how it resumes).

**Retries.** The searches and the discovery are reads, retried as reads, except on HTTP 500 (judgement call, as
``client.abha.session_status``: ABDM answers its rate limits with a 500, and a retry would extend them; a discovery
repeated only asks the facility again). ``link/init`` (an SMS) and ``link/confirm`` (an OTP check that links) are
sent once (:meth:`Resource._send_once`), never repeated once they may have reached the service, whatever the retry
policy says; an unknown outcome is :class:`~health_async.errors.OutcomeUnknown`.

**Errors** as the ABHA calls (the same ``GenericError`` body): a wrong OTP is
:class:`~health_async.errors.OtpMismatch`; ``ABDM-1022`` / ``ABDM-1100`` :class:`~health_async.errors.AbhaRateLimited`
and ``ABDM-1027`` :class:`~health_async.errors.AbhaBlocked` (the flow is then ``BLOCKED``); any other ABDM error body
an :class:`~health_async.errors.AbhaError`; bad input an :class:`~health_async.errors.InvalidRequest` before anything
is sent, naming the rule, never the value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from ... import _constants as C
from ... import _routes as R
from ..._checks import checked
from ..._config import NOT_GIVEN, NotGiven, path_segment, pick
from ..._retry import RetryPolicy
from ..._wire import structure, structure_many
from ...errors import InvalidRequest
from ...models.abdm._discover import Discovery, LinkConfirmed, LinkOtpSent, Provider
from . import _discover_flow
from ._base import AbdmBase
from ._discover_flow import DiscoverAndLink
from ._errors import not_on_500, typed_refusals

__all__ = ["MAX_REF_ID", "MIN_PROVIDER_NAME", "DiscoverMixin", "normalize_hip_id", "normalize_ref_id"]

#: The shortest provider name the search takes (``registration.yml``: ``minLength: 3``).
MIN_PROVIDER_NAME: Final = 3
#: The longest provider name searched for (the vendor gives none; longer is a mistake, not a name).
MAX_PROVIDER_NAME: Final = 200
#: The longest ``ref_id`` accepted (the vendor gives none: a registration number, an e-mail or a phone number).
MAX_REF_ID: Final = 256
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


def normalize_hip_id(hip_id: str, name: str = "hip_id") -> str:
    """A facility's ABDM id as sent (in a path and in bodies): a single URL path segment (see
    :func:`~health_async._config.path_segment`: not empty, at most 256 characters, no ``/``, ``\\``, ``?``, ``#``,
    whitespace or control characters). :class:`InvalidRequest` names the rule, never the id."""
    path_segment(name, hip_id)
    return hip_id


def normalize_ref_id(ref_id: str) -> str:
    """The patient's identifier at the facility (``ref_id``: a registration number, an e-mail, a phone number), as
    sent: surrounding whitespace stripped, not empty, at most :data:`MAX_REF_ID` characters, no control characters.
    Personal data: :class:`InvalidRequest` names the rule, never the value."""
    if not isinstance(ref_id, str):
        raise InvalidRequest("ref_id must be a str")
    value = ref_id.strip()
    if not value:
        raise InvalidRequest("ref_id must not be empty (leave it out to match on the ABHA details alone)")
    if len(value) > MAX_REF_ID or _CONTROL.search(value):
        raise InvalidRequest(f"ref_id must be at most {MAX_REF_ID} characters, no control characters")
    return value


def _provider_name(name: str) -> str:
    value = name.strip()
    if len(value) < MIN_PROVIDER_NAME:
        raise InvalidRequest(f"name must have at least {MIN_PROVIDER_NAME} characters (the service's minimum)")
    if len(value) > MAX_PROVIDER_NAME or _CONTROL.search(value):
        raise InvalidRequest(f"name must be at most {MAX_PROVIDER_NAME} characters, no control characters")
    return value


def _providers_of(data: Any) -> tuple[Provider, ...]:
    """The list of ``GET /abdm/v1/providers``: a JSON array, ``null`` (none found), or the hospital side's
    ``{"providers": [...]}`` (``ProviderResponse``): the client accepts both."""
    if isinstance(data, dict):
        data = data.get("providers")
    return structure_many(data or [], Provider, "providers")


class DiscoverMixin(AbdmBase):
    """Part of :class:`~health_async.resources.Abdm` (see the module): the patient's app finding facilities
    (:meth:`providers`, :meth:`provider`) and linking its records there (:meth:`discover_and_link`,
    :meth:`resume`)."""

    # -------------------------------------------------------------------- providers

    @checked
    async def providers(
        self,
        name: str,
        *,
        oid: str | None = None,
        partner_user_id: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> tuple[Provider, ...]:
        """``GET /abdm/v1/providers?name=``: the facilities (HIPs) whose name matches ``name``, as
        :class:`~health_async.models.Provider` (``hip_id``, ``name``, ``city``, ``state``); empty when none match.
        The service answers one list, not pages.

        ``name``: at least 3 characters (the service's minimum; surrounding whitespace stripped), at most 200, no
        control characters, checked before anything is sent. ``oid`` / ``partner_user_id``: the user
        (``X-Pt-Id`` / ``X-Partner-Pt-Id``; default the client's). A read, retried as one except on HTTP 500.

        Raises:
            InvalidRequest: a rule broken; nothing sent.
            AbhaRateLimited, AbhaBlocked, AbhaError: ABDM's refusal.
        """
        data = await self._read(
            R.PATH_PROVIDERS,
            "providers",
            params=[("name", _provider_name(name))],
            headers=self._headers(oid, partner_user_id),
            retry=retry,
            timeout=timeout,
        )
        return _providers_of(data)

    @checked
    async def provider(
        self,
        hip_id: str,
        *,
        oid: str | None = None,
        partner_user_id: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> Provider:
        """``GET /abdm/v1/provider/{hip_id}``: one facility's details (a :class:`~health_async.models.Provider`).
        ``hip_id`` is checked as one URL path segment before anything is sent. A read, retried as one except on
        HTTP 500.

        Raises:
            InvalidRequest: ``hip_id`` is not one path segment; nothing sent.
            NotFoundError: no such facility (HTTP 404).
            AbhaRateLimited, AbhaBlocked, AbhaError: ABDM's refusal (an unknown HIP id may come as ``ABDM-1035``).
        """
        segment = path_segment("hip_id", hip_id)
        data = await self._read(
            R.PATH_PROVIDER.replace("{hip_id}", segment),
            "provider",
            route=R.PATH_PROVIDER,
            headers=self._headers(oid, partner_user_id),
            retry=retry,
            timeout=timeout,
        )
        return structure(data, Provider)

    # -------------------------------------------------------------------- discover and link

    @checked
    async def discover_and_link(
        self,
        hip_id: str,
        *,
        ref_id: str | None = None,
        auto_link: bool = True,
        oid: str | None = None,
        partner_user_id: str | None = None,
        clock: Callable[[], float] | None = None,
    ) -> DiscoverAndLink:
        """Start a guided discover-and-link at the facility ``hip_id`` for the user ``oid`` (``X-Pt-Id``; default
        the client's ``user_id``) or ``partner_user_id`` (``X-Partner-Pt-Id``): ``POST
        /abdm/v1/care-contexts/discover`` asks the facility for the person's records not yet linked to their ABHA
        (matched on the ABHA's verified details; ``ref_id``, the patient's id at the facility such as a
        registration number or a phone number, narrows it). Returns the flow
        (:class:`~health_async.resources.abdm._discover_flow.DiscoverAndLink`), whose ``next_step`` is:

        * ``VERIFY_OTP`` when exactly one record matched and ``auto_link`` (the default): it was picked and
          ``link/init`` sent, and the facility sent an OTP to the patient's mobile; then ``await flow.confirm(otp)``
          -> ``DONE``;
        * ``SELECT_CARE_CONTEXT`` when several records (or several patients) matched, or ``auto_link=False``: the
          matches are ``flow.choices``; ``await flow.link(care_context_id)`` sends the OTP, then ``confirm``;
        * ``NOTHING_FOUND`` when the facility holds no record of the person that is not linked already.

        One record per flow (judgement call: ``link/init`` takes one ``cc_ref_id``, and each link is its own OTP):
        to link another, start a new flow; its discovery no longer lists the linked one.

        Checked before anything is sent: ``hip_id`` (one URL path segment), ``ref_id`` (not empty, at most 256
        characters, no control characters; personal data, never in a message), a user (``oid``, the client's
        ``user_id`` or ``partner_user_id``). The user is resolved now and kept in the flow and its state, so a
        flow resumed by a client without that default continues for the same person. The discovery is a read,
        retried except on HTTP 500; ``link/init`` is sent once.

        Raises:
            InvalidRequest: a rule broken; nothing sent.
            AbhaRateLimited, AbhaBlocked, AbhaError: ABDM's refusal (an unknown facility may be ``ABDM-1035``).
            OutcomeUnknown: from the automatic ``link/init``: an OTP may have been sent, but there is no flow (no
                transaction id came back); ask the person whether an SMS came, and start again.
        """
        return await _discover_flow.discover_and_link(
            self,
            normalize_hip_id(hip_id),
            ref_id=None if ref_id is None else normalize_ref_id(ref_id),
            auto_link=auto_link,
            oid=self._user_id(NOT_GIVEN if oid is None else oid),
            partner_user_id=self._partner_user_id(partner_user_id),
            clock=clock,
        )

    @checked
    def resume(
        self,
        state: Mapping[str, Any] | str,
        *,
        seal: bytes | None = None,
        clock: Callable[[], float] | None = None,
    ) -> DiscoverAndLink:
        """Rebuild a discover-and-link flow from its ``to_state()`` dict, in this or any other process; nothing is
        sent. A sealed state (``flow.to_state(seal=key)``, a ``str``) needs the same ``seal=key``.

        Raises:
            InvalidRequest: ``state`` is not one (the message names the field, never a value); an ABHA flow's
                state belongs to ``client.abha.resume``.
            FlowStateInvalid: a sealed state that does not open (changed, truncated, another key).
            FlowStateExpired: a sealed state past its ``max_age`` (on ``clock``, wall-clock seconds).
        """
        return _discover_flow.resume(self, state, seal=seal, clock=clock)

    # -------------------------------------------------------------------- the operations (the flow's calls)

    async def _discover(
        self, hip_id: str, ref_id: str | None, *, oid: str | None, partner_user_id: str | None
    ) -> Discovery:
        """``POST /abdm/v1/care-contexts/discover`` (``DiscoverRequest {hip_id, ref_id?}``), a read."""
        body: dict[str, Any] = {"hip_id": hip_id}
        if ref_id is not None:
            body["ref_id"] = ref_id
        data = await self._read(
            R.PATH_DISCOVER,
            "discover",
            method="POST",
            json=body,
            headers=self._partner_headers(oid, partner_user_id),
        )
        return structure(data, Discovery)

    async def _link_init(
        self, txn_id: str, patient_ref_id: str | None, cc_ref_id: str, *, oid: str | None, partner_user_id: str | None
    ) -> LinkOtpSent:
        """``POST .../discover/link/init`` (``InitRequestType3``): the facility sends an OTP. Sent once."""
        body = {"txn_id": txn_id, "patient_ref_id": patient_ref_id or "", "cc_ref_id": cc_ref_id}
        data = await self._once(
            R.PATH_DISCOVER_LINK_INIT, "discover_link_init", body, oid, partner_user_id, checks_otp=False
        )
        return structure(data, LinkOtpSent)

    async def _link_confirm(
        self, txn_id: str, otp: str, *, oid: str | None, partner_user_id: str | None
    ) -> LinkConfirmed:
        """``POST .../discover/link/confirm`` (``ConfirmRequest``): checks the OTP and links. Sent once."""
        body = {"txn_id": txn_id, "otp": otp}
        data = await self._once(
            R.PATH_DISCOVER_LINK_CONFIRM, "discover_link_confirm", body, oid, partner_user_id, checks_otp=True
        )
        return structure(data, LinkConfirmed)

    # -------------------------------------------------------------------- plumbing

    def _partner_user_id(self, given: str | None) -> str | None:
        """``X-Partner-Pt-Id``: the call's, else the client's default."""
        return self._partner_headers(None, NOT_GIVEN if given is None else given, None).get(C.H_PARTNER_PT_ID)

    async def _read(
        self,
        path: str,
        operation: str,
        *,
        method: str = "GET",
        route: str | None = None,
        params: list[tuple[str, str]] | None = None,
        json: Any = None,
        headers: Mapping[str, str],
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> Any:
        """A read, retried as one except on HTTP 500 (ABDM's rate limits), ABDM error bodies mapped."""
        read = self._session.request(
            method,
            path,
            operation=operation,
            route=route,
            params=params,
            json=json,
            headers=headers,
            idempotent=True,
            retry=not_on_500(pick(retry, self._session.config.retry)),
            timeout=timeout,
        )
        return await typed_refusals(read, operation)

    async def _once(
        self,
        path: str,
        operation: str,
        body: Mapping[str, Any],
        oid: str | None,
        partner_user_id: str | None,
        *,
        checks_otp: bool,
    ) -> Any:
        """Sent once, ABDM error bodies mapped: a definite refusal (a wrong OTP, a rate limit, a block), even at
        HTTP 500, is raised as such, never as an unknown outcome (as ``client.abha``'s KYC calls)."""
        send = self._send_once(
            "POST", path, operation=operation, headers=self._partner_headers(oid, partner_user_id), json=dict(body)
        )
        return await typed_refusals(send, operation, checks_otp=checks_otp)
