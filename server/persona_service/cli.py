"""`persona-service`: run the service and administer it from the shell.

The composition root: the kernel's commands (`up`, `serve`, `migrate`,
`settings`) plus every command a registered module declares. Every settings
section is read before a command runs: a bad value is one line on stderr and
exit status 2."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

from persona_service.kernel import logs
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
    logs.configure(settings.log_level, settings.log_format)
    started = time.monotonic()
    stack = Stack(settings, MODULES)
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
    processes = ", ".join(f"{p.name} ×{p.count()}" for p in MODULES.processes) or "none"
    print(
        f"Persona Service is up in {time.monotonic() - started:.1f}s\n"
        f"  HTTP/JSON and gRPC (h2c): http://127.0.0.1:{settings.http_port}/v1\n"
        f"  gRPC server(s):           {', '.join(f'127.0.0.1:{p}' for p in stack.grpc_ports)}\n"
        f"  background processes:     {processes}\n"
        f"  data:                     {settings.data_dir}\n"
        f"  logs:                     {stack.log_dir}\n"
        f"Create an organization and key: persona-service bootstrap --org-name 'My Org'\n"
        f"Stop with Ctrl-C.",
        flush=True,
    )
    stop.wait()
    print("stopping…", flush=True)
    stack.stop()
    return 0


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
    Command("up", "run everything: PostgreSQL, Redis, migrations, gRPC servers, background workers, Envoy", cmd_up),
    Command("serve", "run only the gRPC server (DATABASE_URL and REDIS_URL required)", cmd_serve),
    Command("migrate", "apply database migrations", cmd_migrate),
    Command("settings", "print every environment variable: type, default and meaning (a Markdown table)", cmd_settings),
)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("persona-service")
    except PackageNotFoundError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="persona-service", description="Persona Service",
        epilog="Every setting is an environment variable: `persona-service settings` lists them with types, "
               "defaults and meanings.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in (*KERNEL_COMMANDS, *MODULES.commands):
        command_parser = sub.add_parser(command.name, help=command.help)
        if command.arguments is not None:
            command.arguments(command_parser)
        command_parser.set_defaults(func=command.run, modules=MODULES)
    args = parser.parse_args(argv)
    try:
        config.check(settings_sections())
        return args.func(args)
    except config.InvalidSetting as exc:
        print(f"persona-service: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
