"""The asyncio face of txqueue, written by hand; ``txqueue._sync`` is generated from it."""
