"""Finding a hospital and discovering and linking its records: providers, matches, the link steps."""

from __future__ import annotations

__all__: list[str] = []
