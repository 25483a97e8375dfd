"""The answer envelope of the registry operations: ``{"data": ..., "error": ..., "success": bool}``
(registration.yml's ``HandlerTypedAPIResponse...`` schemas), read once for every model of the domain."""

from __future__ import annotations

from typing import Any

from ...errors import ResponseValidationError

__all__ = ["unwrap"]


def unwrap(data: Any, what: str) -> Any:
    """The ``data`` of a registry answer; the answer itself when it is not wrapped.

    registration.yml wraps every registry answer in ``{data, error, success}`` but one (``hpr/aadhaar/mobile/init``
    answers ``NhprEkaAadhaarResponse`` bare), so both forms are read: an object with a ``data`` key is the envelope,
    anything else the answer itself. An envelope that says ``"success": false`` is not an answer:
    :class:`~health_async.errors.ResponseValidationError` naming ``what`` (the service's refusals come as error
    statuses; a 2XX that refuses is a body that does not fit its operation). Judgement call: ``success`` missing or
    ``null`` is taken as success, as the schema requires none of the three keys.
    """
    if type(data) is not dict or "data" not in data:
        return data
    if data.get("success") is False:
        raise ResponseValidationError(f"the response does not fit {what}: the service answered success=false")
    return data["data"]
