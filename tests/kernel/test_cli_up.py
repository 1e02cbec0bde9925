"""What `persona-service up` and `status` tell a user (mirrors cli.py's cmd_up and cmd_status,
providers/preflight.py, process/instances.claim, Stack._ensure_ports_free and
migrate.upgrade_logged; issue 48), run as users run them: the console script in a subprocess.

- The banner is the first thing on the console: the migrations of a new database are one line in it, their
  detail in the data dir's logs.
- Each remote model provider is checked at start (its server asked for its models) and the banner says for
  each whether it is ready, and what is wrong; `status` asks again. A failing check does not stop `up`.
- A second `up` on the same data dir says that one runs there, with its pid; on the same ports with another
  data dir, the clash names the running instance.
- A port clash names the setting that sets the port (a derived one by its derivation) and, for a port in the
  ephemeral range, that an outgoing connection may hold it."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import time
import uuid

import pytest
from persona_service.kernel.data.engine import make_engine
from persona_service.process.stack import free_port
from providers.openai_stub import OpenAIStub
from sqlalchemy import make_url, text
from support import CLI, JWT_SECRET, ROOT, cli_env

OFFERED = ["llama3.2:latest", "qwen2.5"]
EPHEMERAL_RANGE_FILE = pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range")


def _database(server_url: str, sql: str) -> None:
    engine = make_engine(server_url, pool_size=1)
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(sql))
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def model_server():
    with OpenAIStub(models=list(OFFERED)) as stub:
        yield stub


@pytest.fixture(scope="module")
def up(stack, model_server, tmp_path_factory):
    """`up` on a new database (on the test stack's PostgreSQL server) with chat on a model the stand-in model
    server has and embeddings on one it lacks: (its process, its console up to the banner's end, its env)."""
    name = f"up_{uuid.uuid4().hex[:12]}"
    _database(stack.database_url, f"CREATE DATABASE {name}")
    base = tmp_path_factory.mktemp("up")
    env = cli_env(
        DATABASE_URL=make_url(stack.database_url).set(database=name).render_as_string(hide_password=False),
        REDIS_URL=stack.redis_url, PERSONA_DATA_DIR=str(base / "data"), XDG_STATE_HOME=str(base / "state"),
        PERSONA_HTTP_PORT=str(free_port()), PERSONA_GRPC_PORT=str(free_port(1, 1000, 1001)),
        PERSONA_SERVER_PROCESSES="1", PERSONA_DRAIN_SECONDS="0", PERSONA_JWT_SECRET=JWT_SECRET,
        PERSONA_PROVIDER="openai", PERSONA_OPENAI_BASE_URL=model_server.base_url, PERSONA_OPENAI_MODEL="qwen2.5",
        PERSONA_EMBEDDING_PROVIDER="openai", PERSONA_OPENAI_EMBEDDING_MODEL="nomic-embed-text",
    )
    # Both streams on one pipe, in the order they were written: what the user's terminal shows.
    proc = subprocess.Popen([str(CLI), "up"], env=env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    console = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            console.append(line)
            if line.startswith("Stop with"):
                break
        assert console and console[-1].startswith("Stop with"), "".join(console) + proc.stdout.read()
        yield proc, "".join(console), env
    finally:
        if proc.poll() is None:  # (test_up_stops_quickly stops it, unless it did not run)
            os.killpg(proc.pid, signal.SIGINT)
            proc.communicate(timeout=120)
        _database(stack.database_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_the_banner_is_the_first_thing_on_the_console_and_the_migrations_one_line_of_it(up):
    _, console, env = up
    before, banner = console.split("Persona Service is up", 1)
    assert before == "", before  # no JSON log line of Alembic's (38 of them on a new database before)
    assert "alembic" not in console and "Running upgrade" not in console, console
    logs = pathlib.Path(env["PERSONA_DATA_DIR"]) / "logs"
    [database] = [line for line in banner.splitlines() if line.startswith("  database:")]
    applied = (logs / "migrations.log").read_text().count("Running upgrade")
    assert applied >= 29, applied
    assert f"  database:                 {applied} migrations applied, now at revision " in database, database


def test_the_banner_says_for_each_remote_provider_whether_its_model_is_there(up, model_server):
    _, console, _ = up
    url = model_server.base_url
    assert f"  model:                    qwen2.5 at {url} (moderation local, embeddings nomic-embed-text remote)\n" \
        in console, console
    check = console.split("  model check:              ", 1)[1].splitlines()[:2]
    assert check[0] == f"chat: model `qwen2.5` at {url}: OK", console
    assert check[1].strip() == (
        f"NOT READY: embeddings: model `nomic-embed-text` not found at {url}: the server offers: "
        f"{', '.join(OFFERED)}; set PERSONA_OPENAI_EMBEDDING_MODEL to one it offers, or pull it there"), console
    assert "\nWARNING: a model provider is not ready (model check above). The service runs on" in console, console
    assert [r.path for r in model_server.requests if r.method == "GET"] == ["/v1/models"]  # one server, asked once


def test_status_asks_the_providers_again(up, model_server):
    proc, _, env = up
    shell = cli_env(PERSONA_DATA_DIR=env["PERSONA_DATA_DIR"], XDG_STATE_HOME=env["XDG_STATE_HOME"])

    def status() -> subprocess.CompletedProcess:
        return subprocess.run([str(CLI), "status", "--wait", "60"], env=shell, cwd=ROOT, capture_output=True,
                              text=True, timeout=120)

    first = status()
    assert first.returncode == 0, first.stderr  # ready: the model check warns, never fails status
    said = json.loads(first.stdout)
    assert said["pid"] == proc.pid and said["ready"] is True
    # Neither model has a price: status says so (their costs are reported unknown, not $0).
    assert said["unpricedModels"] == ["qwen2.5", "nomic-embed-text"]
    assert "persona-service: warning: model qwen2.5 has no price" in first.stderr, first.stderr
    assert [(p["part"], p["model"], p["ok"]) for p in said["providers"]] == [
        ("chat", "qwen2.5", True), ("embeddings", "nomic-embed-text", False)]
    assert (f"persona-service: warning: model provider not ready: embeddings: model `nomic-embed-text` not found "
            f"at {model_server.base_url}: the server offers: {', '.join(OFFERED)}") in first.stderr, first.stderr
    # The model is pulled while the service runs: `status` says so, without a restart.
    model_server.models = [*OFFERED, "nomic-embed-text:latest"]
    try:
        again = status()
    finally:
        model_server.models = list(OFFERED)
    assert again.returncode == 0 and "not ready" not in again.stderr, again.stderr
    assert [p["says"] for p in json.loads(again.stdout)["providers"]] == [
        f"chat: model `qwen2.5` at {model_server.base_url}: OK",
        f"embeddings: model `nomic-embed-text` at {model_server.base_url}: OK"]


def test_a_second_up_on_the_same_data_dir_says_one_runs_there(up):
    proc, _, env = up
    second = subprocess.run([str(CLI), "up"], env=env, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True,
                            text=True, timeout=120)
    assert second.returncode == 1, second
    assert second.stderr.startswith(f"persona-service: Persona Service is already running here (pid {proc.pid}, "
                                    f"serving http://127.0.0.1:{env['PERSONA_HTTP_PORT']}, "), second.stderr
    assert "in use" not in second.stderr and "Persona Service is up" not in second.stdout
    assert proc.poll() is None
    # The running one's records are its own still (`status` finds it, ready).
    runtime = json.loads((pathlib.Path(env["PERSONA_DATA_DIR"]) / "runtime.json").read_text())
    assert runtime["pid"] == proc.pid
    assert not (pathlib.Path(env["PERSONA_DATA_DIR"]) / "starting.json").exists()


def test_a_second_up_on_the_same_ports_names_the_one_that_holds_them(up, tmp_path):
    proc, _, env = up
    second = subprocess.run([str(CLI), "up"], env={**env, "PERSONA_DATA_DIR": str(tmp_path / "other")}, cwd=ROOT,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert second.returncode == 1, second
    grpc = env["PERSONA_GRPC_PORT"]
    assert f"port {grpc} (gRPC server: PERSONA_GRPC_PORT) is already in use" in second.stderr, second.stderr
    assert (f"part of the Persona Service running on PERSONA_DATA_DIR={env['PERSONA_DATA_DIR']} (`up`, pid "
            f"{proc.pid}, http://127.0.0.1:{env['PERSONA_HTTP_PORT']})") in second.stderr, second.stderr


# --- port clashes -----------------------------------------------------------------------------------------


def _up_refused(stack, tmp_path, **ports: str) -> str:
    """`up` on a port that is taken: its stderr, once it has refused (before starting anything)."""
    env = cli_env(DATABASE_URL=stack.database_url, REDIS_URL=stack.redis_url, PERSONA_DATA_DIR=str(tmp_path / "data"),
                  XDG_STATE_HOME=str(tmp_path / "state"), PERSONA_SERVER_PROCESSES="1", **ports)
    result = subprocess.run([str(CLI), "up"], env=env, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 1 and "Persona Service is up" not in result.stdout, result
    return result.stderr


def test_a_derived_port_is_named_by_the_setting_it_comes_from(stack, tmp_path):
    grpc = free_port(1, 1000, 1001)
    with socket.socket() as held:  # the stream-only server's port: PERSONA_GRPC_PORT+1, never set by the user
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind(("127.0.0.1", grpc + 1))
        held.listen()
        said = _up_refused(stack, tmp_path, PERSONA_GRPC_PORT=str(grpc), PERSONA_HTTP_PORT=str(free_port()))
    assert (f"port {grpc + 1} (stream-only gRPC server: PERSONA_GRPC_PORT+1, derived from PERSONA_GRPC_PORT={grpc}) "
            f"is already in use; set PERSONA_GRPC_PORT where all of `up`'s gRPC ports are free: it takes "
            f"{grpc}-{grpc + 1} ") in said, said
    assert f"It is listened on by pid {os.getpid()}" in said, said
    assert "ephemeral" not in said  # (free_port's ports lie below the ephemeral range)


def test_a_port_in_the_ephemeral_range_may_be_held_by_an_outgoing_connection(stack, tmp_path):
    try:
        low, high = (int(n) for n in EPHEMERAL_RANGE_FILE.read_text().split())
    except OSError:
        pytest.skip(f"no {EPHEMERAL_RANGE_FILE}")
    with socket.socket() as server, socket.socket() as outgoing:
        server.bind(("127.0.0.1", 0))
        server.listen()
        listener = server.getsockname()[1]
        for port in range(low + 1000 + os.getpid() % 5000, high):  # an outgoing connection's local port
            try:
                outgoing.bind(("127.0.0.1", port))
                break
            except OSError:
                continue
        outgoing.connect(server.getsockname())
        said = _up_refused(stack, tmp_path, PERSONA_GRPC_PORT=str(free_port(1, 1000, 1001)),
                           PERSONA_HTTP_PORT=str(port))
    assert f"port {port} (HTTP edge) is already in use; set another PERSONA_HTTP_PORT" in said, said
    assert f"It is held by a connection to 127.0.0.1:{listener} (ESTABLISHED" in said, said
    assert (f"Port {port} lies in the ephemeral range ({low}-{high}, /proc/sys/net/ipv4/ip_local_port_range), "
            f"where the system picks the local port of each outgoing connection") in said, said
    assert f"choose ports below {low}" in said


def test_up_stops_quickly(up):
    """Last: `up` stops within seconds of Ctrl-C (issue 46; tests/kernel/test_supervision.py holds a call in flight
    through the stop and checks Redis's), saying nothing of a failure."""
    proc, _, _ = up
    started = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    took = time.monotonic() - started
    assert proc.returncode == 0, rest
    assert took < 20, f"`up` took {took:.1f}s to stop"
    assert rest.strip() == "stopping…", rest
