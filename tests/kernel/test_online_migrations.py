"""Online migrations (docs/online-migrations.md): every new revision is an
expand step the previous release keeps working on, unless it is marked a
contract step (`phase = "contract"`, for a release after the code stopped
using what it removes). A static check of each revision's `upgrade()`; the
full check, the previous commit's server serving on the new schema, is
scripts/check_online_migration.py (about a minute)."""

from __future__ import annotations

import ast
import pathlib
import re
import textwrap

import pytest
from alembic.script import ScriptDirectory
from persona_service.kernel.data import migrate
from persona_service.registry import MODULES

# Revisions up to this one predate the rule (a deployed database has them).
BEFORE_THE_RULE = "0015"

# Alembic operations that remove or narrow what the previous release uses.
_CONTRACT_OPS = {"drop_table", "drop_column", "drop_constraint", "rename_table", "create_unique_constraint",
                 "create_check_constraint", "create_foreign_key", "create_primary_key"}
# Raw SQL that does the same, or blocks writes while it runs.
_CONTRACT_SQL = [
    (re.compile(r"\bDROP\s+(?!INDEX\b|NOT\s+NULL\b)", re.I), "drops something"),
    (re.compile(r"\bRENAME\b", re.I), "renames something"),
    (re.compile(r"\bSET\s+NOT\s+NULL\b", re.I), "makes a column NOT NULL"),
    (re.compile(r"\bALTER\s+COLUMN\s+\S+\s+(SET\s+DATA\s+)?TYPE\b", re.I), "changes a column's type"),
    (re.compile(r"\bADD\s+(COLUMN\s+)?(?=[^,;]*\bNOT\s+NULL\b)(?![^,;]*\bDEFAULT\b)", re.I),
     "adds a NOT NULL column without a default"),
    (re.compile(r"\bADD\s+CONSTRAINT\b(?![^;]*\bNOT\s+VALID\b)", re.I), "adds a validated constraint"),
    (re.compile(r"\bCREATE\s+(UNIQUE\s+)?INDEX\s+(?!CONCURRENTLY\b)", re.I),
     "builds an index without CONCURRENTLY (writes wait for the build)"),
]


# A swap (`phase = "swap"`) replaces a table with a new one of the same name in one transaction: the old
# one renamed aside, re-keyed on an index built beforehand, attached as a partition (0032). Statement by
# statement that reads as a break; these parts of it are allowed (everything else is still checked), and
# `make check-online-migration` is its real check.
# The shared swap (kernel/data/partition_swap.py, 0032 and 0033) also re-keys with UNIQUE ... USING INDEX and takes
# the old table's identity and triggers off it, the partitioned table taking them on in the same transaction.
_SWAP_SQL = re.compile(r"\bRENAME\s+(?:CONSTRAINT\s+\S+\s+)?TO\b|\bDROP\s+(?:CONSTRAINT|IDENTITY|TRIGGER)\b"
                       r"|\bADD\s+CONSTRAINT\s+\S+\s+(?:PRIMARY\s+KEY|\S+)\s+USING\s+INDEX\b", re.I)
SWAP_HELPER = pathlib.Path(__file__).resolve().parents[2] / "server/persona_service/kernel/data/partition_swap.py"


def _phase(tree: ast.Module) -> str:
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "phase" for t in node.targets)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            return node.value.value
    return ""


def findings(source: str, entry: str = "upgrade", phase: str = "") -> list[str]:
    """What in a revision's `upgrade()` (and the module's functions and methods it calls) breaks the
    previous release or blocks it (empty for a contract step). A revision calling the shared swap
    must say it is one (its statements are checked with the swap's own, `test_the_shared_swap_...`)."""
    tree = ast.parse(source)
    phase = phase or _phase(tree)
    if phase == "contract":
        return []
    functions = _reached_from(entry, tree)
    calls = [call for function in functions for call in _op_calls(function)]
    created = {_text(call.args[0]) for call in calls if call.func.attr == "create_table" and call.args}
    found = [] if phase == "swap" or "partition_swap" not in source else ["calls the shared swap unmarked"]
    for call in calls:
        op, kwargs = call.func.attr, {k.arg: k.value for k in call.keywords}
        # (a constraint's or an index's table is its second argument; one this revision creates is new)
        new_table = len(call.args) > 1 and _text(call.args[1]) in created
        if op in _CONTRACT_OPS and not (op.startswith("create_") and new_table):
            found.append(f"op.{op}")
        elif op == "alter_column" and ("new_column_name" in kwargs or "type_" in kwargs
                                       or _is_false(kwargs.get("nullable"))):
            found.append("op.alter_column renames, retypes or makes NOT NULL")
        elif op == "add_column" and any(_not_null_without_default(a) for a in call.args[1:]):
            found.append("op.add_column NOT NULL without a server_default")
        elif op == "create_index" and not new_table and not _is_true(kwargs.get("postgresql_concurrently")):
            found.append("op.create_index without postgresql_concurrently=True (writes wait for the build)")
        elif op == "execute" and call.args:
            sql = _text(call.args[0])
            scanned = _SWAP_SQL.sub(" ", sql) if phase == "swap" else sql
            found += [f"op.execute {why}: {sql[:80]!r}" for pattern, why in _CONTRACT_SQL if pattern.search(scanned)]
    return found


