"""Fault-injection tests: kill -9, dropped connections at COMMIT, frozen workers, restarts."""
