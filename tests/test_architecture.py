"""The layout's rules, checked on the source.

Import contracts (`.importlinter`, run by `lint-imports`): the kernel
imports no domain, domains reach each other only through their public
surface (`<domain>/api.py`), services and repositories know nothing of gRPC, servicers nothing
of SQLAlchemy. AST rules here check what imports cannot show: SQL is built
only in repositories and tables, services never commit or open transactions,
a domain names no other domain's tables in SQL (nor in its migrations), the
kernel names no domain, rows cross layers as typed records, only the kernel
sees the App (servicers get `ServicerDeps`). `test_each_planted_violation_fails`
plants each kind of violation in a copy of the package and expects the
check to fail, so none of these can pass vacuously.
"""

from __future__ import annotations

import ast
import os
import pathlib
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest
from persona_service.registry import MODULES

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = REPO / "server" / "persona_service"
CONTRACTS = REPO / ".importlinter"
# Infrastructure shared by every layer; neither kernel nor a domain.
SHARED = {"kernel", "providers"}


# --- import contracts -------------------------------------------------------------


def lint_imports(package: pathlib.Path) -> str:
    """The contracts' report on `package` (a persona_service folder): '' when all are kept."""
    env = {**os.environ, "PYTHONPATH": str(package.parent)}
    run = subprocess.run([pathlib.Path(sys.executable).parent / "lint-imports", "--config", CONTRACTS, "--no-cache"],
                         cwd=package.parent, env=env, capture_output=True, text=True)
    return "" if run.returncode == 0 else run.stdout + run.stderr


def test_import_contracts_are_kept():
    assert lint_imports(PACKAGE) == ""


def test_the_contracts_name_every_domain():
    """A new domain is covered by the layers and independence contracts only once it is listed there."""
    text = CONTRACTS.read_text()
    independent = set(re.findall(r"^    persona_service\.(\w+)$", text.split("[importlinter:contract:domains]")[1]
                                 .split("ignore_imports")[0], re.M))
    layered = set(re.findall(r"persona_service\.(\w+)", re.search(r"^    persona_service\.admin :.*$", text, re.M)[0]))
    registered = {module.name for module in MODULES.all}
    assert independent == layered == registered


# --- AST rules ----------------------------------------------------------------------


def _files(root: pathlib.Path) -> Iterator[tuple[pathlib.Path, ast.Module]]:
    for path in sorted(root.rglob("*.py")):
        yield path.relative_to(root), ast.parse(path.read_text())


def _docstrings(tree: ast.Module) -> set[int]:
    kinds = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {id(node.body[0].value) for node in ast.walk(tree) if isinstance(node, kinds) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def _strings(tree: ast.Module) -> Iterator[ast.Constant]:
    """String constants other than docstrings."""
    docstrings = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node


def _is_sql_home(path: pathlib.Path) -> bool:
    return path.name in ("repository.py", "tables.py") or path.name.endswith("_repository.py") \
        or path.parts[:2] == ("kernel", "db") or _is_migration(path)


def _is_migration(path: pathlib.Path) -> bool:
    """A revision in a module's own migrations (`<domain>/migrations/`)."""
    return len(path.parts) == 3 and path.parts[1] == "migrations"


# Statements as SQL text (keywords in capitals, as this code base writes them).
SQL_TEXT = re.compile(r"^\s*(?:SELECT|INSERT INTO|UPDATE \w+ SET|DELETE FROM|WITH \w+ AS|SET LOCAL|LOCK TABLE|TRUNCATE|"
                      r"LISTEN|NOTIFY|CREATE|ALTER|DROP)\b", re.M)
# SQLAlchemy's statement and expression constructors.
SQL_BUILDERS = {"text", "select", "insert", "update", "delete", "exists", "literal", "literal_column", "column",
                "table", "and_", "or_", "not_", "case", "cast", "func", "tuple_", "true", "false", "null",
                "bindparam", "union", "union_all", "values", "desc", "asc", "nulls_last"}


def sql_outside_repositories(root: pathlib.Path) -> list[str]:
    """SQL is written in repositories (and tables, kernel.db, migrations) only."""
    offenders = []
    for path, tree in _files(root):
        if _is_sql_home(path):
            continue
        builders = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and (node.module or "").startswith("sqlalchemy") for alias in node.names
                    if alias.name in SQL_BUILDERS}
        offenders += [f"{path}:{node.lineno} SQL text" for node in _strings(tree) if SQL_TEXT.search(node.value)]
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Name) and node.func.id in builders:
                offenders.append(f"{path}:{node.lineno} builds SQL with {node.func.id}()")
            if isinstance(node.func, ast.Attribute) and node.func.attr == "exec_driver_sql":
                offenders.append(f"{path}:{node.lineno} runs driver SQL")
    return offenders


