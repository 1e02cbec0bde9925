"""`persona-service`: run the service and administer it from the shell.

The composition root: the kernel's commands (`up`, `serve`, `migrate`,
`settings`) plus every command a registered module declares. Every settings
section is read before a command runs: a bad value is one line on stderr and
exit status 2.

Starting is cheap: `--help` and `--version` import no module, since the
command table and the variables' defaults come from `cli_index.py`, generated
from the registry (scripts/gen_cli_index.py; `make gen-check` and
tests/kernel/test_cli.py keep it current). A command imports its own
functions, the settings sections and, unless it is `standalone`, the
assembled modules (PERSONA_EXTRA_MODULES: the registry, as it adds commands)."""

from __future__ import annotations

import argparse
import importlib
import os
import pathlib
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic_settings import BaseSettings

    from persona_service.kernel.command import Command
    from persona_service.kernel.settings import Settings
    from persona_service.providers.preflight import Finding, Probe


def settings_sections() -> tuple[type[Any], ...]:
    """Every settings section: the kernel's, the providers', then each module's."""
    from persona_service.kernel import settings as config
    from persona_service.providers.settings import ProviderSettings
    from persona_service.registry import MODULES

    return (config.Settings, ProviderSettings, *MODULES.settings_sections)


def _settings() -> Settings:
    from persona_service.kernel import settings as config

    return config.load()


def cmd_up(args: argparse.Namespace) -> int:
    import signal
    import threading

    from persona_service.kernel import logs
    from persona_service.kernel import settings as config
    from persona_service.process import instances as runtime
    from persona_service.process.stack import Stack, StackError
    from persona_service.providers import preflight
    from persona_service.providers.factory import describe as describe_models
    from persona_service.providers.settings import ProviderSettings
    from persona_service.registry import MODULES

    settings = _settings()
    if args.servers is not None:
        settings = settings.model_copy(update={"server_processes": args.servers})
    logs.configure(settings.log_level, settings.log_format)
    started = time.monotonic()
    # Each remote model provider is asked while the stack starts (its answer, or a 3 s timeout, comes long
    # before the stack is up), so the check adds nothing to the start.
    probes = preflight.probes(config.load(ProviderSettings))
    findings: list[preflight.Finding] = []
    checking = threading.Thread(target=lambda: findings.extend(preflight.run(probes)), daemon=True)
    checking.start()
    stack = Stack(settings, MODULES, workers=args.workers)
    # Closing the terminal (SIGHUP) stops the stack in order like Ctrl-C. Handlers that take no lock (as the
    # server's, the runner's and the webhook worker's): an Event set from a handler can wait forever for the
    # lock its own thread holds inside Event.wait. The main thread polls what they received.
    received: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _: received.append(signum))
    try:
        stack.start()
    except StackError as exc:
        stack.stop()
        runtime.record_start(settings.data_dir, error=str(exc))
        print(f"persona-service: {exc}", file=sys.stderr)
        return 1
    runtime.announce(runtime.Instance(os.getpid(), str(settings.data_dir), stack.http_url, stack.database_url,
                                      stack.redis_url, tuple(p.to_json() for p in probes), _unpriced_models()))
    checking.join(10)
    stream_servers = ", ".join(f"127.0.0.1:{stack.stream_port(p)}" for p in stack.stream_server_ports)
    priority = "SCHED_IDLE" if settings.runner_priority == "idle" else f"nice {settings.runner_nice}"
    processes = ", ".join([f"runner ×{settings.runner_processes} (the model's work, {priority})",
                           *(f"{p.name} ×{p.count() if args.workers is None else args.workers}"
                             for p in MODULES.processes)])
    print(
        f"Persona Service is up in {time.monotonic() - started:.1f}s\n"
        f"  HTTP/JSON and gRPC (h2c): http://127.0.0.1:{settings.http_port}/v1\n"
        f"  gRPC server(s):           {', '.join(f'127.0.0.1:{p}' for p in stack.grpc_ports)}\n"
        f"  stream server(s):         {stream_servers or '(the gRPC servers)'}\n"
        f"  model:                    {describe_models()}\n"
        f"{_describe_findings(findings, probes)}"
        f"  prices:                   {_describe_prices()}\n"
        f"  background processes:     {processes}\n"
        f"  database:                 {stack.migrations}\n"
        f"  data:                     {settings.data_dir}\n"
        f"  logs:                     {stack.log_dir}\n"
        f"{_findings_warning(findings)}"
        f"Create an organization and key (from any shell, in this directory): "
        f"{_this_cli()} bootstrap --org-name 'My Org'\n"
        f"Stop with Ctrl-C.",
        flush=True,
    )
    try:
        while not received:
            time.sleep(0.1)
    finally:
        runtime.withdraw(str(settings.data_dir))
    print("stopping…", flush=True)
    stack.stop()
    # The atexit handlers stop what this process still holds (the embedded PostgreSQL, which it joined last); the
    # interpreter's teardown after them took 1.3 s of the stop on a quiet machine (issue 46).
    import atexit

    atexit._run_exitfuncs()
    _exit_at_once(0)
    return 0


