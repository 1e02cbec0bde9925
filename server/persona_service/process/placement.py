"""Where `up` lets its background processes run on a shared machine (issue 50, quiet tenants first): runners
(the model's work) and stream servers (stream views) are pinned to a share of the cores `up` may use, the last
ones; unary servers, Envoy, PostgreSQL and Redis keep every core. Under three organizations' streams a quiet
organization's read p99 was x3.0-8.7 of alone with the runner at SCHED_IDLE and x2.2-2.7 with it pinned to one
core of two: a runner's threads at idle priority still take a core from a unary call the moment they wake
on it, pinned they wake only on theirs. A runner also keeps its own CPU priority (process.runner)."""

from __future__ import annotations

import logging
import os

log = logging.getLogger("persona_service.placement")


def background_cpus(share: float, available: set[int] | None = None) -> set[int] | None:
    """The cores runners and stream servers are pinned to: the last `share` of `available` (those this process
    may use), at least one; None (not pinned) with `share` 1, fewer than two cores, or no CPU affinity here."""
    if available is None:
        if not hasattr(os, "sched_getaffinity"):
            return None
        available = os.sched_getaffinity(0)
    cores = sorted(available)
    count = max(1, int(len(cores) * share))
    if len(cores) < 2 or count >= len(cores):
        return None
    return set(cores[-count:])


def pin(pid: int, cpus: set[int]) -> None:
    """Pin every thread `pid` has to `cpus` (threads it starts later inherit it); a process that is gone
    already is left (the supervisor starts it again, pinned)."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        threads = [str(pid)]
    for thread in threads:
        try:
            os.sched_setaffinity(int(thread), cpus)
        except ProcessLookupError:
            continue
        except OSError as exc:  # (a container that forbids it): it runs unpinned
            log.warning("process %d not pinned to cores %s: %s", pid, sorted(cpus), exc)
            return
