"""The ``health-async`` commands of milestone 4's registries: ``hpr register`` (a professional's HPR ID, step by
step) and ``hfr register | search`` (a facility's HFR ID), with ``add_commands(sub, common)`` as every domain
module of :mod:`health_async._cli`."""
