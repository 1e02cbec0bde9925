"""PostgreSQL that fails over (#49), for the topology run: Debian's etcd, Patroni and HAProxy.

One etcd member (a quorum of one: on one machine a second member would share its fate; production
runs three or five on separate machines), two Patroni nodes, each managing a PostgreSQL server with
its data under the deployment's database folder, in `synchronous_mode` (a commit returns once the
standby has it, and Patroni promotes only a synchronous standby: an acknowledged write survives the
primary's loss), and HAProxy with two frontends routed by Patroni's REST health checks: one to the
leader (`/primary`), one to the streaming standbys (`/replica`). Clients reach PostgreSQL only
through HAProxy; `on-marked-down shutdown-sessions` cuts their sessions to a demoted or lost server,
so pools and LISTEN connections reconnect to the new leader instead of waiting on a dead one.

This module renders the configurations and asks Patroni; scripts/topology.py starts the processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import socket
import urllib.request
from dataclasses import dataclass, field

from persona_service.process.stack import free_port

SCOPE = "persona"
# Patroni's clock: a leader key lives `TTL` s unless renewed (each `LOOP_WAIT` s); etcd is retried for
# `RETRY_TIMEOUT` s. Patroni wants loop_wait + 2 × retry_timeout ≤ ttl. A lost Patroni node (machine) is
# failed over after the TTL; a primary whose PostgreSQL dies is failed over at Patroni's next loop
# (`primary_start_timeout: 0`: no restart in place first, safe with a synchronous standby to promote).
TTL, LOOP_WAIT, RETRY_TIMEOUT = 10, 1, 4
# HAProxy's health checks: every 0.5 s, a server is out after 2 failures and in after 1 success.
CHECK = "inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions"


@dataclass
class PatroniCluster:
    """Two Patroni members, one etcd, HAProxy: ports picked free, configuration files under `folder`."""

    folder: pathlib.Path
    bin_dir: pathlib.Path
    members: int = 2
    etcd_port: int = field(default_factory=free_port)
    etcd_peer_port: int = field(default_factory=free_port)
    primary_port: int = field(default_factory=free_port)  # HAProxy: the leader
    replica_port: int = field(default_factory=free_port)  # HAProxy: the standbys
    rest_ports: list[int] = field(default_factory=list)
    pg_ports: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rest_ports = self.rest_ports or [free_port() for _ in range(self.members)]
        self.pg_ports = self.pg_ports or [free_port() for _ in range(self.members)]

    @property
    def names(self) -> list[str]:
        return [f"pg-{index}" for index in range(self.members)]

    def data_dir(self, index: int) -> pathlib.Path:
        return self.folder / self.names[index]

    # --- the processes' command lines and configurations ----------------------------------------

    def etcd_argv(self) -> list[str]:
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        client = f"http://127.0.0.1:{self.etcd_port}"
        return ["etcd", "--name", "etcd-0", "--data-dir", str(self.folder / "etcd"), "--listen-client-urls", client,
                "--advertise-client-urls", client, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"etcd-0={peer}", "--log-level", "warn"]

    def patroni_argv(self, index: int) -> list[str]:
        return ["/usr/bin/patroni", str(self.folder / f"{self.names[index]}.yml")]

    def haproxy_argv(self) -> list[str]:
        return ["haproxy", "-db", "-f", str(self.folder / "haproxy.cfg")]

    def write_configs(self) -> list[pathlib.Path]:
        """Every member's Patroni configuration (JSON is YAML) and HAProxy's; the paths written."""
        written = []
        for index, name in enumerate(self.names):
            path = self.folder / f"{name}.yml"
            path.write_text(json.dumps(self.patroni_config(index), indent=1))
            written.append(path)
        (self.folder / "haproxy.cfg").write_text(self.haproxy_config())
        return [*written, self.folder / "haproxy.cfg"]

    def patroni_config(self, index: int) -> dict:
        """One member: the deployment's superuser `persona` (trust on 127.0.0.1, as the single server's)."""
        user = {"username": "persona"}
        return {
            "scope": SCOPE, "name": self.names[index],
            "restapi": {"listen": f"127.0.0.1:{self.rest_ports[index]}",
                        "connect_address": f"127.0.0.1:{self.rest_ports[index]}"},
            "etcd3": {"hosts": f"127.0.0.1:{self.etcd_port}"},
            "bootstrap": {
                "dcs": {"ttl": TTL, "loop_wait": LOOP_WAIT, "retry_timeout": RETRY_TIMEOUT,
                        "primary_start_timeout": 0, "synchronous_mode": True,
                        # The old primary rejoins as a standby: pg_rewind needs the hint bits logged.
                        "postgresql": {"use_pg_rewind": True,
                                       "parameters": {"wal_log_hints": "on", "max_connections": 200,
                                                      "shared_buffers": "64MB"}}},
                "initdb": [{"encoding": "UTF8"}, {"auth": "trust"}, {"username": "persona"}],
                "pg_hba": ["host all all 127.0.0.1/32 trust", "host replication all 127.0.0.1/32 trust",
                           "local all all trust"],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{self.pg_ports[index]}", "connect_address": f"127.0.0.1:{self.pg_ports[index]}",
                "data_dir": str(self.data_dir(index)), "bin_dir": str(self.bin_dir),
                "pgpass": str(self.folder / f"{self.names[index]}.pgpass"),
                "authentication": {"superuser": user, "replication": user, "rewind": user},
                "parameters": {"unix_socket_directories": str(self.folder)},
            },
        }

    def haproxy_config(self) -> str:
        """TCP frontends checked over Patroni's REST API. Idle sessions (a LISTEN, PgBouncer's idle server
        connections) may stay an hour. The leader's check asks for two things: Patroni's /primary is 200 from
        the moment a member holds the leader lock, before its promotion ends, and the body's role (from
        pg_is_in_recovery()) says when it takes writes; on the status alone a connection made in between
        reached a read-only standby (a write answered 500 in a measured run of the leader machine's loss)."""
        lines = ["global", "    maxconn 2000", f"    stats socket {self.stats_socket} mode 600", "defaults",
                 "    mode tcp", "    timeout connect 2s", "    timeout client 1h", "    timeout server 1h",
                 "    timeout check 1s"]
        # (The body's rule first: HAProxy then reads the whole answer, where a failed status rule first would
        # reset the connection while Patroni writes the body, a traceback in its log every check.)
        primary = ["    option httpchk", "    http-check send meth GET uri /primary",
                   '    http-check expect rstring "\\"role\\": \\"(master|primary)\\""', "    http-check expect status 200"]
        replica = ["    option httpchk OPTIONS /replica", "    http-check expect status 200"]  # (OPTIONS: no body)
        for frontend, port, check in (("primary", self.primary_port, primary), ("replicas", self.replica_port, replica)):
            lines += [f"listen {frontend}", f"    bind 127.0.0.1:{port}", "    balance roundrobin", *check,
                      f"    default-server {CHECK}"]
            lines += [f"    server {name} 127.0.0.1:{pg} check port {rest}"
                      for name, pg, rest in zip(self.names, self.pg_ports, self.rest_ports)]
        return "\n".join(lines) + "\n"

    @property
    def stats_socket(self) -> pathlib.Path:
        return self.folder / "haproxy.sock"

    def routed(self) -> set[str]:
        """The members HAProxy's primary frontend routes to now (its servers UP, from its stats socket)."""
        with socket.socket(socket.AF_UNIX) as stats:
            stats.settimeout(2)
            stats.connect(str(self.stats_socket))
            stats.sendall(b"show stat\n")
            answer = b"".join(iter(lambda: stats.recv(65536), b""))
        header, *rows = answer.decode().lstrip("# ").splitlines()
        table = [dict(zip(header.split(","), row.split(","))) for row in rows if row]
        return {row["svname"] for row in table if row["pxname"] == "primary" and row["status"] == "UP"
                and row["svname"] in self.names}

    # --- asking Patroni -------------------------------------------------------------------------------

    def cluster(self) -> dict:
        """Patroni's view of the cluster (`GET /cluster`) from the first member that answers."""
        for port in self.rest_ports:
            with contextlib.suppress(OSError, ValueError):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/cluster", timeout=1) as answer:
                    return json.load(answer)
        return {"members": []}

    def roles(self) -> dict[str, tuple[str, str]]:
        """Each running member's (role, state): role leader / sync_standby / replica."""
        return {m["name"]: (m["role"], m["state"]) for m in self.cluster()["members"]}

    def leader(self) -> str | None:
        """The member that leads with its PostgreSQL running as primary, if any."""
        return next((name for name, (role, state) in self.roles().items()
                     if role == "leader" and state == "running"), None)

    def synchronous(self) -> bool:
        """A running leader and a streaming synchronous standby: a primary's loss loses nothing."""
        roles = set(self.roles().values())
        return ("leader", "running") in roles and any(r == "sync_standby" and s in ("running", "streaming")
                                                      for r, s in roles)

    def switchover(self, to: str) -> None:
        """A planned switchover (Patroni's REST API, as `patronictl switchover`): the leader hands over to `to`."""
        leader = self.leader()
        body = json.dumps({"leader": leader, "candidate": to}).encode()
        port = self.rest_ports[self.names.index(to)]
        request = urllib.request.Request(f"http://127.0.0.1:{port}/switchover", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            if answer.status != 200:
                raise RuntimeError(f"switchover to {to}: {answer.status} {answer.read()!r}")

    def postmaster_pid(self, name: str) -> int | None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int((self.data_dir(self.names.index(name)) / "postmaster.pid").read_text().split()[0])
        return None

    def kill_postgres(self, name: str) -> None:
        """`kill -9` of the member's postmaster (its backends exit as they notice; no shutdown checkpoint).
        Patroni runs PostgreSQL in a session of its own: killing Patroni's process group leaves it running.
        A postmaster.pid left by an earlier kill may name another process by now: only this data's postgres."""
        pid, data = self.postmaster_pid(name), str(self.data_dir(self.names.index(name)))
        with contextlib.suppress(OSError):
            if pid is not None and data in pathlib.Path(f"/proc/{pid}/cmdline").read_text():
                os.kill(pid, signal.SIGKILL)


def patroni_env() -> dict[str, str]:
    """Debian's Patroni runs on the system python3: nothing of this project's virtual environment."""
    return {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "LANG": "C.UTF-8", "HOME": "/tmp"}

