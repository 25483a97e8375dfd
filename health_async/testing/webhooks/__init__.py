"""The fake server's webhooks: its routes and state (used by :class:`~health_async.testing.FakeHealthServer`)."""
