"""``client.hfr``: the Health Facility Registry (HFR, ABDM milestone 4), one method per operation of
``/abdm/nhpr/v1/hfr/...``, and :meth:`Hfr.register`, the documented order as one call.

The order (abdm-connect/flows/m4.mdx): **search** the registry first; when the facility exists, **link** it;
else **onboard** it, then link it::

    done = await client.hfr.register("clinic-42", "IN2910000123")
    done.was_onboarded, done.linked.hfr_id

**Checked before sending** (an :class:`~health_async.errors.InvalidRequest` naming the rule; nothing is sent):
the HFR ID and the clinic id (:mod:`health_async._registry_input`).

**Never repeated.** ``onboard`` and ``link`` change the registry: they go through :meth:`Resource._send_once`
(:class:`~health_async.errors.OutcomeUnknown` when their answer is lost). ``search`` is a read, retried as one.
"""

from __future__ import annotations

from typing import Unpack

from ... import _routes as R
from ..._checks import checked
from ..._config import NOT_GIVEN, path_segment
from ..._registry_input import normalize_clinic_id, normalize_hfr_id
from ..._wire import structure
from ...errors import ApiError
from ...models.registries._answer import unwrap
from ...models.registries._hfr import Facility, HfrLinked, HfrOnboarded, HfrRegistration
from ._base import RegistryBase, RegistryOptions

__all__ = ["Hfr"]


class Hfr(RegistryBase):
    """The facility registry (``/abdm/nhpr/v1/hfr/...``): a hospital's or clinic's HFR ID.

    Every method takes the optional keywords of :class:`~health_async.resources.Hpr` (the partner headers,
    ``encrypt``, ``retry``, ``timeout``).
    """

    @checked
    async def search(self, hfr_id: str, **options: Unpack[RegistryOptions]) -> Facility | None:
        """``GET /abdm/nhpr/v1/hfr/search/{hfrId}``: the registry's entry of the facility, or ``None`` when the
        registry does not have it. A read (retried as one).

        Judgement call: "not there" is an HTTP 404 (with or without the registry's error body) or an answer whose
        ``data`` is empty or ``null``; the vendor's file documents only ``4XX``.

        Raises:
            InvalidRequest: a malformed HFR ID; nothing sent.
            AbhaError: any other refusal.
        """
        value = normalize_hfr_id(hfr_id)
        try:
            data = await self._session.request(
                "GET",
                R.PATH_HFR_SEARCH.format(hfrId=path_segment("hfr_id", value)),
                operation="hfr_search",
                route=R.PATH_HFR_SEARCH,
                headers=self._headers(options),
                idempotent=True,
                retry=options.get("retry", NOT_GIVEN),
                timeout=options.get("timeout", NOT_GIVEN),
            )
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        found = unwrap(data, "facility search")
        if found is None or found == {}:
            return None
        return structure(found, Facility)

    @checked
    async def onboard(self, clinic_id: str, hfr_id: str, **options: Unpack[RegistryOptions]) -> HfrOnboarded:
        """``POST /abdm/nhpr/v1/hfr/onboard`` (``{"clinic_id", "hfr_id"}``): onboard a facility the registry does
        not have yet (:meth:`search` first). Next: :meth:`link`.

        Changes the registry: never repeated. After :class:`~health_async.errors.OutcomeUnknown`, :meth:`search`
        again before trying again (or call :meth:`register`, which does).

        Raises:
            InvalidRequest: nothing sent.
            AbhaError: a refusal (the facility is onboarded already, say).
            OutcomeUnknown: the request may have reached the service; it was not repeated.
        """
        body = {"clinic_id": normalize_clinic_id(clinic_id), "hfr_id": normalize_hfr_id(hfr_id)}
        return await self._send(
            R.PATH_HFR_ONBOARD, "hfr_onboard", body, HfrOnboarded, "facility onboarding", once=True, **options
        )

    @checked
    async def link(self, clinic_id: str, hfr_id: str, **options: Unpack[RegistryOptions]) -> HfrLinked:
        """``POST /abdm/nhpr/v1/hfr/link`` (``{"clinic_id", "hfr_id"}``): link the facility to the ABDM bridge for
        your clinic. The answer echoes what was linked.

        Changes the registry: never repeated.

        Raises:
            InvalidRequest: nothing sent.
            AbhaError: a refusal (an HFR ID the registry does not know, say).
            OutcomeUnknown: the request may have reached the service; it was not repeated.
        """
        body = {"clinic_id": normalize_clinic_id(clinic_id), "hfr_id": normalize_hfr_id(hfr_id)}
        return await self._send(R.PATH_HFR_LINK, "hfr_link", body, HfrLinked, "facility link", once=True, **options)

    @checked
    async def register(self, clinic_id: str, hfr_id: str, **options: Unpack[RegistryOptions]) -> HfrRegistration:
        """The documented order as one call: :meth:`search`; when the facility exists, :meth:`link`; else
        :meth:`onboard`, then :meth:`link` (with the ``facility_id`` the onboarding answered, else ``hfr_id``).

        Both ids are checked before anything is sent. Safe to call again after an
        :class:`~health_async.errors.OutcomeUnknown`: it searches first, so a facility whose onboarding answer was
        lost is then found and only linked (the onboarding is never sent twice by one call).

        Raises what the three calls raise.
        """
        clinic, value = normalize_clinic_id(clinic_id), normalize_hfr_id(hfr_id)
        facility = await self.search(value, **options)
        onboarded: HfrOnboarded | None = None
        target = value
        if facility is None:
            onboarded = await self.onboard(clinic, value, **options)
            target = onboarded.facility_id or value
        linked = await self.link(clinic, target, **options)
        return HfrRegistration(facility=facility, onboarded=onboarded, linked=linked)
