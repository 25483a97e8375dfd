"""The ``health_async`` logger. Quiet unless ``HEALTH_ASYNC_LOG=debug|info`` or the application configures it.

What is logged: method, path *template* (``/mr/api/v1/docs/{id}``, never the id), status, attempt, duration,
the server's request id, and retry reasons. Never logged: tokens, keys, client secrets, ids of people or
documents, Aadhaar or mobile numbers, request or response bodies.
"""

from __future__ import annotations

import logging
import os

from . import _constants as C

logger = logging.getLogger("health_async")

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def setup_from_env() -> None:
    """Honour ``HEALTH_ASYNC_LOG``: attach a stderr handler at that level (once), as the Anthropic SDK does."""
    level = _LEVELS.get(os.environ.get(C.ENV_LOG, "").strip().lower())
    if level is None:
        return
    logger.setLevel(level)
    if not any(getattr(h, "_health_async", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler._health_async = True  # type: ignore[attr-defined]
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
