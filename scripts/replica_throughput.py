"""Reads per second a streaming replica sustains for the reads routed to it, against its primary's (issue 49,
docs/capacity.md). Run through `scripts/measure_replica_reads.py --throughput`.

1. A primary from Debian's PostgreSQL (`make topology-tools`), seeded by scripts/seed_volume.py at `--scale`
   of its sizes (the migrations, then the big tenant by COPY).
2. The SQL: the service itself (`bench_volume.start_stack`: servers, runner, worker, Envoy) answers, once each,
   the volume benchmark's calls whose RPC may lag (`read_may_lag`: the lists a replica serves), deep calls
   walked `--depth` pages first as the benchmark does; PostgreSQL's statement log (tests/volume/plans.py, the
   plan tests' parser) gives the statements each request ran, with their values. The same for a persona update
   (`PATCH /v1/personas/{id}`): its `UPDATE personas` is the write load. The stack then stops.
3. A hot standby (`pg_basebackup -R`), same settings. pgbench (C, prepared statements, the logged values as
   its variables: parameters, as the service sends them) runs each call's statements as one transaction,
   the calls weighted as measured_replica_reads.py weighs the benchmark's catalogue. On the replica each read
   first asks the replay position, as kernel/data/replicas.py does. Throughout, a second pgbench replays the
   persona update at `--write-rate` per second on the primary: WAL for the replica to replay while it serves.
4. `--rounds` rounds, each running the mix for `--seconds` against the primary then the replica (the order
   alternates): the same clients (`--clients`), the same machine, interleaved. Per round: reads/s, the
   server's CPU per read (all its processes, exited backends included through the postmaster's cutime, less
   its rate at rest measured with the write load on), pgbench's own CPU per read, and the replica's replay
   lag (pg_stat_replication, sampled every 0.5 s).

Everything it starts (PostgreSQL twice, the stack, pgbench) it stops; its files are in a temporary directory.
The last lines printed are a markdown table for docs/capacity.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import pathlib
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
PG_BIN = max(pathlib.Path("/usr/lib/postgresql").glob("*/bin"), default=pathlib.Path("/usr/lib/postgresql/15/bin"))
DB_USER = "postgres" if os.geteuid() == 0 else None  # PostgreSQL refuses to run as root
UTILISATION = 0.7  # as scripts/capacity.py: the headroom a platform team keeps
REST_SECONDS = 3.0
SETTLE_SECONDS = 0.5
# Both servers run with these (and PostgreSQL's defaults otherwise).
SERVER_SETTINGS = {"listen_addresses": "127.0.0.1", "max_connections": "100", "shared_buffers": "128MB",
                   "fsync": "on", "hot_standby": "on"}
TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


# --- the statements, as pgbench scripts --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Script:
    """One API request's statements as a pgbench script: SQL with `:variables`, and the variables' values."""

    name: str
    sql: list[str]
    variables: dict[str, str]
    weight: int = 1

    def text(self, first: str = "") -> str:
        return "".join(f"{s.strip().rstrip(';')};\n" for s in ([first] if first else []) + self.sql)


# A pgbench variable reference: a colon, not part of a `::` cast, before a name (pgbench reads one even in a
# string literal, which would break the statement).
_STRAY_COLON = re.compile(r"(?<!:):(?!:)(?=[A-Za-z0-9_])")


def to_script(name: str, prefix: str, statements: list[Any], weight: int = 1) -> Script:
    """`statements` (tests/volume/plans.py `Statement`s: SQL with $n and the logged values) as a pgbench script:
    each $n a variable `<prefix>_<k>_<n>` holding its value (pgbench sends it as a parameter of the prepared
    statement: the service's own SQL and values), a NULL written in place."""
    sql, variables = [], {}
    for k, statement in enumerate(statements):
        if _STRAY_COLON.search(statement.sql.replace("::", "")):
            raise ValueError(f"{name}: a ':' pgbench would take for a variable: {statement.sql[:200]}")
        text = statement.sql
        for n in sorted(statement.params, reverse=True):  # $12 before $1
            value = statement.params[n]
            if value in ("NULL", "''"):  # (pgbench takes no empty variable)
                replacement = value
            else:
                replacement = f":{prefix}_{k}_{n}"
                variables[f"{prefix}_{k}_{n}"] = value[1:-1].replace("''", "'")
            text = re.sub(rf"\${n}(?!\d)", replacement, text)
        sql.append(text)
    return Script(name, sql, variables, weight)


# --- CPU of a server's processes -----------------------------------------------------------------------------


def _stat(pid: int) -> list[str]:
    raw = pathlib.Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rindex(")") + 2:].split()


