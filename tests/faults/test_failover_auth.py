"""The failover check's cluster authenticates every TCP connection with a password made for
the run: its pg_hba.conf trusted the superuser on 127.0.0.1, open to every local user while
the check ran. Checked on the configuration the check writes for Patroni (the check itself
runs in ``test_failover.py``)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator

import pytest

from .failover.cluster import Cluster


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    made = Cluster()
    try:
        yield made
    finally:
        made.close()


def test_no_tcp_connection_is_trusted(cluster: Cluster) -> None:
    config = json.loads(cluster._config(cluster.nodes[0]))
    rules = [rule.split() for rule in config["bootstrap"]["pg_hba"]]
    tcp = [rule for rule in rules if rule[0].startswith("host")]
    assert tcp and all(rule[-1] == "scram-sha-256" for rule in tcp), rules
    assert all(rule[-1] != "trust" for rule in tcp)
    assert config["postgresql"]["parameters"]["password_encryption"] == "scram-sha-256"


def test_the_password_is_random_and_reaches_clients_by_passfile(cluster: Cluster) -> None:
    other = Cluster()
    try:
        assert other.password != cluster.password
    finally:
        other.close()
    config = json.loads(cluster._config(cluster.nodes[0]))
    roles = config["postgresql"]["authentication"]
    assert {role["password"] for role in roles.values()} == {cluster.password}
    assert len(cluster.password) >= 24 and cluster.password != "postgres"
    passfile = cluster.client_passfile
    assert stat.S_IMODE(os.stat(passfile).st_mode) == 0o600
    assert passfile.read_text() == f"127.0.0.1:*:*:postgres:{cluster.password}\n"
