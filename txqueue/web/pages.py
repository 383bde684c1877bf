"""The dashboard's HTML pages (placeholder until the pages land)."""

from __future__ import annotations

from starlette.routing import BaseRoute

__all__ = ["routes"]


def routes() -> list[BaseRoute]:
    """The page routes, relative to the base path."""
    return []
