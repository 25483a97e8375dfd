"""``add_commands(sub, common)`` of the registries' commands: ``hpr`` (:mod:`.hpr`) and ``hfr`` (:mod:`.hfr`)."""

from __future__ import annotations

import argparse
from typing import Any

from .._output import Command
from . import hfr, hpr

__all__ = ["NO_CLIENT", "add_commands"]

#: Commands of this module that run without a HealthClient built by ``cli.run`` (they get ``None``).
NO_CLIENT: frozenset[str] = frozenset()


def add_commands(sub: Any, common: argparse.ArgumentParser) -> dict[str, Command]:
    """Add ``hpr register`` and ``hfr register | search`` to ``sub``; return their handlers by command name."""
    return {"hpr": hpr.add_parser(sub, common), **hfr.add_parsers(sub, common)}
