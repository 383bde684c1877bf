"""One driver per engine behind an operation-level protocol; each driver owns its SQL."""
