"""``txqueue bench``: txqueue against the raw-SQL baseline of the same engine, in one run.

Workloads follow the shared peer harness: W1 send (one per transaction and batched), W2 drain
(preloaded messages, N worker processes, receive + ack), W3 latency (send commit → handler at a
steady rate). Figures are ratios to the baseline measured in the same run.
"""
