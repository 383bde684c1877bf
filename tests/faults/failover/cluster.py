"""etcd and three Patroni-managed PostgreSQL 15 nodes on free loopback ports, and the faults
the failover check forces on them.

Everything lives in one fresh temporary directory owned by the ``postgres`` OS user
(PostgreSQL and Patroni refuse to run as root), every port is chosen at run time on
127.0.0.1, and `Cluster.close` stops every process it started (SIGCONT first, for a frozen
node) and removes the directory.

Every TCP connection authenticates with scram-sha-256 and a password made for this run
(`Cluster.password`, never ``trust``): the superuser's port on 127.0.0.1 is open to every
local user while the check runs. Clients find the password through the libpq password file
`Cluster.client_passfile` (``PGPASSFILE``), so it appears in no URL and no command line.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BIN_DIR = "/usr/lib/postgresql/15/bin"
PG_OS_USER = "postgres"
SCOPE = "txq"
DATABASE = "postgres"
#: Patroni's leader lease: a frozen or crashed primary loses it after this many seconds.
TTL = 10
LOOP_WAIT = 1
RETRY_TIMEOUT = 4
#: Bytes of WAL a healthy replica may be behind (the check writes a few kB a second).
MAX_LAG = 1024 * 1024


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    """Poll ``condition`` until it returns something truthy; raise after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


