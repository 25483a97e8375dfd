"""The ``health-async`` commands of the webhooks domain (``add_commands(sub, common)``, as every domain module of
:mod:`health_async._cli`)."""
