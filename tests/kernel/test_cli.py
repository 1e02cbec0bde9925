"""`persona-service` (mirrors server/persona_service/cli.py), against the running test stack. What a command
does and says runs in this process (support.run_cli_here: cli.main with the environment a user's shell gives
it); `up`, a server's exit and what a start imports run as users run them: the console script in a
subprocess."""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import time

import pytest
from persona_service.process.stack import StackError, free_port
from support import (
    CLI,
    JWT_SECRET,
    ROOT,
    assert_envelope,
    bootstrap,
    cli_env,
    make_stack_beside,
    run_cli,
    run_cli_here,
    running,
)


@pytest.fixture(scope="module")
def booted(stack) -> dict:
    return bootstrap(stack)


# --- bootstrap ----------------------------------------------------------------------


def test_bootstrap_prints_one_json_object(booted):
    assert set(booted) == {"orgId", "workspaceId", "userId", "apiKey"}
    assert booted["orgId"].startswith("org_")
    assert booted["workspaceId"].startswith("ws_")
    assert booted["userId"].startswith("usr_")
    assert booted["apiKey"].startswith("sk_live_")


def test_bootstrap_key_works_over_http(booted, http):
    r = http.get(f"/v1/orgs/{booted['orgId']}", headers={"Authorization": f"Bearer {booted['apiKey']}"})
    assert r.status_code == 200, r.text
    org = r.json()
    assert org["id"] == booted["orgId"]
    assert org["name"] == "CLI Org"
    assert org["region"] == "eu"
    assert org["workspacesCount"] == 1
    assert org["dataResidencyLocked"] is True
    assert org["ownerUserId"] == booted["userId"]


def test_bootstrap_us_region_is_not_residency_locked(stack, http):
    made = bootstrap(stack, org_name="CLI US Org", plan="pro", region="us")
    r = http.get(f"/v1/orgs/{made['orgId']}", headers={"Authorization": f"Bearer {made['apiKey']}"})
    assert r.status_code == 200, r.text
    assert r.json()["region"] == "us"
    assert r.json()["dataResidencyLocked"] is False


def test_bootstrap_platform_admin_reaches_admin_rpc(stack, http, booted):
    # Without the flag the key is refused...
    r = http.post("/v1/admin/dsar/build-one", json={}, headers={"Authorization": f"Bearer {booted['apiKey']}"})
    assert_envelope(r, 403, "forbidden")
    # ...with it the call gets through to the entry point.
    admin = bootstrap(stack, "--platform-admin", org_name="CLI Admin Org")
    r = http.post("/v1/admin/dsar/build-one", json={}, headers={"Authorization": f"Bearer {admin['apiKey']}"})
    assert r.status_code == 200 and set(r.json()) == {"handled", "jobId", "exportId"}, r.text


# --- mint-jwt -----------------------------------------------------------------------


def mint(stack, booted, secret: str, data_dir: pathlib.Path) -> str:
    result = run_cli_here(
        "mint-jwt", "--user-id", booted["userId"], "--org-id", booted["orgId"], "--workspace-id", booted["workspaceId"],
        env=cli_env(PERSONA_JWT_SECRET=secret, PERSONA_DATA_DIR=str(data_dir), DATABASE_URL=stack.database_url),
    )
    assert result.returncode == 0, result.stderr
    token = result.stdout.strip()
    assert len(token.splitlines()) == 1 and token.count(".") == 2, result.stdout
    return token


