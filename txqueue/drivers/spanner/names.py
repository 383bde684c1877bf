"""The names Cloud Spanner keeps for itself, shared by its traits and its driver's DDL check."""

__all__ = ["DISPLAY_NAME", "RESERVED_PREFIX"]

DISPLAY_NAME = "Cloud Spanner"
#: Spanner keeps the ``SPANNER_SYS`` schema and names its queue columns ``Spanner…``
#: (``SpannerLeaseToken``): user tables and indexes stay off the prefix, in any case.
RESERVED_PREFIX = "spanner_"
