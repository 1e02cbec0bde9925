"""Every write RPC in the protos is tried by the serial oracle (tests/oracle.py) or excluded here, with why.

The write RPCs are read from the descriptors (`(persona.v1.policy).write`) of every service in persona.v1, by the
race hunt's table (scripts/contract_inputs.py: the same write RPCs, each with an input built from the contract); the
covered ones are the RPCs the operations of every oracle table call (`Op.rpc`), read from the table modules
(`tests/**/test_*serial_oracle*_http.py`: each builds its tables with None clients, `_table(None, …)`, as it
does to name its pairs). A write RPC added later, or a service that gains one, fails here until a table tries it
or this file says why not."""

from __future__ import annotations

import functools
import inspect

from oracle import contract, table_builders

# Writes that make a new aggregate: two at once never share one, so no pair of them has a serial order to keep.
CREATES = {
    "ChatService.CreateChatSession",
    "WebhookService.CreateWebhookEndpoint",
    # (A SCIM user's create is tried by the users' table: a new user given the address a PUT gives at once.)
    "PersonaService.CreatePersona",
    "PersonaService.StreamCreatePersona",
    "PersonaService.ImportPersonaCard",
    # (A listing is made of a persona it holds FOR SHARE: the persona's table fires one beside the persona's writes.)
    "MarketplaceService.CreateListing",
    # A key, a token and a setting are made within their tables (a key's use creates one; a second token beside
    # the one revoked; an update of a setting not yet set upserts it), so none is listed here.
}

# Writes tried by a test of their own instead of an oracle table.
ELSEWHERE = {
    # The processor's events: tests/billing/test_stripe.py holds a redelivery and an older event racing a newer one.
    "BillingService.ReceiveStripeEvent",
    # (BuildOneDsarExport claims the oldest pending export of any organization: the DSAR build's table calls it until
    # its member's export is built, beside the writes of the data it exports.)
}

# Not tried yet: none (issue 45 gave every service's writes a table; a service whose aggregates are still to be
# declared and tried is named here with why, until its table lands).
PENDING: set[str] = set()


def _write_rpcs() -> dict[str, set[str]]:
    """Every service in persona.v1 with write RPCs: its write RPCs' names, by service name."""
    found: dict[str, set[str]] = {}
    for rpc in contract().write_rpcs():
        found.setdefault(rpc.service, set()).add(rpc.name)
    return found


@functools.cache
def _covered() -> frozenset[str]:
    """The RPCs the oracle tables' operations call (by RPC name: the services' method names are distinct)."""
    covered: set[str] = set()
    for _, build in table_builders():
        table = build(*[None] * len(inspect.signature(build).parameters))
        covered |= {op.rpc for op in table.ops if op.rpc}
    return frozenset(covered)


def test_every_write_rpc_is_tried_by_the_oracle_or_excluded_with_a_reason():
    writes = {f"{service}.{rpc}" for service, rpcs in _write_rpcs().items() for rpc in rpcs}
    covered = _covered()
    untried = {w for w in writes if w.split(".")[1] not in covered} - CREATES - ELSEWHERE - PENDING
    assert untried == set(), f"write RPCs no oracle table tries and no exclusion names: {sorted(untried)}"


def test_the_exclusions_name_write_rpcs_no_table_tries():
    """An exclusion of an RPC that is not a write (renamed, removed) is stale; so is a create or an 'elsewhere'
    that a table now tries. (A pending one may be tried already: the table lands before this list is trimmed.)"""
    writes = {f"{service}.{rpc}" for service, rpcs in _write_rpcs().items() for rpc in rpcs}
    assert (CREATES | ELSEWHERE | PENDING) - writes == set()
    covered = _covered()
    assert {w for w in CREATES | ELSEWHERE if w.split(".")[1] in covered} == set()


def test_the_lock_order_docs_concurrency_states_is_the_declared_one():
    """docs/concurrency.md's lock order names the aggregates in `aggregates.ORDER` as the registry's imports declare
    them (in a process of its own: a test that imported a module first would declare in another order)."""
    import re
    import subprocess
    import sys

    from oracle import ROOT

    declared = subprocess.run(
        [sys.executable, "-c", "import persona_service.registry\nfrom persona_service.kernel.data import aggregates\n"
         "print(' '.join(a.name for a in aggregates.ORDER))"],
        capture_output=True, text=True, check=True, timeout=120).stdout.split()
    doc = (ROOT / "docs" / "concurrency.md").read_text()
    stated = doc.split("2. aggregate roots in `aggregates.ORDER`", 1)[1].split("; several roots", 1)[0]
    assert re.findall(r"`(\w+)`", stated.split(":", 1)[1]) == declared