def _reached_from(name: str, tree: ast.Module) -> list[ast.FunctionDef]:
    """The module-level function `name` (or a method, `Class.method`) and the functions and methods
    (`self.method()`) it calls, directly or not (a revision's helpers)."""
    defined = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        defined |= {f"{cls.name}.{m.name}": m for m in cls.body if isinstance(m, ast.FunctionDef)}
        defined |= {f"self.{m.name}": m for m in cls.body if isinstance(m, ast.FunctionDef)}
    reached: dict[str, ast.FunctionDef] = {}
    pending = [name]
    while pending:
        current = pending.pop()
        if current in reached or current not in defined:
            continue
        reached[current] = defined[current]
        pending += [_called(n.func) for n in ast.walk(defined[current]) if isinstance(n, ast.Call)]
    return list(reached.values())


def _called(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        return f"self.{func.attr}"
    return ""


def _op_calls(function: ast.FunctionDef):
    for node in ast.walk(function):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "op"):
            yield node


def _text(node: ast.expr) -> str:
    """A string argument's text; an f-string's placeholders as `x`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "x" for v in node.values)
    return ""


def _is_true(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _is_false(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _not_null_without_default(node: ast.expr) -> bool:
    if not (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "Column"):
        return False
    kwargs = {k.arg: k.value for k in node.keywords}
    not_null = _is_false(kwargs.get("nullable")) or _is_true(kwargs.get("primary_key"))
    return not_null and "server_default" not in kwargs


def _revisions_after(base: str) -> list[tuple[str, pathlib.Path]]:
    scripts = ScriptDirectory.from_config(migrate.alembic_config("postgresql://unused", MODULES.migrations))
    chain = list(reversed(list(scripts.walk_revisions())))  # base first
    ids = [script.revision for script in chain]
    return [(s.revision, pathlib.Path(s.path)) for s in chain[ids.index(base) + 1:]]


def test_every_new_revision_is_an_expand_step_or_marked_a_contract_step():
    checked = _revisions_after(BEFORE_THE_RULE)
    assert checked, "no revision after the rule's start: is BEFORE_THE_RULE in the chain?"
    broken = {revision: f for revision, path in checked if (f := findings(path.read_text()))}
    assert not broken, broken


EXPAND = {
    "a nullable column": "op.add_column('personas', sa.Column('tone', sa.String(20)))",
    "a NOT NULL column with a default": "op.add_column('personas', sa.Column('tone', sa.String(20), "
                                        "nullable=False, server_default='calm'))",
    "an index built concurrently": "op.create_index('ix_p_tone', 'personas', ['tone'], postgresql_concurrently=True)",
    "a new table and its index": "op.create_table('moods', sa.Column('id', sa.String(40), primary_key=True))\n"
                                 "op.create_index('ix_moods_id', 'moods', ['id'])",
    "raw SQL, concurrently": "op.execute(f\"CREATE INDEX CONCURRENTLY {NAME} ON personas (tone)\")\n"
                             "op.execute('DROP INDEX CONCURRENTLY IF EXISTS ix_old')",
    "a constraint added NOT VALID": "op.execute('ALTER TABLE personas ADD CONSTRAINT c CHECK (tone <> \\'\\') "
                                    "NOT VALID')",
}
CONTRACT = {
    "a dropped column": "op.drop_column('personas', 'intent')",
    "a dropped table": "op.drop_table('personas')",
    "a renamed column": "op.alter_column('personas', 'intent', new_column_name='purpose')",
    "a retyped column": "op.alter_column('personas', 'intent', type_=sa.Text())",
    "a column made NOT NULL": "op.alter_column('personas', 'slug', nullable=False)",
    "a NOT NULL column without a default": "op.add_column('personas', sa.Column('tone', sa.String(20), "
                                           "nullable=False))",
    "a blocking index": "op.create_index('ix_p_tone', 'personas', ['tone'])",
    "a new unique constraint": "op.create_unique_constraint('uq_slug', 'personas', ['slug'])",
    "raw SQL dropping a column": "op.execute('ALTER TABLE personas DROP COLUMN intent')",
    "raw SQL renaming": "op.execute('ALTER TABLE personas RENAME COLUMN intent TO purpose')",
    "raw SQL NOT NULL": "op.execute('ALTER TABLE personas ALTER COLUMN slug SET NOT NULL')",
    "raw SQL retyping": "op.execute('ALTER TABLE personas ALTER COLUMN intent TYPE text')",
    "raw SQL blocking index": "op.execute(f'CREATE INDEX {NAME} ON personas (tone)')",
}


SWAP = {
    "renames aside": "op.execute('ALTER TABLE audit_events RENAME TO audit_events_legacy')\n"
                     "op.execute('ALTER INDEX ix_a RENAME TO ix_a_legacy')\n"
                     "op.execute('ALTER TABLE audit_events_legacy RENAME CONSTRAINT a_not_null TO b_not_null')",
    "a re-key on an index built before": "op.execute('ALTER TABLE t DROP CONSTRAINT t_pkey')\n"
                                         "op.execute('ALTER TABLE t ADD CONSTRAINT k PRIMARY KEY USING INDEX k')",
    "a unique re-key on an index built before": "op.execute('ALTER TABLE t ADD CONSTRAINT k UNIQUE USING INDEX k')",
    "an identity and a trigger taken off": "op.execute('ALTER TABLE t ALTER COLUMN seq DROP IDENTITY')\n"
                                           "op.execute('DROP TRIGGER tr ON t')",
}
NOT_A_SWAP = {
    "a dropped column": "op.execute('ALTER TABLE personas DROP COLUMN intent')",
    "a renamed column": "op.execute('ALTER TABLE personas RENAME COLUMN intent TO purpose')",
    "a key built under the lock": "op.execute('ALTER TABLE t ADD CONSTRAINT t_key PRIMARY KEY (id, at)')",
    "a blocking index": "op.create_index('ix_p_tone', 'personas', ['tone'])",
}


def _revision(body: str, phase: str = "", helper: bool = False) -> str:
    marker = f"phase = {phase!r}\n" if phase else ""
    if helper:  # the body in a function upgrade() calls
        return (f"from alembic import op\n{marker}\n\ndef _step():\n" + textwrap.indent(body, "    ")
                + "\n\n\ndef upgrade() -> None:\n    _step()\n")
    return (f"import sqlalchemy as sa\nfrom alembic import op\nNAME = 'ix'\n{marker}\n\ndef upgrade() -> None:\n"
            + textwrap.indent(body, "    ") + "\n")


@pytest.mark.parametrize("body", SWAP.values(), ids=SWAP.keys())
def test_a_swap_passes_only_when_marked(body):
    assert findings(_revision(body)), "not caught"
    assert findings(_revision(body, phase="swap")) == []


@pytest.mark.parametrize("body", NOT_A_SWAP.values(), ids=NOT_A_SWAP.keys())
def test_a_swap_is_checked_for_the_rest(body):
    assert findings(_revision(body, phase="swap")), "not caught"


def test_the_functions_upgrade_calls_are_checked():
    assert findings(_revision(CONTRACT["a dropped column"], helper=True))


def test_the_shared_swap_is_checked_as_a_swap():
    """0032 and 0033 hand their upgrade to kernel/data/partition_swap.py: its statements are a swap's and
    nothing else (the indexes and triggers it re-creates from the catalog's own definitions are made on
    the new, empty table: built at once), and a revision using it is marked a swap."""
    source = SWAP_HELPER.read_text()
    assert findings(source, entry="MonthlySwap.upgrade", phase="swap") == []
    assert findings(source, entry="MonthlySwap.upgrade", phase="expand"), "not caught"
    assert findings("from persona_service.kernel.data.partition_swap import MonthlySwap\n")


@pytest.mark.parametrize("body", EXPAND.values(), ids=EXPAND.keys())
def test_an_expand_step_passes(body):
    assert findings(_revision(body)) == []


@pytest.mark.parametrize("body", CONTRACT.values(), ids=CONTRACT.keys())
def test_a_contract_step_fails_unless_marked(body):
    assert findings(_revision(body)), "not caught"
    assert findings(_revision(body, phase="contract")) == []