# Ending or opening a transaction; a service works in the caller's unit of
# work (savepoints, `begin_nested`, are its own business).
TRANSACTION_CALLS = {"commit", "rollback", "begin", "connect"}


def services_that_commit_or_know_grpc(root: pathlib.Path) -> list[str]:
    offenders = []
    for path, tree in _files(root):
        if path.name != "service.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                offenders += [f"{path}:{node.lineno} imports {n}" for n in names if n.split(".")[0] == "grpc"]
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in TRANSACTION_CALLS:
                offenders.append(f"{path}:{node.lineno} calls .{node.func.attr}()")
    return offenders


def _table_owners(root: pathlib.Path) -> dict[str, str]:
    owners = {}
    for path in [*root.glob("*/tables.py"), root / "kernel" / "db" / "tables.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__tablename__"
                                                    for t in node.targets):
                owners[node.value.value] = path.relative_to(root).parts[0]  # type: ignore[attr-defined]
    return owners


TABLE_REFERENCE = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE|TRUNCATE)\s+(\w+)")


def other_domains_tables(root: pathlib.Path) -> list[str]:
    """SQL text names only its own domain's tables (the kernel's, its own);
    another domain's are reached through that domain's service."""
    owners = _table_owners(root)
    offenders = []
    for path, tree in _files(root):
        if path.name == "tables.py":  # foreign keys are the schema's, owned by the migrations
            continue
        for node in _strings(tree):
            for table in TABLE_REFERENCE.findall(node.value):
                if owners.get(table, path.parts[0]) != path.parts[0]:
                    offenders.append(f"{path}:{node.lineno} names {owners[table]}'s table {table}")
    return offenders


# Tables a migration touches: named as a string of their own (op.create_table,
# op.add_column...) or in SQL text.
MIGRATED_TABLE = re.compile(r"^(\w+)$|\b(?:FROM|JOIN|INTO|UPDATE|TABLE|TRUNCATE|ON)\s+(\w+)")


def _migrated_tables(tree: ast.Module, owners: dict[str, str]) -> Iterator[tuple[int, str]]:
    for node in _strings(tree):
        for match in MIGRATED_TABLE.finditer(node.value):
            table = match.group(1) or match.group(2)
            if table in owners:
                yield node.lineno, table


def migrations_touching_other_modules_tables(root: pathlib.Path) -> list[str]:
    """A module's migrations create and change only its own tables (a
    revision that needs several modules' tables lives in the shared
    `migrations/versions/`)."""
    owners = _table_owners(root)
    return [f"{path}:{line} touches {owners[table]}'s table {table}" for path, tree in _files(root)
            if _is_migration(path) for line, table in _migrated_tables(tree, owners) if owners[table] != path.parts[0]]


def shared_revisions_of_one_module(versions: pathlib.Path, root: pathlib.Path = PACKAGE) -> list[str]:
    """A revision in the shared `migrations/versions/` touches the kernel's
    tables or several modules'; one touching a single module's tables
    belongs in that module's `migrations/`."""
    owners = _table_owners(root)
    offenders = []
    for path in sorted(versions.glob("*.py")):
        touched = {owners[table] for _, table in _migrated_tables(ast.parse(path.read_text()), owners)}
        if len(touched) == 1 and touched != {"kernel"}:
            offenders.append(f"{path.name} touches only {touched.pop()}'s tables: move it to its migrations/")
    return offenders


def test_shared_revisions_touch_the_kernel_or_several_modules(tmp_path):
    assert shared_revisions_of_one_module(REPO / "migrations" / "versions") == []
    planted = tmp_path / "0999_planted.py"
    planted.write_text("from alembic import op\n\n\ndef upgrade():\n    op.drop_column('invoices', 'pdf_key')\n")
    assert shared_revisions_of_one_module(tmp_path) == ["0999_planted.py touches only billing's tables: move it to "
                                                        "its migrations/"]


def _domains(root: pathlib.Path) -> set[str]:
    """The registry's modules (read from its imports, so that a copy's registry counts)."""
    tree = ast.parse((root / "registry.py").read_text())
    return {node.module.split(".")[1] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
            and node.module and node.module.endswith(".module") and not node.module.startswith("persona_service.kernel")}


# Domain names that are also the kernel's own vocabulary, as whole words.
KERNEL_WORDS = {
    "config",  # the kernel's config-key mechanism (config_keys, `config:*` scopes)
    "events",  # the outbox's events
    "admin",  # platform administration (`platform:admin`, the `admin` role)
    "files",  # files on disk, descriptor files
}
# Names of the spec's scopes and of a general port that read like a domain's name.
KERNEL_TOKENS = {"personas:read", "personas:write", "chat:read", "chat:write", "billing_period"}


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.split(r"[^A-Za-z0-9]+|_", re.sub(r"([a-z])([A-Z])", r"\1_\2", text)) if w}


