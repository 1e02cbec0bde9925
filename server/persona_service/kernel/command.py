"""A `persona-service <name>` subcommand, as a module declares it (`Module.commands`,
re-exported by kernel.module). Its own module so that a command's file imports it
without the rest of the kernel: `persona-service mint-jwt` starts in a fraction
of a second (persona_service/cli.py)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    """A `persona-service <name>` subcommand."""

    name: str
    help: str
    run: Callable[[argparse.Namespace], int]
    arguments: Callable[[argparse.ArgumentParser], None] | None = None
    # It acts on the running instance's database: with no PERSONA_DATA_DIR or
    # DATABASE_URL set, the CLI finds the instance `up` runs (process.instances)
    # or refuses, rather than start an embedded database of its own.
    on_instance: bool = False
    # It needs nothing the assembled modules provide (id prefixes, config keys,
    # migrations, `args.modules` is None): the CLI runs it without importing
    # them, which spares a second of imports (`mint-jwt`, `status`).
    standalone: bool = False

