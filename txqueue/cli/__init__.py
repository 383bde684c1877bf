"""The ``txqueue`` command: thin over the public API, no SQL here."""
