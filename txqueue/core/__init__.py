"""Pure logic of txqueue: no I/O, no driver imports. Everything here is unit-testable."""
