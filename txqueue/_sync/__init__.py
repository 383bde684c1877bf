"""The synchronous face of txqueue, generated from ``txqueue._async`` (see tools/async_to_sync.py)."""
