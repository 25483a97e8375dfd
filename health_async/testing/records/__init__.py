"""The fake server's the records lifecycle: its routes and state (used by
:class:`~health_async.testing.FakeHealthServer`)."""
