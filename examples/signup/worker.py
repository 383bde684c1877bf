"""The worker of the sign-up service: sends each new user's welcome email.

    python examples/signup/worker.py --database sqlite:///signup.db
    txqueue worker worker:app --database sqlite:///signup.db     # the same, from examples/signup

A handler that returns acks its message; one that raises is retried (1 s, 2 s, 4 s ...) and
dead-lettered after five attempts. SIGINT or SIGTERM stops the worker gracefully.
"""

from __future__ import annotations

import argparse
import json
import threading

import txqueue

app = txqueue.App()
printing = threading.Lock()  # sync handlers run on a thread pool: one line at a time


@app.handler("WelcomeEmails", retry=txqueue.RetryPolicy(max_attempts=5))
def send_welcome(message: txqueue.Message) -> None:
    email = json.loads(message.payload)["email"]
    with printing:  # your mail service here
        print(f"welcome email sent to {email} (user {message.key[0]})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default="sqlite:///signup.db")
    args = parser.parse_args()
    app.run(database=args.database, concurrency=4)


if __name__ == "__main__":
    main()