def kernel_naming_domains(root: pathlib.Path) -> list[str]:
    """The kernel names no domain (in names and strings; docstrings and comments may explain)."""
    domains = _domains(root) - KERNEL_WORDS
    offenders = []
    for path, tree in _files(root / "kernel"):
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                texts = [node.id]
            elif isinstance(node, ast.Attribute):
                texts = [node.attr]
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                texts = [node.name]
            elif isinstance(node, ast.arg):
                texts = [node.arg]
            elif isinstance(node, ast.keyword) and node.arg:
                texts = [node.arg]
            elif isinstance(node, ast.alias):
                texts = [node.name, node.asname or ""]
            else:
                continue
            offenders += [f"kernel/{path}:{getattr(node, 'lineno', '?')} names {text!r}" for text in texts
                          if text not in KERNEL_TOKENS and _words(text) & domains]
        # Strings that are names (keys, prefixes, URNs, media types); prose may mention a domain.
        offenders += [f"kernel/{path}:{node.lineno} names {node.value[:60]!r}" for node in _strings(tree)
                      if not re.search(r"\s", node.value) and node.value not in KERNEL_TOKENS
                      and _words(node.value) & domains]
    return offenders


RECORD_MAKERS = {"record", "records", "record_or_none", "export_records"}


def _record_call(node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    while id(node) in parents:
        node = parents[id(node)]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in RECORD_MAKERS:
            return True
    return False


def raw_rows(root: pathlib.Path) -> list[str]:
    """Every `.mappings()` result becomes a typed record (kernel.db.records),
    directly or through a local variable that only a record maker reads."""
    offenders = []
    for path, tree in _files(root):
        parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr == "mappings") or _record_call(node, parents):
                    continue
                assign = parents[id(node)]
                while isinstance(assign, ast.Call | ast.Attribute):  # .mappings().first()
                    assign = parents[id(assign)]
                targets = assign.targets if isinstance(assign, ast.Assign) else []
                names = {t.id for t in targets if isinstance(t, ast.Name)}
                uses = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id in names
                        and isinstance(n.ctx, ast.Load)]
                if not uses or not all(_record_call(n, parents) for n in uses):
                    offenders.append(f"{path}:{node.lineno} returns raw rows")
    return offenders


ROW_READ = re.compile(r"\b(?:row|rows\[-?\d+\]|record|session|parent)\[\"\w+\"\]")


def rows_read_by_key(root: pathlib.Path) -> list[str]:
    return [f"{path.relative_to(root)}:{number} reads a row by key"
            for path in sorted(root.rglob("*.py"))
            for number, line in enumerate(path.read_text().splitlines(), 1) if ROW_READ.search(line)]


def _imported(path: pathlib.Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The absolute names an import binds (`from ..kernel import app` -> persona_service.kernel.app)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = ["persona_service", *path.parts[:-1]]
        base = ".".join([*package[:len(package) - node.level + 1], *filter(None, [node.module])])
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def app_outside_the_kernel(root: pathlib.Path) -> list[str]:
    """Only the kernel sees the App: servicers receive `ServicerDeps`, jobs and tasks a `Runtime`."""
    offenders = []
    for path, tree in _files(root):
        if path.parts[0] == "kernel":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                offenders += [f"{path}:{node.lineno} imports {name}" for name in _imported(path, node)
                              if f"{name}.".startswith("persona_service.kernel.app.")]
            elif (node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)) == "App":
                offenders.append(f"{path}:{node.lineno} names App")
    return offenders


AST_RULES: list[Callable[[pathlib.Path], list[str]]] = [
    sql_outside_repositories, services_that_commit_or_know_grpc, other_domains_tables, kernel_naming_domains,
    raw_rows, rows_read_by_key, migrations_touching_other_modules_tables, app_outside_the_kernel,
]


@pytest.mark.parametrize("rule", AST_RULES, ids=lambda rule: rule.__name__)
def test_ast_rule_holds(rule):
    assert rule(PACKAGE) == []


# --- the checks catch what they claim to ---------------------------------------------