def server_cpu_ms(postmaster: int) -> dict[str, float]:
    """CPU ms the server has used: `replay` (the startup process and the WAL receiver), `walsender`, `all`
    (every process, those that exited counted in the postmaster's children's times)."""
    fields = _stat(postmaster)
    found = {"all": sum(float(v) for v in fields[11:15]) * TICK_MS, "replay": 0.0, "walsender": 0.0}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = _stat(int(entry.name))
            if int(fields[1]) != postmaster:
                continue
            ms = (float(fields[11]) + float(fields[12])) * TICK_MS
            title = (entry / "cmdline").read_bytes().decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue  # exited meanwhile: in the postmaster's cutime by the next sample
        found["all"] += ms
        if "startup" in title or "walreceiver" in title:
            found["replay"] += ms
        elif "walsender" in title:
            found["walsender"] += ms
    return found


def _delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in after}


# --- the servers ------------------------------------------------------------------------------------------------


def _free_port() -> int:
    from persona_service.process.stack import free_port

    return free_port()


def _as_db_user(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=True, capture_output=True, text=True, user=DB_USER, timeout=300, **kwargs)


class Server:
    """A PostgreSQL server from Debian's binaries under `home`, on 127.0.0.1:`port`, its log `home/log`."""

    def __init__(self, home: pathlib.Path, name: str) -> None:
        self.data, self.log_path, self.port = home / name, home / f"{name}.log", _free_port()
        self.socket_dir = home / f"{name}-socket"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return self.url_of("persona")

    def url_of(self, database: str) -> str:
        return f"postgresql://persona@127.0.0.1:{self.port}/{database}"

    def init(self) -> None:
        _as_db_user([str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "persona", "--auth=trust", "-E", "UTF8",
                     "--no-sync"])

    def base_backup(self, primary: Server) -> None:
        """A copy of `primary` that streams from it (`-R`: standby.signal and primary_conninfo)."""
        _as_db_user([str(PG_BIN / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(primary.port), "-U", "persona",
                     "-D", str(self.data), "-R", "-X", "stream", "-c", "fast"])

    def start(self) -> None:
        self.socket_dir.mkdir()
        self.log_path.touch()
        if DB_USER:
            shutil.chown(self.socket_dir, DB_USER)
            shutil.chown(self.log_path, DB_USER)
        argv = [str(PG_BIN / "postgres"), "-D", str(self.data), "-p", str(self.port), "-k", str(self.socket_dir)]
        for key, value in SERVER_SETTINGS.items():
            argv += ["-c", f"{key}={value}"]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=log, user=DB_USER, start_new_session=True)
        deadline = time.monotonic() + 60
        while subprocess.run([str(PG_BIN / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port)]).returncode:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL on {self.port} did not start: {self.log_path.read_text()[-2000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(2)  # SIGINT: fast shutdown
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def sql(self, statement: str) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.url_of("postgres"), autocommit=True) as conn:
            cursor = conn.execute(statement)  # type: ignore[arg-type]
            return list(cursor.fetchall()) if cursor.description else []


# --- step 2: what the service sends -------------------------------------------------------------------------------


def capture(primary: Server, seeded: dict[str, Any], home: pathlib.Path, depth: int) -> tuple[list[Script], Script]:
    """The routed read mix's scripts, and the write load's (the persona update's UPDATE), from the service."""
    import bench_volume
    import httpx
    from measure_replica_reads import PLACEHOLDERS, may_lag, routes, weight
    from sqlalchemy import create_engine

    sys.path.insert(0, str(ROOT / "tests" / "volume"))  # the plan tests' statement-log parser: one for both
    from plans import StatementLog  # type: ignore[import-not-found]

    engine = create_engine(primary.url.replace("postgresql://", "postgresql+psycopg://"))
    log = StatementLog(primary.log_path)
    table = routes()
    chosen = [c for c in bench_volume.calls({**PLACEHOLDERS, **seeded}) if may_lag(c.path, table)]
    stack = bench_volume.start_stack(home / "stack", primary.url)
    reads: list[Script] = []
    try:
        log.enable(engine)
        headers = {"Authorization": f"Bearer {seeded['api_key']}"}
        with httpx.Client(base_url=stack.http_url, headers=headers, timeout=60) as http:
            for i, call in enumerate(chosen):
                params = bench_volume.resolve(http, call, depth)
                http.get(call.path, params=params).raise_for_status()  # warm: the service's caches, prepared plans
                time.sleep(0.2)
                start = log.offset()
                http.get(call.path, params=params).raise_for_status()
                time.sleep(0.3)  # the log is written by the backend after it answers
                reads.append(to_script(call.name, f"r{i}", _request_statements(log.since(start), call.path),
                                       weight(call)))
                print(f"  {call.name} (weight {reads[-1].weight}): " + " | ".join(
                    " ".join(sql.split())[:100] for sql in reads[-1].sql), flush=True)
            start = log.offset()
            http.patch(f"/v1/personas/{seeded['persona_id']}",
                       json={"displayName": "Replica throughput"}).raise_for_status()
            time.sleep(0.3)
            update = [s for s in log.since(start) if s.sql.lstrip().upper().startswith("UPDATE PERSONAS")]
    finally:
        try:
            log.disable(engine)
        finally:
            engine.dispose()
            stack.stop()
    if not update:
        raise RuntimeError("no UPDATE personas in the persona update's statements")
    return reads, to_script("persona update", "w", update[:1])


_TABLE_OF = {"/v1/personas": "personas", "/v1/events": "events", "/v1/audit/events": "audit_events",
             "/v1/marketplace/listings": "marketplace_listings"}


def _request_statements(logged: list[Any], path: str) -> list[Any]:
    """The statements one request ran on the call's table, by the backend that ran them (the stack's other
    processes, its timers and polls, log statements of their own meanwhile). Not the key and configuration
    lookups before them (authentication, on the primary, cached by the process) nor a new connection's setup."""
    table = _TABLE_OF.get(path, "")
    by_pid: dict[str, list[Any]] = {}
    for statement in logged:
        by_pid.setdefault(statement.pid, []).append(statement)
    for statements in by_pid.values():
        found = [s for s in statements if _is_read(s.sql) and re.search(rf"\b{table}\b", s.sql)]
        if found:
            return found
    raise RuntimeError(f"{path}: no statement reading {table} logged: {[s.sql[:80] for s in logged]}")


def _is_read(sql: str) -> bool:
    return sql.lstrip().split(None, 1)[0].upper() in ("SELECT", "WITH") if sql.strip() else False


# --- steps 3 and 4: pgbench against each server ----------------------------------------------------------------


def pgbench_argv(server: Server, scripts: list[Script], folder: pathlib.Path, clients: int, threads: int,
                 first: str = "") -> list[str]:
    """pgbench with `scripts` (each weighted, `first` run before each one's statements), prepared statements."""
    argv = [str(PG_BIN / "pgbench"), "-n", "-M", "prepared", "-h", "127.0.0.1", "-p", str(server.port),
            "-U", "persona", "-c", str(clients), "-j", str(max(1, min(clients, threads)))]
    folder.mkdir(parents=True, exist_ok=True)
    for i, script in enumerate(scripts):
        path = folder / f"{i:02d}.sql"
        path.write_text(script.text(first))
        argv += ["-f", f"{path}@{script.weight}"]
        for key, value in script.variables.items():
            argv += ["-D", f"{key}={value}"]
    return argv


def pgbench_env(name: str) -> dict[str, str]:
    return {**os.environ, "PGDATABASE": "persona", "PGAPPNAME": name}


@dataclasses.dataclass(frozen=True)
class Outcome:
    reads: int
    failed: int
    seconds: float
    latency_ms: float
    tps: float


def parse_pgbench(output: str, seconds: float) -> Outcome:
    def number(pattern: str, default: float = 0.0) -> float:
        m = re.search(pattern, output)
        return float(m.group(1)) if m else default

    return Outcome(reads=int(number(r"number of transactions actually processed: (\d+)")),
                   failed=int(number(r"number of failed transactions: (\d+)")), seconds=seconds,
                   latency_ms=number(r"latency average = ([\d.]+) ms"),
                   tps=number(r"tps = ([\d.]+) \(without initial connection time\)"))


class LagSampler:
    """The standby's replay lag as the primary sees it (pg_stat_replication), every 0.5 s, tagged by round."""

    def __init__(self, primary: Server) -> None:
        import psycopg

        self.conn = psycopg.connect(primary.url_of("postgres"), autocommit=True)
        self.samples: list[tuple[str, float, float]] = []  # (round's server, lag ms, bytes not replayed)
        self.tag = ""
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.wait(0.5):
            row = self.conn.execute(
                "SELECT COALESCE(EXTRACT(EPOCH FROM replay_lag) * 1000, 0), "
                "pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn) FROM pg_stat_replication").fetchone()
            if row and self.tag:
                self.samples.append((self.tag, float(row[0]), float(row[1] or 0)))

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()
        self.conn.close()

    def summary(self, tag: str) -> dict[str, float]:
        lags = sorted(s[1] for s in self.samples if s[0] == tag)
        behind = [s[2] for s in self.samples if s[0] == tag]
        if not lags:
            return {"samples": 0}
        return {"samples": len(lags), "p50_ms": round(statistics.median(lags), 2), "max_ms": round(lags[-1], 2),
                "max_bytes_behind": max(behind)}


def rest_rate(servers: dict[str, Server], seconds: float) -> dict[str, dict[str, float]]:
    """CPU ms/s of each server with no reads (the write load and its replay on)."""
    before = {name: server_cpu_ms(s.pid) for name, s in servers.items()}
    time.sleep(seconds)
    return {name: {k: v / seconds for k, v in _delta(server_cpu_ms(s.pid), before[name]).items()}
            for name, s in servers.items()}


# What each round runs: its label, the server, what each read asks first. The routed read is the service's (the
# replay position, then the list); the bare one tells that round trip's cost from the standby's own.
ARMS = (("primary", "primary", False), ("replica", "replica", True), ("replica, list only", "replica", False))


def one_round(name: str, on: str, argv: list[str], servers: dict[str, Server], rest: dict[str, dict[str, float]],
              seconds: int, lag: LagSampler) -> dict[str, Any]:
    """The mix against server `on` for `seconds`: reads/s, CPU per read of each server (its rest taken off)."""
    before = {n: server_cpu_ms(s.pid) for n, s in servers.items()}
    client_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    lag.tag = name
    started = time.monotonic()
    done = subprocess.run([*argv, "-T", str(seconds)], capture_output=True, text=True, timeout=seconds + 120,
                          env=pgbench_env("replica-throughput"))
    elapsed = time.monotonic() - started
    lag.tag = ""
    client_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    time.sleep(SETTLE_SECONDS)  # the backends pgbench leaves exit and are reaped: their CPU joins the postmaster's
    spent = {n: _delta(server_cpu_ms(s.pid), before[n]) for n, s in servers.items()}
    window = time.monotonic() - started
    outcome = parse_pgbench(done.stdout, elapsed)
    if done.returncode != 0 or outcome.reads == 0:
        raise RuntimeError(f"pgbench against the {name}: {done.returncode}\n{done.stdout[-1500:]}{done.stderr[-1500:]}")
    reads = outcome.reads
    client_ms = 1000 * ((client_after.ru_utime + client_after.ru_stime)
                        - (client_before.ru_utime + client_before.ru_stime))
    per_read = {n: (spent[n]["all"] - rest[n]["all"] * window) / reads for n in servers}
    return {"server": name, "on": on, "reads": reads, "failed": outcome.failed, "seconds": round(elapsed, 2),
            "reads_per_s": round(reads / elapsed, 1), "tps": outcome.tps, "latency_ms": outcome.latency_ms,
            "cpu_ms_per_read": {n: round(v, 4) for n, v in per_read.items()},
            "client_cpu_ms_per_read": round(client_ms / reads, 4),
            "aborted_clients": done.stderr.count("aborted"), "load": round(os.getloadavg()[0], 2)}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import seed_volume
    from persona_service.kernel.data.replicas import REPLAY_POSITION

    if not (PG_BIN / "pgbench").exists():
        raise SystemExit(f"no {PG_BIN / 'pgbench'}: `make topology-tools` installs Debian's PostgreSQL")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    result: dict[str, Any] = {"commit": commit.stdout.strip(), "started": time.strftime("%Y-%m-%d %H:%M UTC",
                              time.gmtime()), "cpus": os.cpu_count(), "load_start": list(os.getloadavg()),
                              "args": {k: v for k, v in vars(args).items() if k not in ("json", "from_json")},
                              "postgres": PG_BIN.parent.name}
    sizes = seed_volume.Sizes().scaled(args.scale)
    began = time.monotonic()
    with contextlib.ExitStack() as cleanup:
        home = pathlib.Path(tempfile.mkdtemp(prefix="replica-throughput-"))
        cleanup.callback(shutil.rmtree, home, True)
        if DB_USER:
            shutil.chown(home, DB_USER)
        primary, replica = Server(home, "primary"), Server(home, "replica")
        primary.init()
        cleanup.callback(primary.stop)
        primary.start()
        primary.sql("CREATE DATABASE persona")
        print(f"seeding at {args.scale} of the volume seed's sizes: {sizes}", flush=True)
        seeded = dataclasses.asdict(seed_volume.seed(primary.url, sizes, log=lambda _line: None))
        result["seed"] = {"scale": args.scale, "counts": seeded["counts"]}
        print(f"seeded in {time.monotonic() - began:.0f} s; capturing the service's SQL", flush=True)
        reads, write = capture(primary, seeded, home, args.depth)
        result["mix"] = [{"call": s.name, "weight": s.weight, "statements": s.sql} for s in reads]
        result["write"] = write.sql
        primary.sql("CHECKPOINT")
        replica.base_backup(primary)
        cleanup.callback(replica.stop)
        replica.start()
        deadline = time.monotonic() + 60
        while primary.sql("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")[0][0] < 1:
            if time.monotonic() > deadline:
                raise RuntimeError("the replica is not streaming")
            time.sleep(0.2)
        servers = {"primary": primary, "replica": replica}
        first = {"primary": "", "replica": str(REPLAY_POSITION)}
        # Every script once on each server: an error here is a statement pgbench cannot replay, not a result.
        for name, server in servers.items():
            for i, script in enumerate(reads):
                check = pgbench_argv(server, [script], home / f"check-{name}-{i}", 1, 1, first[name])
                done = subprocess.run([*check, "-t", "1"], capture_output=True, text=True, timeout=120,
                                      env=pgbench_env("replica-check"))
                if done.returncode != 0 or parse_pgbench(done.stdout, 0).reads != 1:
                    raise RuntimeError(f"{script.name} on the {name}: {done.stdout[-800:]}{done.stderr[-1500:]}")
        writer = None
        if args.write_rate > 0:
            writer = subprocess.Popen([*pgbench_argv(primary, [write], home / "write", 1, 1), "-R",
                                       str(args.write_rate), "-T", "86400"], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, env=pgbench_env("replica-writer"))
            cleanup.callback(writer.wait)  # (callbacks run last first: terminated, then waited for)
            cleanup.callback(writer.terminate)
        lag = LagSampler(primary)
        cleanup.callback(lag.stop)
        time.sleep(1.0)
        rest = rest_rate(servers, REST_SECONDS)
        result["rest_cpu_ms_per_s"] = {n: {k: round(v, 2) for k, v in r.items()} for n, r in rest.items()}
        lag.tag = "rest"
        time.sleep(REST_SECONDS)
        lag.tag = ""
        rounds = []
        for clients in args.clients:
            argvs = {name: pgbench_argv(servers[on], reads, home / f"run-{i}", clients, args.threads,
                                        str(REPLAY_POSITION) if ask else "")
                     for i, (name, on, ask) in enumerate(ARMS)}
            for r in range(args.rounds):  # interleaved, the order reversed every other round
                for name, on, _ask in (ARMS if r % 2 == 0 else ARMS[::-1]):
                    row = {"clients": clients, **one_round(name, on, argvs[name], servers, rest, args.seconds, lag)}
                    print(json.dumps(row), flush=True)
                    rounds.append(row)
        result["rounds"] = rounds
        result["lag"] = {tag: lag.summary(tag) for tag in ("rest", *(arm[0] for arm in ARMS))}
        result["write_rate"] = args.write_rate
    result["load_end"] = list(os.getloadavg())
    result["seconds"] = round(time.monotonic() - began)
    return result


# --- output -----------------------------------------------------------------------------------------------------


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def render(result: dict[str, Any]) -> str:
    """The markdown table (one row per server and client count) and the lines that go with it."""
    lines = ["| server | clients | reads/s (median; each round) | latency avg ms | PostgreSQL CPU ms per read "
             "| reads/s per core at 70% | the other server's CPU ms per read | pgbench CPU ms per read |",
             "|---|---:|---|---:|---:|---:|---:|---:|"]
    for clients in sorted({r["clients"] for r in result["rounds"]}):
        for name in dict.fromkeys(r["server"] for r in result["rounds"]):
            rows = [r for r in result["rounds"] if r["server"] == name and r["clients"] == clients]
            if not rows:
                continue
            on = rows[0]["on"]
            other = "replica" if on == "primary" else "primary"
            cpu = _median([r["cpu_ms_per_read"][on] for r in rows])
            per_core = f"{1000 * UTILISATION / cpu:.0f}" if cpu > 0 else "-"
            lines.append(
                f"| {name} | {clients} | {_median([r['reads_per_s'] for r in rows]):.0f} "
                f"({', '.join(str(round(r['reads_per_s'])) for r in rows)}) "
                f"| {_median([r['latency_ms'] for r in rows]):.2f} | {cpu:.3f} | {per_core} "
                f"| {_median([r['cpu_ms_per_read'][other] for r in rows]):.3f} "
                f"| {_median([r['client_cpu_ms_per_read'] for r in rows]):.3f} |")
    ratio = _ratio(result)
    lag = result.get("lag", {})
    rest = result.get("rest_cpu_ms_per_s", {})
    seed = result.get("seed", {})
    lines += [
        "",
        f"replica / primary, reads/s at the same clients: {ratio}; "
        f"failed reads: {sum(r['failed'] for r in result['rounds'])}, "
        f"aborted clients: {sum(r['aborted_clients'] for r in result['rounds'])}",
        f"replay lag (pg_stat_replication, every 0.5 s) with {result.get('write_rate', 0)} persona updates/s on the "
        f"primary: " + "; ".join(f"{tag} rounds {_lag(summary)}" for tag, summary in lag.items() if tag != "rest")
        + f"; at rest {_lag(lag.get('rest', {}))}; the replica's replay (startup + walreceiver) "
        f"{rest.get('replica', {}).get('replay', 0.0):.1f} CPU ms/s at rest",
        f"mix: {', '.join(m['call'] + ' (' + str(m['weight']) + ')' for m in result.get('mix', []))}",
        f"seed: scripts/seed_volume.py at {seed.get('scale')} of its sizes ({_counts(seed.get('counts', {}))})",
        f"commit {result.get('commit')}, {result.get('started')}, {result.get('postgres')} (Debian), "
        f"{result.get('cpus')} CPUs, load average (1 min) at start / end "
        f"{result['load_start'][0]:.1f} / {result['load_end'][0]:.1f}, {result.get('seconds')} s",
    ]
    return "\n".join(lines)


def _ratio(result: dict[str, Any]) -> str:
    found = []
    for clients in sorted({r["clients"] for r in result["rounds"]}):
        rate = {name: _median([r["reads_per_s"] for r in result["rounds"]
                               if r["server"] == name and r["clients"] == clients]) for name, _on, _ask in ARMS}
        if rate["primary"] > 0:
            bare = f" (list only: {rate[ARMS[2][0]] / rate['primary']:.2f})" if rate[ARMS[2][0]] else ""
            found.append(f"{rate['replica'] / rate['primary']:.2f} at {clients}{bare}")
    return ", ".join(found) or "-"


def _lag(summary: dict[str, float]) -> str:
    if not summary.get("samples"):
        return "no samples"
    return (f"p50 {summary['p50_ms']:.1f} ms, max {summary['max_ms']:.1f} ms, at most "
            f"{summary['max_bytes_behind'] / 1024:.0f} kB not replayed")


def _counts(counts: dict[str, int]) -> str:
    keys = ("personas", "events", "audit_events", "marketplace_listings", "chat_messages")
    return ", ".join(f"{k} {counts[k]:,}" for k in keys if k in counts)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--scale", type=float, default=0.02, help="of scripts/seed_volume.py's sizes")
    parser.add_argument("--clients", type=lambda v: [int(c) for c in v.split(",")], default=[1, 8],
                        help="pgbench clients, the same against both servers (a list: 1,8 runs each)")
    parser.add_argument("--threads", type=int, default=2, help="pgbench threads (at most the clients)")
    parser.add_argument("--seconds", type=int, default=10, help="each round's length")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per client count (primary and replica each)")
    parser.add_argument("--write-rate", type=float, default=20.0,
                        help="persona updates/s on the primary throughout (0: none; the replica then replays nothing)")
    parser.add_argument("--depth", type=int, default=20, help="pages a deep call walks first (the benchmark's)")
    parser.add_argument("--json", type=pathlib.Path, help="also write the measurements here")
    parser.add_argument("--from-json", type=pathlib.Path, help="measure nothing: print a saved run's table")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.seconds <= 0 or min(args.clients) < 1:
        parser.error("--rounds, --seconds and --clients must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_json:
        print(render(json.loads(args.from_json.read_text())))
        return 0
    result = measure(args)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    print()
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
