"""The fake server's people: its routes and state (used by :class:`~health_async.testing.FakeHealthServer`)."""
