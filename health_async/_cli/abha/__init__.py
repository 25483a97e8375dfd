"""The ``health-async`` commands of the abha domain (``add_commands(sub, common)``, as every domain module of
:mod:`health_async._cli`)."""
