"""The one progress bar of the command line and the ingest jobs (on stderr, when it is a terminal)."""

from __future__ import annotations

import sys
import time
from typing import IO

__all__ = ["Progress"]


class Progress:
    """A one-line progress bar on stderr when it is a terminal; silent otherwise (piped, CI).

    Call it with the counts, ``progress(done, failed, total)`` (the bulk helpers' ``progress=`` signature); it
    redraws at most ten times a second, and shows the rate, and the bar and an ETA when ``total`` is known.
    :attr:`unknown`, when set, is shown too (uploads sent with an unknown outcome).
    """

    def __init__(self, label: str, *, enabled: bool | None = None, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.label = label
        self.started = time.monotonic()
        #: Items with an unknown outcome, shown when not ``None``.
        self.unknown: int | None = None
        self._last = 0.0

    def __call__(self, done: int, failed: int, total: int | None) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.1 and done != total:
            return
        self._last = now
        rate = done / max(now - self.started, 1e-9)
        if total:
            width = 30
            filled = int(width * min(done, total) / total)
            eta = (total - done) / rate if rate > 0 else float("inf")
            bar = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total}  ETA {_duration(eta)}"
        else:
            bar = f"{done} done"
        unknown = "" if self.unknown is None else f"  unknown {self.unknown}"
        self.stream.write(f"\r{self.label} {bar}  failed {failed}{unknown}  {rate:,.0f}/s ")
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line."""
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def _duration(seconds: float) -> str:
    if seconds == float("inf"):
        return "--:--"
    seconds = int(seconds + 0.5)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"
