"""Models of webhooks: subscriptions; imported from :mod:`health_async.models`."""

from ._subscriptions import *  # noqa: F403
from ._subscriptions import __all__ as _subscriptions_all

__all__ = [*_subscriptions_all]
