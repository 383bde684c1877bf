"""The event layer (Eventarc Advanced): CloudEvents, CEL enrollments, HTTP delivery and retries.

Submodules are imported on use; each needs the ``events`` extra (cloudevents, httpx, CEL).
"""
