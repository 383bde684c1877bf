"""A Flask sign-up service: the new user and their welcome email commit in one transaction.

    python examples/signup/web.py --database sqlite:///signup.db --port 8000
    curl -X POST localhost:8000/signup -H 'content-type: application/json' \\
         -d '{"email": "alice@example.com"}'

The user row is written through SQLAlchemy, and txqueue's send joins that same transaction
(``db.batch(connection=conn)``): both exist after the commit, or neither. worker.py sends the
emails.
"""

from __future__ import annotations

import argparse
import json
import uuid

import sqlalchemy
from flask import Flask, Response, jsonify, request

import txqueue

SCHEMA = [
    "CREATE TABLE IF NOT EXISTS Users (UserId STRING(36) NOT NULL, Email STRING(MAX) NOT NULL)"
    " PRIMARY KEY (UserId)",
    "CREATE QUEUE IF NOT EXISTS WelcomeEmails (UserId STRING(36) NOT NULL,"
    " Payload BYTES(MAX) NOT NULL) PRIMARY KEY (UserId)",
]


def sqlalchemy_url(url: str) -> str:
    """SQLAlchemy's name for the same database (psycopg 3 on PostgreSQL)."""
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


def create_app(url: str) -> Flask:
    db = txqueue.connect(url, dialect="googlesql")
    db.update_ddl(SCHEMA)
    engine = sqlalchemy.create_engine(sqlalchemy_url(url))
    app = Flask(__name__)

    @app.post("/signup")
    def signup() -> tuple[Response, int]:
        email = (request.get_json(silent=True) or {}).get("email")
        if not isinstance(email, str) or "@" not in email:
            return jsonify(error="email is required"), 400
        user_id = str(uuid.uuid4())
        with engine.begin() as conn:  # one transaction: commits at the end of the block
            taken = conn.execute(
                sqlalchemy.text("SELECT 1 FROM users WHERE email = :email"), {"email": email}
            ).first()
            if taken:
                return jsonify(error=f"{email} has already signed up"), 409
            conn.execute(
                sqlalchemy.text("INSERT INTO users (userid, email) VALUES (:id, :email)"),
                {"id": user_id, "email": email},
            )
            with db.batch(connection=conn) as batch:  # joins conn's transaction
                batch.send("WelcomeEmails", (user_id,), json.dumps({"email": email}).encode())
        return jsonify(user_id=user_id), 201

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default="sqlite:///signup.db")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    create_app(args.database).run(host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
