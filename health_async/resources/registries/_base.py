"""The plumbing ``client.hpr`` and ``client.hfr`` share: the partner headers, the per-call options and one POST
helper (sent once, or as a read), as the ABHA resources have."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, Unpack

from ..._wire import structure
from ...models.registries._answer import unwrap
from .._base import PartnerOptions, PartnerResource

__all__ = ["RegistryBase", "RegistryOptions"]

T = TypeVar("T")


class RegistryOptions(PartnerOptions, total=False):
    """Every per-call option of a ``client.hpr`` / ``client.hfr`` method: the partner headers (``user_id``,
    ``partner_user_id``, ``partner_hip_id``), ``encrypt``, ``retry`` and ``timeout`` (OTP, verify, create, onboard
    and link calls are never repeated once they may have reached the service, whatever the policy says)."""


class RegistryBase(PartnerResource):
    """What ``client.hpr`` and ``client.hfr`` build on: the partner headers and the POST helper of
    :class:`~health_async.resources._base.PartnerResource`."""

    async def _send(
        self,
        path: str,
        operation: str,
        body: Mapping[str, Any],
        answer: type[T],
        what: str,
        *,
        once: bool,
        **options: Unpack[RegistryOptions],
    ) -> T:
        """POST ``body`` (as :meth:`_post`) and read the registry's answer (its ``{data, success}`` envelope or the
        bare object; ``what`` names it in an error) as ``answer``."""
        data = await self._post(path, operation, body, once=once, **options)
        return structure(unwrap(data, what), answer)
