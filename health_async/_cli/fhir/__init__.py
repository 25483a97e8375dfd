"""The ``health-async fhir`` commands (``add_commands(sub, common)``, as every domain module of
:mod:`health_async._cli`)."""