def test_mint_jwt_is_accepted(stack, booted, http, tmp_path):
    token = mint(stack, booted, JWT_SECRET, tmp_path)
    r = http.get(f"/v1/orgs/{booted['orgId']}", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    assert r.json()["id"] == booted["orgId"]


def test_mint_jwt_with_another_secret_is_refused(stack, booted, http, tmp_path):
    token = mint(stack, booted, "another-secret-" + "y" * 40, tmp_path)
    r = http.get(f"/v1/orgs/{booted['orgId']}", headers={"Authorization": f"Bearer {token}"})
    assert_envelope(r, 401, "unauthorized")


def test_mint_jwt_refuses_someone_who_is_not_a_member(stack, booted, tmp_path):
    result = run_cli_here("mint-jwt", "--user-id", "usr_nobody", "--org-id", booted["orgId"], "--workspace-id",
                          booted["workspaceId"], env=cli_env(PERSONA_DATA_DIR=str(tmp_path), DATABASE_URL=stack.database_url))
    assert result.returncode == 1 and result.stdout == ""
    assert "usr_nobody is not an active member" in result.stderr


# --- finding the running instance ---------------------------------------------------------


def test_commands_refuse_when_no_instance_runs(tmp_path):
    # A new shell: no PERSONA_DATA_DIR, no DATABASE_URL, nothing running.
    env = cli_env(XDG_STATE_HOME=str(tmp_path / "state"))
    for command in (["bootstrap", "--org-name", "Nobody"], ["mint-jwt", "--user-id", "u", "--org-id", "o",
                                                          "--workspace-id", "w"], ["status"]):
        result = run_cli_here(*command, env=env, cwd=tmp_path)
        assert result.returncode == 1, (command, result.stdout, result.stderr)
        assert "no running Persona Service found" in result.stderr
        assert not (tmp_path / ".persona").exists()  # no second database was made


def test_up_with_servers_and_workers_is_found_from_another_shell(stack, tmp_path):
    state = str(tmp_path / "state")
    project = tmp_path / "project"  # `up` runs here on its default data dir (.persona)
    project.mkdir()
    port = free_port()
    env = cli_env(
        DATABASE_URL=stack.database_url, REDIS_URL=stack.redis_url,
        PERSONA_HTTP_PORT=str(port), PERSONA_GRPC_PORT=str(free_port(1, 1000, 1001)),
        PERSONA_DB_CONNECTIONS="60", XDG_STATE_HOME=state,
        PERSONA_DRAIN_SECONDS="0",  # stopped once every call has answered: nothing to drain
        # Neither a stream-only server nor a runner: this is about `--servers` and `--workers` and finding the
        # instance, and nothing here streams or runs the model; each is a fresh interpreter's imports (issue 46).
        PERSONA_STREAM_SERVER_PROCESSES="0", PERSONA_RUNNER_PROCESSES="0",
    )
    proc = subprocess.Popen([str(CLI), "up", "--servers", "2", "--workers", "2"], env=env, cwd=project,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        banner = []
        for line in proc.stdout:  # type: ignore[union-attr]
            banner.append(line)
            if line.startswith("Stop with"):
                break
        text = "".join(banner)
        assert "Persona Service is up" in text, text + proc.stderr.read()  # type: ignore[union-attr]
        assert text.count("127.0.0.1:") >= 3 and "webhook-worker ×2" in text, text

        shell = cli_env(XDG_STATE_HOME=state)  # another shell: nothing says where the service is
        # Elsewhere (another checkout), the instance is named, never used.
        for command in (["status", "--wait", "1"], ["bootstrap", "--org-name", "Elsewhere"]):
            refused = run_cli_here(*command, env=shell, cwd=tmp_path)
            assert refused.returncode == 1 and refused.stdout == "", (command, refused.stdout, refused.stderr)
            assert f"running elsewhere: http://127.0.0.1:{port} (PERSONA_DATA_DIR={project / '.persona'})" \
                in refused.stderr, refused.stderr
        assert not (tmp_path / ".persona").exists()  # no second database was made
        # In the instance's own directory, it is found.
        status = run_cli_here("status", "--wait", "30", env=shell, cwd=project)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["url"] == f"http://127.0.0.1:{port}"
        made = run_cli_here("bootstrap", "--org-name", "Found", env=shell, cwd=project)
        assert made.returncode == 0, made.stderr
        assert f"using the instance at http://127.0.0.1:{port}" in made.stderr
        booted = json.loads(made.stdout)
        import httpx

        r = httpx.get(f"http://127.0.0.1:{port}/v1/orgs/{booted['orgId']}",
                      headers={"Authorization": f"Bearer {booted['apiKey']}"})
        assert r.status_code == 200, r.text
        token = run_cli_here("mint-jwt", "--user-id", booted["userId"], "--org-id", booted["orgId"],
                             "--workspace-id", booted["workspaceId"], env=shell, cwd=project)
        assert token.returncode == 0, token.stderr
        r = httpx.get(f"http://127.0.0.1:{port}/v1/orgs/{booted['orgId']}",
                      headers={"Authorization": f"Bearer {token.stdout.strip()}"})
        assert r.status_code == 200, r.text  # signed with the running instance's secret
    finally:
        os.killpg(proc.pid, 2)
        proc.communicate(timeout=60)
    gone = run_cli_here("status", env=cli_env(XDG_STATE_HOME=state), cwd=project)
    assert gone.returncode == 1


# --- help and start-up ----------------------------------------------------------------


def test_help_lists_every_command_and_setting():
    from persona_service.cli import kernel_commands, settings_sections
    from persona_service.kernel.settings import env_names
    from persona_service.registry import MODULES

    result = run_cli_here("--help", env=cli_env())
    assert result.returncode == 0, result.stderr
    listed = result.stdout.split("positional arguments:", 1)[1]
    for command in (*kernel_commands(), *MODULES.commands):
        assert f"\n    {command.name} " in listed, f"`{command.name}` missing from --help"
    for name in (name for section in settings_sections() for name in env_names(section)):
        assert f"\n  {name}=" in result.stdout, f"{name} missing from --help"


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_import_no_module(flag):
    # What makes them instant (scripts/measure_cli.py): the generated index, no module, no pydantic.
    code = (f"import sys\nfrom persona_service.cli import main\ntry:\n    main([{flag!r}])\nexcept SystemExit:\n"
            "    pass\nprint(sorted(m for m in sys.modules if m.startswith(('persona_service', 'pydantic', 'sqlalchemy'))),"
            " file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], env=cli_env(), cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "['persona_service', 'persona_service.cli', 'persona_service.cli_index']"


def test_cli_index_is_fresh():
    result = subprocess.run([sys.executable, "scripts/gen_cli_index.py", "--check"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


# --- up -----------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1"])
def test_up_refuses_a_busy_http_port(stack, tmp_path, host):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind((host, 0))
        held.listen()
        port = held.getsockname()[1]
        env = cli_env(
            PERSONA_DATA_DIR=str(tmp_path / "data"),
            DATABASE_URL=stack.database_url,
            REDIS_URL=stack.redis_url,
            PERSONA_HTTP_PORT=str(port),
            PERSONA_GRPC_PORT=str(free_port(1, 2, 1000, 1001, 1002)),  # all of `up`'s gRPC ports, held free
            PERSONA_JWT_SECRET=JWT_SECRET,
        )
        started = time.monotonic()
        proc = subprocess.Popen(
            [str(CLI), "up"], env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )
        try:
            stdout, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.communicate()
            pytest.fail(f"`persona-service up` kept running although port {port} is taken")
        elapsed = time.monotonic() - started
    assert proc.returncode != 0, stdout + stderr
    assert elapsed < 20, f"took {elapsed:.1f}s to give up"
    assert str(port) in stderr, stderr
    assert "in use" in stderr, stderr
    assert "Persona Service is up" not in stdout


# --- settings -----------------------------------------------------------------------


@pytest.mark.parametrize(("command", "name", "value", "reason"), [
    (["up"], "PERSONA_HTTP_PORT", "abc", "expected an integer"),
    (["worker"], "PERSONA_WEBHOOKS_ALLOW_PRIVATE", "maybe", "expected a boolean (true/false, 1/0, yes/no, on/off)"),
    (["serve"], "PERSONA_MODEL_PRICES", '{"m": 1', "expected JSON (Expecting ',' delimiter: line 1 column 8 (char 7))"),
])
def test_a_bad_setting_is_one_line_naming_it(tmp_path, command, name, value, reason):
    # `up` as users run it (it claims its data dir for the process's life first); the others in this process.
    run = run_cli if command == ["up"] else run_cli_here
    result = run(*command, env=cli_env(PERSONA_DATA_DIR=str(tmp_path), **{name: value}))
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr == f"persona-service: invalid setting {name}={value!r}: {reason}\n"
    assert result.stdout == ""


def test_a_server_with_a_bad_setting_exits_and_the_stack_says_so(stack, tmp_path):
    bad = make_stack_beside(stack, tmp_path / "data", PERSONA_GRPC_WORKERS="many")
    with pytest.raises(StackError, match=r"gRPC server exited \(2\)"):
        with running(bad):
            pass
    log = (bad.log_dir / f"server-{bad.grpc_ports[0]}.log").read_text()
    assert log == "persona-service: invalid setting PERSONA_GRPC_WORKERS='many': expected an integer\n"


def test_the_configuration_doc_is_the_settings_command_output():
    result = run_cli_here("settings", env=cli_env())
    assert result.returncode == 0, result.stderr
    page = (ROOT / "docs" / "configuration.md").read_text()
    table = "".join(block + "\n" for block in page.split("\n\n") if block.startswith("| variable "))
    assert table == result.stdout, "docs/configuration.md's table is stale: paste `persona-service settings` there"
    for name in ("PERSONA_HTTP_PORT", "PERSONA_PROVIDER", "PERSONA_MODEL_PRICES", "PERSONA_WEBHOOK_LANES"):
        assert f"| `{name}` |" in result.stdout


# --- generated code -----------------------------------------------------------------


def test_generated_code_is_fresh():
    result = subprocess.run(
        [sys.executable, "scripts/gen_proto.py", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
