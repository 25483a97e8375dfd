"""The fake server's ABDM's exchange: its routes and state (used by :class:`~health_async.testing.FakeHealthServer`)."""
