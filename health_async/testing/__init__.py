"""Test helpers for code that uses ``health_async``: a fake of the whole service, and pytest fixtures.

``FakeHealthServer`` runs in-process (``async with FakeHealthServer() as server: server.url``) or standalone
(``health-async fake-server``). The pytest plugin (registered through the ``pytest11`` entry point) gives the
``fake_health_server`` and ``health_client`` fixtures; see the README section "Testing your code".
"""

from ._data import FakeData
from ._server import ROUTES, FakeHealthServer, Fault, RecordedRequest
from .webhooks._send import send_webhook
from .webhooks._send import sign as sign_webhook

__all__ = ["ROUTES", "FakeData", "FakeHealthServer", "Fault", "RecordedRequest", "send_webhook", "sign_webhook"]