_BANNER_INDENT = " " * 28


def _describe_findings(findings: list[Finding], probes: list[Probe]) -> str:
    """The banner's lines on each remote model provider (providers.preflight): none when every part is local."""
    if not probes:
        return ""
    lines = [f.line() if f.ok else f"NOT READY: {f.line()}" for f in findings]
    if len(findings) < len(probes):
        lines.append("the check did not finish (a model server that does not answer); `status` asks again")
    return "  model check:              " + f"\n{_BANNER_INDENT}".join(lines) + "\n"


def _findings_warning(findings: list[Finding]) -> str:
    """A failed model check does not stop `up` (a model server may start after it, a model be pulled later, and
    everything but the model's work runs without one); it is said loudly, once, after the banner's lines."""
    if all(f.ok for f in findings):
        return ""
    return ("WARNING: a model provider is not ready (model check above). The service runs on; the calls that "
            "need that model fail (502 provider_error) until its server answers with it: a server started or a "
            "model pulled later is used without a restart, a changed setting needs one. `persona-service status` "
            "checks again (docs/real-model.md).\n")


def _describe_prices() -> str:
    """The banner's prices line: the configured models without a price are named (their costs are reported as
    unknown, never as $0: providers.pricing)."""
    from persona_service.providers.pricing import describe

    models = _priced_models()
    if models == ("local-persona-1",):
        return describe("local-persona-1") + " (the local test model's demo price)"
    chat, embedding = (*models, "")[:2]
    return describe(chat, embedding)


def _priced_models() -> tuple[str, ...]:
    """The models whose usage is billed: chat's and, when remote, the embeddings'."""
    from persona_service.kernel.settings import load
    from persona_service.providers.settings import ProviderSettings

    settings = load(ProviderSettings)
    if settings.upstream("chat") is None:
        return ("local-persona-1",)
    return settings.openai_model, settings.openai_embedding_model if settings.upstream("embedding") else ""


def _unpriced_models() -> tuple[str, ...]:
    from persona_service.providers.pricing import PriceTable

    return tuple(PriceTable.from_env().unpriced(m for m in _priced_models() if m))


def _this_cli() -> str:
    """This CLI as a new shell in the current directory runs it: the console
    script beside this interpreter (`.venv/bin/persona-service`, relative when
    it is under the current directory), which a fresh shell's PATH lacks."""
    script = pathlib.Path(sys.executable).parent / "persona-service"
    if not script.exists():
        return "persona-service"
    script = script.absolute()
    try:
        return str(script.relative_to(pathlib.Path.cwd()))
    except ValueError:
        return str(script)


def _up_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--servers", type=int, metavar="N", help="gRPC server processes (default: "
                        "PERSONA_SERVER_PROCESSES); Envoy gets as many worker threads, within the cores")
    parser.add_argument("--workers", type=int, metavar="M", help="processes of each background kind (webhook "
                        "delivery; default: each kind's own count)")


