"""Webhook subscriptions (``connect-webhooks/webhooks.yml``)."""

from __future__ import annotations

__all__: list[str] = []
