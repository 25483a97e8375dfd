"""Fixtures of this folder: the ABDM ones, shared with the other ABDM folder (tests/_abdm_fixtures.py)."""

from .._abdm_fixtures import client, server

__all__ = ["client", "server"]