def cmd_status(args: argparse.Namespace) -> int:
    """The running instance and whether it is ready (`--wait`: until it is)."""
    import json
    import urllib.error
    import urllib.request

    from persona_service.process import instances as runtime

    settings = _settings()
    explicit = bool(os.environ.get("PERSONA_DATA_DIR"))
    missing = "no running Persona Service found (start it with `make up`)"

    def find() -> runtime.Instance | None:
        nonlocal missing
        if explicit:
            return runtime.read(settings.data_dir)
        try:
            return runtime.locate(settings.data_dir)
        except runtime.NoInstance as exc:
            missing = str(exc)  # names any instance running elsewhere
            return None

    def stopped(since: float, grace: float) -> str | None:
        """Why the `up` starting on this data dir will never be ready: at once when it
        failed after `since`; a failure recorded before only after `grace` seconds
        (a new `up` may be about to replace the record of an earlier one)."""
        start = runtime.read_start(settings.data_dir)
        reason = start.failure() if start is not None else None
        if reason is None or start is None or (start.at < since and time.time() < since + grace):
            return None
        return f"`up` stopped before it was ready: {reason}"

    began = time.time()
    instance = find()
    deadline = time.monotonic() + (args.wait or 0)
    while True:
        ready = False
        if instance is not None:
            try:
                with urllib.request.urlopen(instance.http_url + "/readyz", timeout=2) as answer:
                    ready = answer.status == 200
            except (urllib.error.URLError, OSError):
                ready = False
        if ready or time.monotonic() >= deadline:
            break
        if instance is None and (failed := stopped(began, STALE_START_GRACE_SECONDS)):
            print(f"persona-service: {failed}", file=sys.stderr)
            return 1
        time.sleep(0.5)
        instance = instance or find()
    if instance is None:
        print(f"persona-service: {stopped(began, 0) or missing}", file=sys.stderr)
        return 1
    answer = {"url": instance.http_url, "dataDir": instance.data_dir, "pid": instance.pid, "ready": ready,
              "unpricedModels": list(instance.unpriced)}
    for model in instance.unpriced:
        print(f"persona-service: warning: model {model} has no price: its costs are reported as unknown "
              "(`unpriced`), not $0; set PERSONA_MODEL_PRICES (docs/configuration.md)", file=sys.stderr)
    if instance.providers:
        # The model providers the instance runs with, asked again (providers.preflight): a warning, never a
        # failure of `status`, whose exit says whether the service is ready.
        from persona_service.providers import preflight

        findings = preflight.run([preflight.Probe.from_json(p) for p in instance.providers])
        answer["providers"] = [f.to_json() for f in findings]
        for finding in findings:
            if not finding.ok:
                print(f"persona-service: warning: model provider not ready: {finding.line()}", file=sys.stderr)
    print(json.dumps(answer))
    return 0 if ready else 1


# How long `status --wait` lets a new `up` replace the record of an earlier one that failed (`make up &`
# then `status --wait` at once: the new `up` is still importing when status first looks).
STALE_START_GRACE_SECONDS = 15.0


def _status_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wait", type=float, metavar="SECONDS", default=0,
                        help="wait up to this long for the instance to start and be ready")


def cmd_edge(args: argparse.Namespace) -> int:
    """Envoy for the server process of this pod or machine (PERSONA_GRPC_PORT on
    127.0.0.1), in the foreground: the container image's sidecar role."""
    from persona_service.process.stack import Stack, envoy_command
    from persona_service.registry import MODULES

    settings = _settings()
    if not settings.edge_secret:
        print("persona-service: `edge` needs PERSONA_EDGE_SECRET, the same as its server's", file=sys.stderr)
        return 2
    stack = Stack(settings, MODULES)
    command = envoy_command(stack.write_envoy_config(access_log="/dev/stdout"), 1)
    if args.check:
        command += ["--mode", "validate"]
    os.execve(command[0], command, stack.envoy_env())
    return 0  # not reached


def _edge_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true", help="validate the configuration and exit")


def cmd_serve(args: argparse.Namespace) -> int:
    from persona_service.process.server import serve
    from persona_service.registry import MODULES

    serve(MODULES)
    return 0


def cmd_runner(args: argparse.Namespace) -> int:
    from persona_service.process.runner import run
    from persona_service.registry import MODULES

    run(MODULES)
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from persona_service.kernel.data import migrate
    from persona_service.kernel.data.embedded import database_url
    from persona_service.registry import MODULES

    migrate.upgrade(database_url(_settings()), MODULES.migrations)
    return 0


def cmd_settings(args: argparse.Namespace) -> int:
    from persona_service.kernel import settings as config

    print(config.markdown_table(args.settings_sections), end="")
    return 0


def kernel_commands() -> tuple[Command, ...]:
    from persona_service.kernel.command import Command

    return (
        Command("up", "run everything: PostgreSQL, Redis, migrations, gRPC servers, background workers, Envoy", cmd_up,
                _up_arguments),
        Command("serve", "run only the gRPC server (DATABASE_URL and REDIS_URL required)", cmd_serve),
        Command("runner", "run only a runner: streamed runs, durable tasks and the model's work (DATABASE_URL and "
                "REDIS_URL required)", cmd_runner),
        Command("edge", "run only Envoy, in front of the gRPC server on PERSONA_GRPC_PORT (PERSONA_EDGE_SECRET "
                "required; the image's sidecar role)", cmd_edge, _edge_arguments),
        Command("migrate", "apply database migrations", cmd_migrate),
        Command("status", "the running instance (`up`) and whether it is ready: one JSON line, with a check of each "
                "remote model provider; exit 1 when not ready",
                cmd_status, _status_arguments, standalone=True),
        Command("settings", "print every environment variable: type, default and meaning (a Markdown table)", cmd_settings,
                standalone=True),
    )


