"""The PostgreSQL driver: psycopg 3 with a pool, SKIP LOCKED leasing, LISTEN/NOTIFY wake-ups."""
