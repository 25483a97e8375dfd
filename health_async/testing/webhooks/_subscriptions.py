"""The fake webhook subscriptions (``connect-webhooks/webhooks.yml``).

Routes (names for ``server.inject`` and ``server.calls``): ``webhook_subscription_create`` (``POST``: 201
``{"id", "status": "success"}``), ``webhook_subscription_list`` (``GET``: 200 ``{"data": [...], "msg":
"success"}``, in creation order), ``webhook_subscription_delete`` (``DELETE .../{id}``: 200 ``{"status": "webhook
deleted successfully", "msg": "success"}``; an unknown id 404 ``{"error": {"message": "Webhook not found", "code":
"INVALID_REQUEST"}}``, the vendor's shape).

State: :attr:`FakeWebhookSubscriptions.subscriptions`, id -> the stored subscription in the vendor's
``WebhookResponse`` shape (``id``, ``event_names``, ``endpoint``, ``signing_key``, ``client_id``, ``protocol``,
``created_at``/``updated_at`` as ``2024-10-07T13:53:52Z``, ``created_by``/``updated_by``). Ids are decimal strings
counted from 1, as the vendor's example (``"7"``).

Validation (400 ``{"error": {"message", "code": "INVALID_REQUEST"}}``): a JSON object; ``endpoint`` a non-empty
string (the one required field); ``event_names`` a list of strings when sent; ``signing_key`` and ``protocol``
strings when sent; an endpoint already registered answers "requested endpoint is already registered".

Judgement calls: the vendor's shape has no secret of the service's own: the signing key is the client's
(``signing_key`` of the request, stored as sent, ``null`` when none was sent) and the create answer does not echo
it, as documented; the fake does not check the endpoint's scheme or host (the client does; the live service's
rules are not documented). :meth:`FakeWebhookSubscriptions.fail_after_create` stores the next subscriptions, then
answers a gateway error or drops the connection (a create whose answer is lost, for ``OutcomeUnknown``).
``reset()`` forgets the subscriptions, the id counter and the pending failures (subscriptions are made by tests).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

from .. import _routes as R
from .._common import drop
from .._domain import Domain

if TYPE_CHECKING:
    from .._common import RecordedRequest
    from .._domain import Server

__all__ = ["ROUTES", "FakeWebhookSubscriptions"]

ROUTES: Final[tuple[str, ...]] = (
    "webhook_subscription_create",
    "webhook_subscription_list",
    "webhook_subscription_delete",
)


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _error(message: str, status: int = 400) -> web.Response:
    return web.json_response({"error": {"message": message, "code": "INVALID_REQUEST"}}, status=status)


class FakeWebhookSubscriptions(Domain):
    """State and routes (see the module docstring)."""

    ROUTES = ROUTES

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        #: id -> the stored subscription (the vendor's ``WebhookResponse``). Insertion order = creation order.
        self.subscriptions: dict[str, dict[str, Any]] = {}
        self._next_id = 1
        self._fail_after_create: list[int | None] = []

    def fail_after_create(self, times: int = 1, *, status: int | None = 504) -> None:
        """Store each of the next ``times`` subscriptions, then answer ``status`` (``None``: drop the connection):
        the service registered it, but the client cannot know."""
        self._fail_after_create.extend([status] * times)

    def add_routes(self, app: web.Application) -> None:
        """Register the three routes."""
        route = self.server._route
        app.router.add_post(R.WEBHOOK_SUBSCRIPTIONS, route("webhook_subscription_create", self._create))
        app.router.add_get(R.WEBHOOK_SUBSCRIPTIONS, route("webhook_subscription_list", self._list))
        app.router.add_delete(R.WEBHOOK_SUBSCRIPTION, route("webhook_subscription_delete", self._delete))

    def reset(self) -> None:
        """Forget the subscriptions, the id counter and pending :meth:`fail_after_create` failures."""
        self.subscriptions.clear()
        self._next_id = 1
        self._fail_after_create.clear()

    # ------------------------------------------------------------------------------ routes

    async def _create(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        body = await self.server._read_json(request, rec)
        if not isinstance(body, dict):
            return _error("invalid request body")
        endpoint = body.get("endpoint")
        if not isinstance(endpoint, str) or not endpoint:
            return _error("endpoint is required")
        events = body.get("event_names", [])
        if not isinstance(events, list) or not all(isinstance(e, str) for e in events):
            return _error("event_names must be a list of strings")
        for name in ("signing_key", "protocol"):
            if body.get(name) is not None and not isinstance(body[name], str):
                return _error(f"{name} must be a string")
        if any(s["endpoint"] == endpoint for s in self.subscriptions.values()):
            return _error("requested endpoint is already registered")
        sid = str(self._next_id)
        self._next_id += 1
        now = _now()
        client = self.server.client_id
        self.subscriptions[sid] = {
            "id": sid,
            "event_names": list(events),
            "endpoint": endpoint,
            "signing_key": body.get("signing_key") or None,
            "client_id": client,
            "protocol": body.get("protocol") or endpoint.partition(":")[0],
            "created_at": now,
            "updated_at": now,
            "created_by": client,
            "updated_by": client,
        }
        if self._fail_after_create:
            status = self._fail_after_create.pop(0)
            if status is not None:
                return web.json_response({"message": "Gateway Timeout"}, status=status)
            return drop(request)
        return self.server._json(request, {"id": sid, "status": "success"}, status=201)

    async def _list(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        data = [dict(s) for s in self.subscriptions.values()]
        return self.server._json(request, {"data": data, "msg": "success"})

    async def _delete(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        if self.subscriptions.pop(request.match_info["id"], None) is None:
            return _error("Webhook not found", 404)
        return self.server._json(request, {"status": "webhook deleted successfully", "msg": "success"})