@dataclass
class Node:
    name: str
    port: int
    rest_port: int
    data_dir: Path
    config: Path
    log: Path
    process: subprocess.Popen[bytes] | None = None
    frozen: list[int] = field(default_factory=list)

    def rest(self, path: str, timeout: float = 2.0) -> tuple[int, Any]:
        """GET Patroni's REST API: (status, JSON body); (0, None) when it does not answer."""
        url = f"http://127.0.0.1:{self.rest_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as reply:
                return reply.status, json.loads(reply.read() or b"null")
        except urllib.error.HTTPError as error:
            with contextlib.suppress(ValueError):
                return error.code, json.loads(error.read() or b"null")
            return error.code, None
        except (OSError, ValueError):
            return 0, None

    def post(self, path: str, body: dict[str, Any], timeout: float = 60.0) -> int:
        """POST JSON to Patroni's REST API; the HTTP status (0 when it does not answer)."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.rest_port}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as reply:
                return int(reply.status)
        except urllib.error.HTTPError as error:
            return int(error.code)
        except OSError:
            return 0

    def postmaster_pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int((self.data_dir / "postmaster.pid").read_text().split()[0])
        return None


class Cluster:
    """etcd plus three Patroni nodes; ``synchronous`` turns on Patroni's synchronous_mode."""

    def __init__(self, synchronous: bool = True, nodes: int = 3) -> None:
        self.synchronous = synchronous
        self.directory = Path(tempfile.mkdtemp(prefix="txq-failover-"))
        self.directory.chmod(0o700)
        # As root, PostgreSQL and Patroni run as the postgres OS user; else as this one.
        self._as: dict[str, Any] = {}
        if os.geteuid() == 0:
            user = pwd.getpwnam(PG_OS_USER)
            self._as = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
            os.chown(self.directory, user.pw_uid, user.pw_gid)
        #: The password of the ``postgres`` role (superuser, replication and rewind).
        self.password = secrets.token_urlsafe(24)
        #: A libpq password file holding it, for this process and the ones it starts.
        self.client_passfile = self.directory / "client.pgpass"
        descriptor = os.open(self.client_passfile, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        with os.fdopen(descriptor, "w") as passfile:
            passfile.write(f"127.0.0.1:*:*:postgres:{self.password}\n")
        self.etcd_port, self.etcd_peer_port = free_port(), free_port()
        self.etcd: subprocess.Popen[bytes] | None = None
        self.nodes = [
            Node(
                name=f"node{index}",
                port=free_port(),
                rest_port=free_port(),
                data_dir=self.directory / f"node{index}",
                config=self.directory / f"node{index}.yml",
                log=self.directory / f"node{index}.log",
            )
            for index in range(1, nodes + 1)
        ]

    # ---- start and stop ------------------------------------------------------------------

    def _spawn(self, command: list[str], log: Path) -> subprocess.Popen[bytes]:
        with open(log, "ab") as output:
            return subprocess.Popen(
                command,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.directory,
                **self._as,
                env={
                    "PATH": f"{BIN_DIR}:/usr/bin:/bin",
                    "HOME": str(self.directory),
                    "LANG": "C.UTF-8",
                },
                start_new_session=True,
            )

    def start(self, timeout: float = 180.0) -> None:
        etcd_dir = self.directory / "etcd"
        self.etcd = self._spawn(
            [
                "etcd",
                "--name=etcd0",
                f"--data-dir={etcd_dir}",
                f"--listen-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{self.etcd_peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{self.etcd_peer_port}",
                f"--initial-cluster=etcd0=http://127.0.0.1:{self.etcd_peer_port}",
                "--initial-cluster-state=new",
                "--unsafe-no-fsync",
            ],
            self.directory / "etcd.log",
        )
        wait_for(self._etcd_healthy, 60, "etcd to answer")
        for node in self.nodes:
            node.config.write_text(self._config(node))
            if self._as:
                os.chown(node.config, self._as["user"], self._as["group"])
        self.start_node(self.nodes[0])  # bootstraps the cluster alone: no initdb race
        wait_for(lambda: self.nodes[0].rest("/primary")[0] == 200, timeout, "node1 to lead")
        for node in self.nodes[1:]:
            self.start_node(node)
        self.wait_healthy(timeout)

    def _etcd_healthy(self) -> bool:
        try:
            url = f"http://127.0.0.1:{self.etcd_port}/health"
            with urllib.request.urlopen(url, timeout=2) as reply:
                return bool(json.loads(reply.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    def _config(self, node: Node) -> str:
        config = {
            "scope": SCOPE,
            "name": node.name,
            "log": {"level": "WARNING"},
            "restapi": {
                "listen": f"127.0.0.1:{node.rest_port}",
                "connect_address": f"127.0.0.1:{node.rest_port}",
            },
            "etcd3": {"hosts": f"127.0.0.1:{self.etcd_port}"},
            "bootstrap": {
                "dcs": {
                    "ttl": TTL,
                    "loop_wait": LOOP_WAIT,
                    "retry_timeout": RETRY_TIMEOUT,
                    "maximum_lag_on_failover": 16 * 1024 * 1024,
                    "synchronous_mode": self.synchronous,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "use_slots": True,
                        "remove_data_directory_on_rewind_failure": True,
                        "remove_data_directory_on_diverged_timelines": True,
                        "parameters": {
                            "wal_level": "replica",
                            "hot_standby": "on",
                            "wal_log_hints": "on",
                            "max_wal_senders": 10,
                            "max_replication_slots": 10,
                            "max_connections": 200,
                            "fsync": "off",
                            "synchronous_commit": "on",
                            "wal_receiver_timeout": "5s",
                            "wal_sender_timeout": "5s",
                        },
                    },
                },
                "initdb": [{"encoding": "UTF8"}, {"locale": "C"}],
                "pg_hba": [
                    # The socket lives in the run's directory, mode 0700: its owner's alone.
                    "local all all trust",
                    "host replication all 127.0.0.1/32 scram-sha-256",
                    "host all all 127.0.0.1/32 scram-sha-256",
                ],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{node.port}",
                "connect_address": f"127.0.0.1:{node.port}",
                "data_dir": str(node.data_dir),
                "bin_dir": BIN_DIR,
                "pgpass": str(self.directory / f"{node.name}.pgpass"),
                "authentication": {
                    role: {"username": "postgres", "password": self.password}
                    for role in ("superuser", "replication", "rewind")
                },
                "parameters": {
                    "unix_socket_directories": str(self.directory),
                    "password_encryption": "scram-sha-256",
                },
            },
        }
        return json.dumps(config, indent=1)  # JSON is YAML

    def start_node(self, node: Node) -> None:
        node.process = self._spawn(["patroni", str(node.config)], node.log)

    def close(self) -> None:
        """Stop every process started here (frozen ones are thawed first), remove the files."""
        for node in self.nodes:
            self._thaw(node)
            if node.process is not None and node.process.poll() is None:
                node.process.terminate()  # Patroni stops its PostgreSQL (fast shutdown)
        for node in self.nodes:
            if node.process is not None:
                try:
                    node.process.wait(30)
                except subprocess.TimeoutExpired:
                    self._kill_process_group(node.process.pid)
                    node.process.wait(10)
            pid = node.postmaster_pid()
            if pid is not None:
                self._kill_process_group(pid)
        if self.etcd is not None and self.etcd.poll() is None:
            self.etcd.terminate()
            try:
                self.etcd.wait(10)
            except subprocess.TimeoutExpired:
                self.etcd.kill()
                self.etcd.wait(10)
        shutil.rmtree(self.directory, ignore_errors=True)

    @staticmethod
    def _kill_process_group(pid: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)

    # ---- state ---------------------------------------------------------------------------

    def members(self) -> list[dict[str, Any]]:
        """Patroni's view of the cluster (GET /cluster on the first node that answers)."""
        for node in self.nodes:
            if node.frozen:
                continue
            status, body = node.rest("/cluster")
            if status == 200 and isinstance(body, dict):
                return list(body.get("members", []))
        return []

    def leader(self) -> Node | None:
        """The node that holds the leader key (Patroni's /cluster) and whose REST API says it
        runs as the primary; None while there is no such node (or it is frozen)."""
        names = {m.get("name") for m in self.members() if m.get("role") in ("leader", "master")}
        for node in self.nodes:
            if node.name in names and not node.frozen and node.rest("/primary")[0] == 200:
                return node
        return None

    def timeline(self, name: str) -> int:
        """The timeline Patroni reports for member ``name`` (0 when unknown)."""
        for member in self.members():
            if member.get("name") == name and isinstance(member.get("timeline"), int):
                return int(member["timeline"])
        return 0

    def healthy(self) -> bool:
        """One leader, every other member streaming, and a synchronous standby when in
        synchronous mode: ready for the next fault."""
        members = self.members()
        if len(members) != len(self.nodes):
            return False
        leaders = [m for m in members if m.get("role") in ("leader", "master")]
        others = [m for m in members if m not in leaders]
        if len(leaders) != 1 or leaders[0].get("state") != "running":
            return False
        if any(m.get("state") not in ("streaming", "running") for m in others):
            return False
        if any(not isinstance(m.get("lag"), int) or m["lag"] > MAX_LAG for m in others):
            return False
        if any(m.get("timeline") != leaders[0].get("timeline") for m in others):
            return False
        if self.synchronous and not any(m.get("role") == "sync_standby" for m in others):
            return False
        return all(node.rest("/health")[0] == 200 for node in self.nodes)

    def wait_healthy(self, timeout: float = 180.0) -> None:
        try:
            wait_for(self.healthy, timeout, "the cluster to be healthy", interval=0.5)
        except TimeoutError as error:
            raise TimeoutError(f"{error}: {self.members()}") from None

    def lagging(self) -> list[str]:
        """The replicas that do not follow the leader (not running, or far behind)."""
        return [
            m["name"]
            for m in self.members()
            if m.get("role") not in ("leader", "master")
            and (
                m.get("state") not in ("streaming", "running")
                or not isinstance(m.get("lag"), int)
                or m["lag"] > MAX_LAG
            )
        ]

    def reinit(self, name: str) -> None:
        """Rebuild replica ``name`` from the leader (Patroni's POST /reinitialize)."""
        node = next(node for node in self.nodes if node.name == name)
        node.post("/reinitialize", {"force": True})

    def urls(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", node.port) for node in self.nodes]

    # ---- faults --------------------------------------------------------------------------

    def switchover(self, old: Node) -> None:
        """A switchover away from ``old`` (Patroni's POST /switchover, what ``patronictl
        switchover`` sends; patronictl 3.0 itself sometimes did not exit afterwards)."""
        status = old.post("/switchover", {"leader": old.name})
        if status != 200:
            raise RuntimeError(f"switchover from {old.name} refused: HTTP {status}")

    def crash(self, node: Node) -> None:
        """kill -9 of the node: its Patroni and its postmaster (the postmaster's children
        follow); Patroni alone would restart a killed postmaster in place, as the leader."""
        if node.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(node.process.pid, signal.SIGKILL)
            node.process.wait(10)
        pid = node.postmaster_pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def freeze(self, node: Node) -> None:
        """SIGSTOP the node's Patroni and every PostgreSQL process of it (a paused VM)."""
        pids: list[int] = []
        if node.process is not None:
            pids.append(node.process.pid)
        pid = node.postmaster_pid()
        if pid is not None:
            pids += [pid, *_children(pid)]
        node.frozen = pids
        for each in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(each, signal.SIGSTOP)

    def _thaw(self, node: Node) -> None:
        for each in node.frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(each, signal.SIGCONT)
        node.frozen = []

    def thaw(self, node: Node) -> None:
        """Let a frozen node go on: its PostgreSQL gets SIGCONT, its Patroni is restarted
        (SIGKILL while stopped, then started again), finds the leader key taken and demotes
        it. A Patroni 3.0 thawed in place now and then took its leader key back from the
        promoted node (a split brain that a watchdog prevents in production), so the
        check does not thaw it."""
        patroni = node.process
        if patroni is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(patroni.pid, signal.SIGKILL)
            node.frozen = [pid for pid in node.frozen if pid != patroni.pid]
            patroni.wait(10)
        self._thaw(node)
        self.start_node(node)


def _children(pid: int) -> list[int]:
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent == pid:
                children.append(int(entry.name))
    return children
