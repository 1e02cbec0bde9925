"""`persona-service`: run the service and administer it from the shell.

The composition root: the kernel's commands (`up`, `serve`, `migrate`,
`settings`) plus every command a registered module declares. Every settings
section is read before a command runs: a bad value is one line on stderr and
exit status 2."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

from persona_service.kernel import logs, runtime
from persona_service.kernel import settings as config
from persona_service.kernel.module import Command
from persona_service.registry import MODULES


def settings_sections() -> tuple:
    """Every settings section: the kernel's, the providers', then each module's."""
    from persona_service.providers.settings import ProviderSettings

    return (config.Settings, ProviderSettings, *MODULES.settings_sections)


def _settings():
    return config.load()


def cmd_up(args) -> int:
    from persona_service.kernel.stack import Stack, StackError

    settings = _settings()
    if args.servers is not None:
        settings = settings.model_copy(update={"server_processes": args.servers})
    logs.configure(settings.log_level, settings.log_format)
    started = time.monotonic()
    stack = Stack(settings, MODULES, workers=args.workers)
    stop = threading.Event()
    # Closing the terminal (SIGHUP) stops the stack in order like Ctrl-C.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    try:
        stack.start()
    except StackError as exc:
        stack.stop()
        print(f"persona-service: {exc}", file=sys.stderr)
        return 1
    runtime.announce(runtime.Instance(os.getpid(), str(settings.data_dir), stack.http_url, stack.database_url,
                                      stack.redis_url))
    processes = ", ".join(f"{p.name} ×{p.count() if args.workers is None else args.workers}"
                          for p in MODULES.processes) or "none"
    print(
        f"Persona Service is up in {time.monotonic() - started:.1f}s\n"
        f"  HTTP/JSON and gRPC (h2c): http://127.0.0.1:{settings.http_port}/v1\n"
        f"  gRPC server(s):           {', '.join(f'127.0.0.1:{p}' for p in stack.grpc_ports)}\n"
        f"  background processes:     {processes}\n"
        f"  data:                     {settings.data_dir}\n"
        f"  logs:                     {stack.log_dir}\n"
        f"Create an organization and key (from any shell): persona-service bootstrap --org-name 'My Org'\n"
        f"Stop with Ctrl-C.",
        flush=True,
    )
    try:
        stop.wait()
    finally:
        runtime.withdraw(str(settings.data_dir))
    print("stopping…", flush=True)
    stack.stop()
    return 0


def _up_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--servers", type=int, metavar="N", help="gRPC server processes (default: "
                        "PERSONA_SERVER_PROCESSES); Envoy gets as many worker threads, within the cores")
    parser.add_argument("--workers", type=int, metavar="M", help="processes of each background kind (webhook "
                        "delivery; default: each kind's own count)")


def cmd_status(args) -> int:
    """The running instance and whether it is ready (`--wait`: until it is)."""
    import json
    import urllib.error
    import urllib.request

    settings = _settings()
    explicit = bool(os.environ.get("PERSONA_DATA_DIR"))

    def find() -> runtime.Instance | None:
        if explicit:
            return runtime.read(settings.data_dir)
        try:
            return runtime.locate(settings.data_dir)
        except runtime.NoInstance:
            return None

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
        time.sleep(0.5)
        instance = instance or find()
    if instance is None:
        print("persona-service: no running Persona Service found (start it with `make up`)", file=sys.stderr)
        return 1
    print(json.dumps({"url": instance.http_url, "dataDir": instance.data_dir, "pid": instance.pid, "ready": ready}))
    return 0 if ready else 1


def _status_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wait", type=float, metavar="SECONDS", default=0,
                        help="wait up to this long for the instance to start and be ready")


def cmd_edge(args) -> int:
    """Envoy for the server process of this pod or machine (PERSONA_GRPC_PORT on
    127.0.0.1), in the foreground: the container image's sidecar role."""
    from persona_service.kernel.stack import Stack, envoy_command

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


def cmd_serve(args) -> int:
    from persona_service.kernel.server import serve

    serve(MODULES)
    return 0


def cmd_migrate(args) -> int:
    from persona_service.kernel.db import migrate
    from persona_service.kernel.embedded import database_url

    migrate.upgrade(database_url(_settings()), MODULES.migrations)
    return 0


def cmd_settings(args) -> int:
    print(config.markdown_table(settings_sections()), end="")
    return 0


KERNEL_COMMANDS = (
    Command("up", "run everything: PostgreSQL, Redis, migrations, gRPC servers, background workers, Envoy", cmd_up,
            _up_arguments),
    Command("serve", "run only the gRPC server (DATABASE_URL and REDIS_URL required)", cmd_serve),
    Command("edge", "run only Envoy, in front of the gRPC server on PERSONA_GRPC_PORT (PERSONA_EDGE_SECRET "
            "required; the image's sidecar role)", cmd_edge, _edge_arguments),
    Command("migrate", "apply database migrations", cmd_migrate),
    Command("status", "the running instance (`up`) and whether it is ready: one JSON line; exit 1 when not",
            cmd_status, _status_arguments),
    Command("settings", "print every environment variable: type, default and meaning (a Markdown table)", cmd_settings),
)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("persona-service")
    except PackageNotFoundError:
        return "unknown"


def _attach_instance() -> None:
    """Point a command that acts on the running instance at it (kernel.runtime),
    unless PERSONA_DATA_DIR or DATABASE_URL already says where to act."""
    if os.environ.get("PERSONA_DATA_DIR") or os.environ.get("DATABASE_URL"):
        return
    instance = runtime.locate(_settings().data_dir)
    os.environ.update(PERSONA_DATA_DIR=instance.data_dir, DATABASE_URL=instance.database_url,
                      REDIS_URL=instance.redis_url)
    config.forget()
    print(f"persona-service: using the instance at {instance.http_url} (PERSONA_DATA_DIR={instance.data_dir})",
          file=sys.stderr)


def _variables() -> str:
    """Every environment variable with its default, for --help."""
    lines = ["environment variables (default; `persona-service settings` explains each):"]
    for section in settings_sections():
        for field, name in zip(section.model_fields.values(), config.env_names(section), strict=True):
            default = field.get_default(call_default_factory=True)
            shown = ",".join(map(str, default)) if isinstance(default, tuple | list) else default
            lines.append(f"  {name}={'' if shown is None else shown}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="persona-service", description="Persona Service", formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_variables())
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in (*KERNEL_COMMANDS, *MODULES.commands):
        command_parser = sub.add_parser(command.name, help=command.help, description=command.help)
        if command.arguments is not None:
            command.arguments(command_parser)
        command_parser.set_defaults(func=command.run, modules=MODULES, on_instance=command.on_instance)
    args = parser.parse_args(argv)
    try:
        if args.on_instance:
            _attach_instance()
        config.check(settings_sections())
        return args.func(args)
    except config.InvalidSetting as exc:
        print(f"persona-service: {exc}", file=sys.stderr)
        return 2
    except runtime.NoInstance as exc:
        print(f"persona-service: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
