"""The fake server's registries of ABDM milestone 4: the professional registry (HPR) and the facility registry
(HFR), their routes and state (used by :class:`~health_async.testing.FakeHealthServer`)."""
