"""The caller's membership, held first: every write with a caller (`MethodMeta.holds_caller`) begins its unit of
work by holding the caller's membership `FOR SHARE` (an API key's: its creator's), through the credential store
port (`Authenticator.hold`), before the servicer runs a statement. The caller's erasure locks that membership
`FOR UPDATE` before it erases or revokes anything, so each write runs wholly before the erasure or answers 401
after it, as the caller's next call would: serial by construction, for every write, with nothing for a service
to remember (docs/concurrency.md "The caller's membership, first").

`due` marks the unit of work (the Commit stage, each run of the operation; a durable run before its
operation) so that the lock guard (kernel.data.aggregates, on in the test stacks) refuses any statement that
would run before the hold: a stage put between them, a path that skips it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from persona_service.kernel.data.aggregates import expect_hold, holding
from persona_service.kernel.transport.context import unit_of_work
from persona_service.kernel.transport.stages.call import Call, Stage

if TYPE_CHECKING:
    from persona_service.kernel.transport.auth import Authenticator


def needed(call: Call) -> bool:
    return call.meta.holds_caller and call.ctx.principal is not None


def due(call: Call) -> None:
    """Marks the call's unit of work, when it must begin with the hold, for the lock guard. What the stages before
    the operation ran on its connection (authentication's read, the limits' and the quota window's record, each on a
    cache miss) is committed first: it holds nothing past here, and the hold is the unit of work's first statement
    (docs/concurrency.md "The caller's membership, first")."""
    if needed(call):
        unit_of_work(call.ctx).begin_again()  # (nothing to do when no stage opened the connection)
        expect_hold(unit_of_work(call.ctx).conn)


def hold(authenticator: Authenticator, call: Call) -> None:
    """The hold itself, as the unit of work's first statement (401 when the caller is no longer a member)."""
    if needed(call):
        conn = unit_of_work(call.ctx).conn
        with holding(conn):
            authenticator.hold(call.ctx.caller, conn)


class HoldCaller(Stage):
    """The last stage before a unary write's operation (after Commit, so each run of it holds again)."""

    def __init__(self, authenticator: Authenticator) -> None:
        self.authenticator = authenticator

    def __call__(self, call: Call) -> object:
        hold(self.authenticator, call)
        return self.then(call)
