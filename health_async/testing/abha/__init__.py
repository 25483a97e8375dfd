"""The fake server's the ABHA (health account): its routes and state (used by
:class:`~health_async.testing.FakeHealthServer`)."""