def _attach_instance() -> None:
    """Point a command that acts on the running instance at it (process.instances),
    unless PERSONA_DATA_DIR or DATABASE_URL already says where to act."""
    from persona_service.kernel import settings as config
    from persona_service.process import instances as runtime

    if os.environ.get("PERSONA_DATA_DIR") or os.environ.get("DATABASE_URL"):
        return
    instance = runtime.locate(_settings().data_dir)
    os.environ.update(PERSONA_DATA_DIR=instance.data_dir, DATABASE_URL=instance.database_url,
                      REDIS_URL=instance.redis_url)
    config.forget()
    print(f"persona-service: using the instance at {instance.http_url} (PERSONA_DATA_DIR={instance.data_dir})",
          file=sys.stderr)


def variables(sections: Sequence[type[BaseSettings]]) -> tuple[str, ...]:
    """Every environment variable with its default, for --help."""
    from persona_service.kernel import settings as config

    lines = ["environment variables (default; `persona-service settings` explains each):"]
    for section in sections:
        for field, name in zip(section.model_fields.values(), config.env_names(section), strict=True):
            default = field.get_default(call_default_factory=True)
            shown = ",".join(map(str, default)) if isinstance(default, tuple | list) else default
            lines.append(f"  {name}={'' if shown is None else shown}")
    return tuple(lines)


@dataclass(frozen=True)
class Entry:
    """One command as the CLI dispatches it: its functions as objects or as
    `module:name` references (cli_index), imported only when it runs."""

    name: str
    help: str
    run: Callable[[argparse.Namespace], int] | str
    arguments: Callable[[argparse.ArgumentParser], None] | str | None
    on_instance: bool
    standalone: bool


def _resolve(ref: Any) -> Any:
    if not isinstance(ref, str):
        return ref
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def _table() -> tuple[list[Entry], Callable[[], Sequence[type[BaseSettings]]], tuple[str, ...]]:
    """The commands, the settings sections (when a command runs) and the
    --help epilog: from the generated index, or from the registry when
    PERSONA_EXTRA_MODULES adds modules the index cannot know."""
    if os.environ.get("PERSONA_EXTRA_MODULES"):
        from persona_service.registry import MODULES

        entries = [Entry(c.name, c.help, c.run, c.arguments, c.on_instance, c.standalone)
                   for c in (*kernel_commands(), *MODULES.commands)]
        return entries, settings_sections, variables(settings_sections())
    from persona_service import cli_index

    return ([Entry(*row) for row in cli_index.COMMANDS], lambda: tuple(map(_resolve, cli_index.SETTINGS)),
            cli_index.VARIABLES)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("persona-service")
    except PackageNotFoundError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    entries, sections, epilog = _table()
    parser = argparse.ArgumentParser(
        prog="persona-service", description="Persona Service", formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(epilog))
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    # The top level takes no option with a value: the first word is the command.
    chosen = next((word for word in argv if not word.startswith("-")), None)
    for entry in entries:
        command_parser = sub.add_parser(entry.name, help=entry.help, description=entry.help)
        if entry.name == chosen and entry.arguments is not None:
            _resolve(entry.arguments)(command_parser)
    args = parser.parse_args(argv)
    entry = next(e for e in entries if e.name == args.command)
    from persona_service.kernel import settings as config
    from persona_service.kernel.data.embedded import DataDirectoryMajorError
    from persona_service.process import instances as runtime

    if entry.name == "up":
        # At once, before the modules load (seconds on a busy machine): a second `up` on this data dir is
        # told that one runs (never a clash on its ports), and from now on `status --wait` watches this
        # start, rather than an earlier `up`'s record.
        default = config.Settings.model_fields["data_dir"].default
        data_dir = pathlib.Path(os.environ.get("PERSONA_DATA_DIR") or default)
        try:
            runtime.claim(data_dir)
        except runtime.AlreadyRunning as exc:
            print(f"persona-service: {exc}", file=sys.stderr)
            return 1
        runtime.record_start(data_dir)
    try:
        args.modules = None if entry.standalone else importlib.import_module("persona_service.registry").MODULES
        args.settings_sections = sections()
        if entry.on_instance:
            _attach_instance()
        config.check(args.settings_sections)
        return int(_resolve(entry.run)(args))
    except config.InvalidSetting as exc:
        print(f"persona-service: {exc}", file=sys.stderr)
        return 2
    except (runtime.NoInstance, DataDirectoryMajorError) as exc:
        print(f"persona-service: {exc}", file=sys.stderr)
        return 1


def _exit_at_once(code: int) -> None:
    """End a process the stack started (`python -m persona_service.cli serve|runner|worker`) once its
    command has closed what it opened: the interpreter's teardown of its modules (no Python frame left,
    holding the GIL) took 2-8 s on a busy 2-core machine, and every stack's stop waited for it."""
    import logging

    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit_at_once(main())