# (what, file, code appended to it, the check that must name that file)
PLANTED = [
    ("relative kernel->domain import", "kernel/outbox.py", "from ..billing import repository as _planted\n", lint_imports),
    ("relative cross-domain repository import", "chat/service.py",
     "from ..personas import repository as _planted\n", lint_imports),
    ("cross-domain servicer import", "chat/service.py", "from persona_service.personas import servicer as _planted\n",
     lint_imports),
    ("cross-domain import past the api", "chat/service.py",
     "from persona_service.personas.directory import PersonaDirectory as _planted\n", lint_imports),
    ("relative cross-domain service import", "marketplace/service.py", "from ..billing import service as _planted\n",
     lint_imports),
    ("sqlalchemy in a servicer", "chat/servicer.py", "from sqlalchemy import text as _planted\n", lint_imports),
    ("raw SQL in a servicer", "chat/servicer.py",
     "def _planted(conn):\n    return conn.exec_driver_sql('SELECT count(*) FROM chat_sessions').scalar()\n",
     sql_outside_repositories),
    ("SQL built in a service", "personas/service.py",
     "from sqlalchemy import select as _s\n\n\ndef _planted(table):\n    return _s(table)\n", sql_outside_repositories),
    ("grpc in a service", "personas/service.py", "import grpc as _planted\n", lint_imports),
    ("grpc in a service (AST)", "personas/service.py", "import grpc as _planted\n", services_that_commit_or_know_grpc),
    ("a commit in a service", "personas/service.py", "def _planted(conn):\n    conn.commit()\n",
     services_that_commit_or_know_grpc),
    ("a transaction of its own in a service", "personas/service.py",
     "def _planted(engine):\n    with engine.begin():\n        pass\n", services_that_commit_or_know_grpc),
    ("another domain's tables imported", "chat/repository.py", "from ..orgs.tables import User as _planted\n",
     lint_imports),
    ("another domain's tables in SQL", "chat/repository.py", "_PLANTED = 'SELECT id FROM organizations'\n",
     other_domains_tables),
    ("the kernel names a domain", "kernel/principal.py", "_PLANTED = 'scim:provision'\n", kernel_naming_domains),
    ("a module's migration touching another's table", "billing/migrations/0009_billing_processor.py",
     "def _planted():\n    op.drop_column('users', 'name')\n", migrations_touching_other_modules_tables),
    ("another module's table in a migration's SQL", "webhooks/migrations/0013_standard_webhooks.py",
     "def _planted():\n    op.execute('UPDATE personas SET slug = slug')\n", migrations_touching_other_modules_tables),
    ("a raw row returned", "chat/repository.py", "def _planted(conn, stmt):\n    return conn.execute(stmt).mappings().all()\n",
     raw_rows),
    ("a servicer given the App", "personas/servicer.py", "from persona_service.kernel.app import App as _planted\n",
     app_outside_the_kernel),
    ("the App imported relatively", "chat/openai_servicer.py", "from ..kernel import app as _planted\n",
     app_outside_the_kernel),
    ("the App reached through the kernel package", "webhooks/servicer.py",
     "import persona_service.kernel as _kernel\n\n\ndef _planted() -> type:\n    return _kernel.app.App\n",
     app_outside_the_kernel),
]


@pytest.mark.parametrize(("what", "file", "code", "check"), PLANTED, ids=[p[0] for p in PLANTED])
def test_each_planted_violation_fails(tmp_path, what, file, code, check):
    copy = tmp_path / "persona_service"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "static"))
    planted = copy / file
    planted.write_text(planted.read_text() + "\n\n" + code)
    found = check(copy)
    assert found, f"{check.__name__} did not catch: {what}"
    module = "persona_service." + file.removesuffix(".py").replace("/", ".")
    assert file in str(found) or module in str(found), found


# --- the registry and the event catalogue ------------------------------------------------


def _domain_folders() -> set[str]:
    return {p.parent.name for p in PACKAGE.glob("*/__init__.py")} - SHARED


def test_every_domain_folder_is_registered():
    registered = {module.name for module in MODULES.all}
    assert _domain_folders() == registered


def test_every_event_type_comes_from_the_enum_and_has_one_emitter():
    from persona.v1 import events_pb2
    from persona_service.kernel.outbox import EVENT_TYPES
    from persona_service.kernel.transport.validation import enum_wire_names

    assert len(events_pb2.EventType.keys()) == 17  # sixteen types and UNSPECIFIED
    assert EVENT_TYPES == set(enum_wire_names("persona.v1.EventType")) and len(EVENT_TYPES) == 16
    declared = [t for m in MODULES.all for t in m.event_types]
    assert len(declared) == len(set(declared)), "an event type is declared by two modules"
    assert set(declared) == EVENT_TYPES


def test_no_proto_repeats_the_event_type_list():
    from persona_service.kernel.outbox import EVENT_TYPES

    for proto in (PACKAGE.parents[1] / "proto").rglob("*.proto"):
        if proto.name != "events.proto":
            text = proto.read_text()
            named = {t for t in EVENT_TYPES if f'"{t}"' in text}  # comments may name a type in backquotes
            assert not named, f"{proto.name} lists event types {sorted(named)}: use one_of_enum"
