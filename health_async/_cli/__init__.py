"""The command line's machinery: shared output helpers and one module of subcommands per domain.

Each domain module (``records``, ``abha``, ``patients``, ``ingest``) has ``add_commands(sub, common)``, which adds
its subparsers and returns ``{command name: async handler(client, args) -> exit status}``; a handler that needs
no client (like ``ingest``, which builds its own) is listed in the module's ``NO_CLIENT`` set.
"""
