"""A replicated PostgreSQL cluster (Patroni + etcd) on loopback, and the failover check run on it."""
