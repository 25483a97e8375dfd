"""The send-once check every domain with calls that must never be repeated runs (an OTP sent, a verification, a
creation): one fault on the route, then the call reaches the server once and ends in ``OutcomeUnknown``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import health_async as ha
from health_async import errors as E
from health_async.testing import FakeHealthServer, Fault

#: A call that must be sent once: ``await call(client, server)``.
OnceCall = Callable[[ha.HealthClient, FakeHealthServer], Awaitable[Any]]

#: The faults after which such a call must not be sent again: a 503 and a 500 answer, and a dropped connection.
SEND_ONCE_FAULTS = pytest.mark.parametrize(
    "fault",
    [Fault(status=503, times=1), Fault(status=500, times=1), Fault(drop=True, times=1)],
    ids=["503", "500", "drop"],
)


async def assert_sent_once(
    server: FakeHealthServer, client: ha.HealthClient, route: str, call: OnceCall, fault: Fault
) -> None:
    """Inject ``fault`` once on ``route``, make the call: it reaches the server once, and its unknown outcome is an
    ``OutcomeUnknown`` naming the operation, caused by the library's own error."""
    server.inject(route, Fault(status=fault.status, drop=fault.drop, times=1))
    with pytest.raises(E.OutcomeUnknown) as info:
        await call(client, server)
    assert server.calls(route) == 1
    assert info.value.operation == route and isinstance(info.value.__cause__, E.HealthError)
