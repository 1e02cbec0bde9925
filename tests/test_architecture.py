"""The layout's rules, checked on the source (docs/architecture-rules.md).

Import contracts (`.importlinter`, run by `lint-imports`; its lists generated
from the registry and the kernel's folder): the kernel imports no domain,
domains reach each other only through their public surface (`<domain>/api.py`)
and the kernel only through its door (`kernel/api.py`), which names no ambient
request context (`current()`), the App nor the kernel's machinery.

AST rules here check the rest, deny by default: every file of a domain has a
role (by its name, `<role>.py` or `*_<role>.py`, or by `roles.toml`), and the
role decides what it may do: gRPC only in servicers; SQL in any form only in
repositories and tables (the kernel's: its repositories, tables and db/);
tables and Base's metadata only in the domain's own repositories and tables;
transactions opened or ended only by servicers, jobs, commands and the
module's wiring; inside a domain, imports (lazy ones too) only go down the
layers. Dynamic access (imports of computed names, `__self__`, getattr with a
computed name in a domain) is refused, and so is finding the call from ambient
state: a servicer is handed its call (`Method(self, request, ctx)`). Also: a
domain names no other domain's tables in SQL (nor in its migrations), the
kernel names no domain, rows cross layers as typed records, only the process
assembly sees the App (what reaches past the door).
`test_each_planted_violation_fails` plants each kind of violation in a copy
of the package and expects its check to fail, and every rule has one, so
none of these can pass vacuously.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import pytest
from import_cycles import GRANULARITIES, cycles, path_through
from persona_service.registry import MODULES

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = REPO / "server" / "persona_service"
CONTRACTS = REPO / ".importlinter"
# Infrastructure under or beside the domains (the kernel, the providers, the process assembly); not a domain.
SHARED = {"kernel", "providers", "process"}


# --- import contracts -------------------------------------------------------------


def _unmeasured(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without coverage's variables (`make test` measures coverage): the checks' processes import planted
    copies of the package, whose lines are not the checkout's, and of the real one only its module bodies, which
    every service process runs; traced, they cost four times the CPU."""
    return {key: value for key, value in env.items() if not key.startswith("COVERAGE_")}


def lint_imports(package: pathlib.Path) -> str:
    """The contracts' report on `package` (a persona_service folder): '' when all are kept."""
    env = {**_unmeasured(os.environ), "PYTHONPATH": str(package.parent)}
    run = subprocess.run([pathlib.Path(sys.executable).parent / "lint-imports", "--config", CONTRACTS, "--no-cache"],
                         cwd=package.parent, env=env, capture_output=True, text=True)
    return "" if run.returncode == 0 else run.stdout + run.stderr


def test_import_contracts_are_kept():
    assert lint_imports(PACKAGE) == ""


def test_the_kernel_door_lists_each_name_once_and_loads_it():
    """kernel/api.py's `__all__` is its TYPE_CHECKING block's names, and each loads from the module named there."""
    from persona_service.kernel import api

    assert sorted(api.__all__) == sorted(api.homes()), set(api.__all__) ^ set(api.homes())
    assert len(set(api.__all__)) == len(api.__all__)
    for name in api.__all__:
        assert getattr(api, name) is not None, name
    with pytest.raises(ImportError):
        exec("from persona_service.kernel.api import RunStore")


def test_the_contracts_name_every_domain():
    """The layers and independence contracts list the registry's domains (scripts/gen_importlinter.py
    writes them: `make gen`), so a new domain is covered once it is registered."""
    text = CONTRACTS.read_text()
    independent = set(re.findall(r"^    persona_service\.(\w+)$", text.split("[importlinter:contract:domains]")[1]
                                 .split("ignore_imports")[0], re.M))
    layered = set(re.findall(r"persona_service\.(\w+)", re.search(r"^    persona_service\.admin :.*$", text, re.M)[0]))
    registered = {module.name for module in MODULES.all}
    assert independent == layered == registered
    generate = subprocess.run([sys.executable, REPO / "scripts" / "gen_importlinter.py", "--check"],
                              capture_output=True, text=True)
    assert generate.returncode == 0, generate.stderr


# --- AST rules ----------------------------------------------------------------------


@functools.cache
def _parsed(text: str) -> ast.Module:
    """One parse per distinct source (trees are only read): a planted case's copy of the package
    reparses only the file it changed."""
    return ast.parse(text)


def _tree(path: pathlib.Path) -> ast.Module:
    return _parsed(path.read_text())


@functools.cache
def _walk(node: ast.AST) -> tuple[ast.AST, ...]:
    """`ast.walk(node)`, in its order, kept: every rule walks every file again, and so does each planted case's
    copy of the package, whose trees are the same but for the file it changed (trees are only read)."""
    return tuple(ast.walk(node))


def _files(root: pathlib.Path) -> Iterator[tuple[pathlib.Path, ast.Module]]:
    for path in sorted(root.rglob("*.py")):
        yield path.relative_to(root), _tree(path)


def _docstrings(tree: ast.Module) -> set[int]:
    kinds = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {id(node.body[0].value) for node in _walk(tree) if isinstance(node, kinds) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def _joined(node: ast.expr) -> str | None:
    """The text a concatenation of literals (`'SELE' + 'CT ...'`) or an f-string spells, each value it formats
    as `x`; None if any part is no literal."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else "x" for part in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _joined(node.left), _joined(node.right)
        return None if left is None or right is None else left + right
    return None


@functools.cache
def _strings(tree: ast.Module) -> tuple[ast.Constant, ...]:
    """String constants other than docstrings, and the text each outermost concatenation of literals or f-string
    spells, as a constant of its own (at its line): SQL or a name split in parts is read whole. A bytes literal is
    read as the text it holds (`b"DELETE FROM ..."` is SQL a driver runs as well)."""
    docstrings = _docstrings(tree)
    parents = _parents(tree)
    joined = []
    for node in _walk(tree):
        if isinstance(node, ast.BinOp | ast.JoinedStr) and not isinstance(parents.get(id(node)), ast.BinOp | ast.JoinedStr):
            text = _joined(node)
            if text is not None:
                joined.append(ast.Constant(value=text, lineno=node.lineno))
    return tuple(node for node in _walk(tree)
                 if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings) \
        + tuple(joined) + tuple(ast.Constant(value=node.value.decode("latin-1"), lineno=node.lineno) for node in _walk(tree)
                                if isinstance(node, ast.Constant) and isinstance(node.value, bytes))


def _is_migration(path: pathlib.Path) -> bool:
    """A revision in a module's own migrations (`<domain>/migrations/`)."""
    return len(path.parts) == 3 and path.parts[1] == "migrations"


# A table named in SQL text, in any case, quoted or not, schema-qualified or not (`UPDATE public."personas"`).
SQL_TABLE = re.compile(r'\b(?:FROM|JOIN|INTO|UPDATE|TABLE|TRUNCATE|ON)\s+(?:ONLY\s+)?(?:IF\s+(?:NOT\s+)?EXISTS\s+)?'
                       r'(?:"?\w+"?\.)?"?(\w+)"?', re.I)
# A table named as a string of its own (op.create_table, op.add_column, sa.table("personas"), a quoted or
# schema-qualified name); `personas.id` (a foreign key's column) is no table.
WHOLE_TABLE = re.compile(r'^\s*(?:"?public"?\.)?"?(\w+)"?\s*$', re.I)


# Each name in a statement, bare or quoted, on its own or schema-qualified (`public.personas`), but a name after a dot
# (`s.personas`: a column); `personas.id` names its table.
SQL_NAME = re.compile(r'(?:(?<![.\w"])|(?<=public\.)|(?<=public"\.))"?([A-Za-z_]\w*)"?')


def _named_tables(tree: ast.Module, whole: bool, known: Mapping[str, str] = {}) -> Iterator[tuple[int, str]]:  # noqa: B006
    """(line, table) for each table a string names in SQL text, and with `whole`, as a string of its own. In a
    statement (one SQL_TEXT reads as SQL, or a fragment naming one of the `known` tables after FROM/JOIN...), every
    name counts, wherever it stands (`FROM a, personas`, `DELETE ... USING personas`, `personas.id`); the caller keeps
    those that are tables. (Prose saying "from the organizations" is neither.)"""
    for node in _strings(tree):
        found = SQL_TABLE.findall(node.value)
        if SQL_TEXT.search(node.value) or any(table in known for table in found):
            found += SQL_NAME.findall(node.value)
        if whole and (match := WHOLE_TABLE.match(node.value)):
            found.append(match.group(1))
        yield from ((node.lineno, table) for table in dict.fromkeys(found))


def _migrated_tables(tree: ast.Module, owners: dict[str, str]) -> Iterator[tuple[int, str]]:
    yield from ((line, table) for line, table in _named_tables(tree, whole=True) if table in owners)


def shared_revisions_of_one_module(versions: pathlib.Path, root: pathlib.Path = PACKAGE) -> list[str]:
    """A revision in the shared `migrations/versions/` touches the kernel's
    tables or several modules'; one touching a single module's tables
    belongs in that module's `migrations/`."""
    owners = _table_owners(root)
    offenders = []
    for path in sorted(versions.glob("*.py")):
        touched = {owners[table] for _, table in _migrated_tables(_tree(path), owners)}
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
    tree = _tree(root / "registry.py")
    return {node.module.split(".")[1] for node in _walk(tree) if isinstance(node, ast.ImportFrom)
            and node.module and node.module.endswith(".module") and not node.module.startswith("persona_service.kernel")}


# Domain names that are also the kernel's own vocabulary, as whole words.
KERNEL_WORDS = {
    "config",  # the kernel's config-key mechanism (config_keys, `config:*` scopes)
    "events",  # the outbox's events
    "admin",  # platform administration (`platform:admin`, the `admin` role)
    "files",  # files on disk, descriptor files
    "moderation",  # what a model answers to `moderate` (kernel.models.ModerationResult: the OpenAI API's moderations)
}
# Names of the spec's scopes that read like a domain's name.
KERNEL_TOKENS = {"personas:read", "personas:write", "chat:read", "chat:write"}


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.split(r"[^A-Za-z0-9]+|_", re.sub(r"([a-z])([A-Z])", r"\1_\2", text)) if w}


def kernel_naming_domains(root: pathlib.Path) -> list[str]:
    """The kernel names no domain (in names and strings; docstrings and comments may explain)."""
    domains = _domains(root) - KERNEL_WORDS
    offenders = []
    for path, tree in _files(root / "kernel"):
        for node in _walk(tree):
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


@functools.cache
def _parents(tree: ast.Module) -> dict[int, ast.AST]:
    return {id(child): node for node in _walk(tree) for child in ast.iter_child_nodes(node)}


def raw_rows(root: pathlib.Path) -> list[str]:
    """Every `.mappings()` result becomes a typed record (kernel.data.records),
    directly or through a local variable that only a record maker reads; and no domain class's public method hands
    out a row or a result set by its type."""
    offenders = []
    for path, tree in _files(root):
        parents = _parents(tree)
        for function in _walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in _walk(function):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr == "mappings") or _record_call(node, parents):
                    continue
                assign = parents[id(node)]
                while isinstance(assign, ast.Call | ast.Attribute):  # .mappings().first()
                    assign = parents[id(assign)]
                targets = assign.targets if isinstance(assign, ast.Assign) else []
                names = {t.id for t in targets if isinstance(t, ast.Name)}
                uses = [n for n in _walk(function) if isinstance(n, ast.Name) and n.id in names
                        and isinstance(n.ctx, ast.Load)]
                if not uses or not all(_record_call(n, parents) for n in uses):
                    offenders.append(f"{path}:{node.lineno} returns raw rows")
    # By the types a domain's classes hand out: no public method returns a row or a result set, whatever built it
    # (`.all()`, `.fetchall()`, a cursor), so what crosses a layer is a typed record (tests/ambient_reads.py's
    # `handed_out_by_classes`).
    offenders += [f"{file}: {where} hands out {kind}: return a typed record"
                  for file, where, kind in _AMBIENT.check(root)["handed_out_by_classes"]]
    return offenders


ROW_READ = re.compile(r"\b(?:row|rows\[-?\d+\]|record|session|parent)\[\"\w+\"\]")


def rows_read_by_key(root: pathlib.Path) -> list[str]:
    return [f"{path.relative_to(root)}:{number} reads a row by key"
            for path in sorted(root.rglob("*.py"))
            for number, line in enumerate(path.read_text().splitlines(), 1) if ROW_READ.search(line)]


def _imported(path: pathlib.Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The absolute names an import binds (`from ..process import app` -> persona_service.process.app)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = ["persona_service", *path.parts[:-1]]
        base = ".".join([*package[:len(package) - node.level + 1], *filter(None, [node.module])])
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


# --- roles ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Role:
    """What a domain file of this role may do. `rank` orders the layers inside
    a domain: a file imports only files of its domain of a rank no higher than its own."""

    rank: int
    grpc: bool = False  # imports grpc (servicers); `module` may import the generated registration functions
    sql: bool = False  # writes SQL in any form
    tables: bool = False  # imports its domain's tables (and the kernel's) or reaches Base.metadata
    transactions: bool = False  # opens, commits or rolls back a transaction of its own


ROLES: dict[str, Role] = {
    "module": Role(6, transactions=True),  # the Module declaration: wiring, jobs' bodies
    "package": Role(6),  # __init__.py
    "servicer": Role(5, grpc=True, transactions=True),  # proto <-> domain; the call's unit of work is the pipeline's
    "commands": Role(5, transactions=True),  # CLI commands
    "jobs": Role(4, transactions=True),  # background work: jobs, tasks, worker processes
    "api": Role(4),  # the domain's public surface for other domains
    "service": Role(3),  # domain logic in the caller's unit of work
    "repository": Role(2, sql=True, tables=True),
    "tables": Role(1, sql=True, tables=True),
    "records": Role(0),
    "settings": Role(0),
    "support": Role(0),  # pure helpers: formats, codecs, signatures
    "migrations": Role(7, sql=True, tables=True),
}
# Roles a file's name may give it: `<role>.py` or `<anything>_<role>.py`.
NAMED_ROLES = set(ROLES) - {"package", "migrations"}
ROLE_TABLE = "roles.toml"


def _role_table(root: pathlib.Path) -> dict[str, dict[str, str]]:
    path = root / ROLE_TABLE
    return tomllib.loads(path.read_text()) if path.exists() else {}


def _domain_files(root: pathlib.Path) -> Iterator[tuple[pathlib.Path, ast.Module]]:
    domains = _domains(root)
    for path, tree in _files(root):
        if len(path.parts) > 1 and path.parts[0] in domains:
            yield path, tree


def role_of(path: pathlib.Path, table: dict[str, dict[str, str]]) -> str | None:
    """A domain file's role: by its name, else by the roles table; None when it has none."""
    if path.parts[1] == "migrations":
        return "migrations"
    stem = "/".join([*path.parts[1:-1], path.stem])
    if path.stem == "__init__":
        return "package"
    named = path.stem if path.stem in NAMED_ROLES else path.stem.rpartition("_")[2]
    if named in NAMED_ROLES and (named == path.stem or "_" in path.stem):
        return named
    return table.get(path.parts[0], {}).get(stem)


def _roles(root: pathlib.Path) -> dict[pathlib.Path, str | None]:
    table = _role_table(root)
    return {path: role_of(path, table) for path, _ in _domain_files(root)}


def files_without_a_role(root: pathlib.Path) -> list[str]:
    """Deny by default: every file of a domain has a known role (by its name or `roles.toml`),
    and the table names only files that exist, with known roles."""
    table = _role_table(root)
    offenders = [f"{path} has no role: name it <role>.py or *_<role>.py ({', '.join(sorted(NAMED_ROLES))}), "
                 f"or list it in {ROLE_TABLE}" for path, role in _roles(root).items() if role is None]
    for domain, files in table.items():
        for stem, role in files.items():
            if role not in ROLES:
                offenders.append(f"{ROLE_TABLE}: {domain}/{stem}.py has the unknown role {role!r}")
            if not (root / domain / f"{stem}.py").exists():
                offenders.append(f"{ROLE_TABLE}: {domain}/{stem}.py does not exist")
    return offenders


def _grpc_import(name: str) -> bool:
    return name.split(".")[0] in ("grpc", "grpc_status", "grpc_health", "grpc_reflection") \
        or name.split(".")[-1].endswith("_pb2_grpc")


def grpc_outside_servicers(root: pathlib.Path) -> list[str]:
    """gRPC only in servicers (a domain's `module.py` may import the generated registration functions)."""
    offenders = []
    for path, role in _roles(root).items():
        if role is None or ROLES[role].grpc:
            continue
        for node in _walk(_tree(root / path)):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for name in _imported(path, node):
                    registration = role == "module" and name.split(".")[-1].endswith("_pb2_grpc")
                    if _grpc_import(name) and not registration:
                        offenders.append(f"{path}:{node.lineno} ({role}) imports {name}")
                        break
    return offenders


# Ending or opening a transaction (savepoints, `begin_nested`, are a service's own business).
TRANSACTION_CALLS = {"commit", "rollback", "begin", "connect"}


def _reaching(node: ast.AST, attributes: set[str], by_name: str) -> str:
    """`.name` when the node reads one of `attributes`, `by_name` when it calls a getter (`getattr`…) with one as a
    literal, else ""."""
    if isinstance(node, ast.Attribute) and node.attr in attributes:
        return "." + node.attr
    if isinstance(node, ast.Call) and (node.func.id if isinstance(node.func, ast.Name) else getattr(
            node.func, "attr", "")) in ATTRIBUTE_BY_NAME and any(
            isinstance(arg, ast.Constant) and arg.value in attributes for arg in node.args):
        return by_name
    return ""


# A statement that ends or opens a transaction (or its mode), sent as SQL: upper case or ended by `;` (a lone "end" or
# "begin" is a dict's key), in any statement of a string, after comments. A savepoint's (`ROLLBACK TO`, `RELEASE`) is
# a service's own business, as `begin_nested` is.
TRANSACTION_SQL = re.compile(r"(?:^|;)(?:\s|/\*.*?\*/|--[^\n]*\n)*(?:(?:COMMIT|ROLLBACK|END|ABORT)(?:\s+(?:WORK|TRANSACTION))?"
                             r"(?:\s+AND\s+(?:NO\s+)?CHAIN)?\s*(?:;|$)|(?:BEGIN|START\s+TRANSACTION)\b"
                             r"(?:\s+(?:WORK|TRANSACTION|ISOLATION|LEVEL|READ|ONLY|WRITE|COMMITTED|REPEATABLE|SERIALIZABLE|"
                             r"UNCOMMITTED|DEFERRABLE|NOT|,))*\s*(?:;|$)|(?:COMMIT|ROLLBACK)\s+PREPARED\b|PREPARE\s+TRANSACTION\b|"
                             r"SET\s+(?:SESSION\s+CHARACTERISTICS|TRANSACTION)\b)", re.S)


def _transaction_sql(text: str) -> bool:
    return bool(TRANSACTION_SQL.search(text) or ";" in text and TRANSACTION_SQL.search(text.upper()))


def transactions_outside_units_of_work(root: pathlib.Path) -> list[str]:
    """Services, repositories, records and helpers work in the caller's unit of work: only
    servicers, jobs, commands and the module's wiring open or end one, or change its isolation (autocommit). By
    the attribute, called or not (`done = conn.commit; done()`), and by a string naming it (`getattr(conn,
    "commit")()`); operator's methodcaller is `reaches_past_the_door`'s. And by SQL text: a statement ending the
    transaction (`text("COMMIT")`, `"...; END"`), which a repository would send on the unit of work's connection."""
    offenders = []
    for path, role in _roles(root).items():
        if role is None or ROLES[role].transactions or role == "migrations":
            continue
        offenders += [f"{path}:{node.lineno} ({role}) ends or opens a transaction in SQL: {node.value[:40]!r}"
                      for node in _strings(_tree(root / path)) if _transaction_sql(node.value)]
        for node in _walk(_tree(root / path)):
            reach = _reaching(node, TRANSACTION_CALLS, "a transaction's end by name")
            if reach:
                offenders.append(f"{path}:{node.lineno} ({role}) reaches {reach}")
            elif isinstance(node, ast.keyword) and node.arg in ("isolation_level", "autocommit"):
                offenders.append(f"{path}:{node.lineno} ({role}) sets the transaction's {node.arg}")
    return offenders


def _module_file(root: pathlib.Path, name: str) -> pathlib.Path | None:
    """The package file a dotted `persona_service.…` name is (None for a package or a name in a module)."""
    parts = name.split(".")
    if parts[0] != "persona_service":
        return None
    path = pathlib.Path(*parts[1:]).with_suffix(".py") if len(parts) > 1 else None
    return path if path is not None and (root / path).is_file() else None


def layers_inside_domains(root: pathlib.Path) -> list[str]:
    """Inside a domain, a file imports (lazily too) only files of a rank no higher than its role's:
    module > servicer, commands > jobs, api > service > repository > tables > records, settings, support."""
    roles = _roles(root)
    offenders = []
    for path, role in roles.items():
        if role is None or role == "migrations":
            continue
        for node in _walk(_tree(root / path)):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for name in _imported(path, node):
                target = _module_file(root, name)
                if target is None or target == path or target.parts[0] != path.parts[0]:
                    continue
                other = roles.get(target)
                if other is not None and ROLES[other].rank > ROLES[role].rank:
                    offenders.append(f"{path}:{node.lineno} ({role}) imports {target} ({other}), a layer above it")
    return offenders


# --- SQL and tables ----------------------------------------------------------------------


def _kernel_sql_home(path: pathlib.Path) -> bool:
    """The kernel's data access: its repositories, tables and database plumbing (`db/`, or `data/`
    once the kernel is in parts)."""
    return path.parts[0] == "kernel" and (path.stem.endswith("repository") or path.stem == "tables"
                                          or "db" in path.parts or "data" in path.parts)


def _sql_homes(root: pathlib.Path) -> set[pathlib.Path]:
    return {path for path, role in _roles(root).items() if role and ROLES[role].sql} \
        | {path for path, _ in _files(root) if _kernel_sql_home(path)}


# Statements as SQL text, in any case.
# A statement as PostgreSQL reads it: after any comments (`/* hint */`, `-- why`) and opening parentheses, and its
# other statements' first words too (COPY, MERGE, CALL, DO, EXPLAIN, VALUES, GRANT...), each with what must follow
# it, so that prose ("Copy the file") is not SQL.
SQL_TEXT = re.compile(r"^(?:\s|/\*.*?\*/|--[^\n]*(?:\n|$)|\()*(?:select\s+\S|insert\s+into|update\s+\w+\s+set|"
                      r"delete\s+from|with\s+(?:recursive\s+)?\w+\s+as\b|"
                      r"set\s+local|lock\s+table|truncate\b|listen\s+\w|notify\s+\w|create\s+(?:unique\s+)?(?:table|index|"
                      r"trigger|function|extension|type|view)|alter\s+table|drop\s+(?:table|index|trigger|function|type|view)|"
                      r"copy\s+(?:\(|\"?\w+\"?(?:\.\"?\w+\"?)?\s*(?:\([^)]*\)\s*)?(?:from|to)\b)|merge\s+into|"
                      r"call\s+[\w.]+\s*\(|do\s+(?:\$|')|explain\s+(?:analyze\s+|verbose\s+|\([^)]*\)\s*)*(?:select|insert|"
                      r"update|delete|with)\b|values\s*\(|(?:grant|revoke)\s+(?:select|insert|update|delete|all|usage|"
                      r"execute|truncate)\b|vacuum\b|refresh\s+materialized\s+view|comment\s+on\s+(?:table|column|index)|"
                      r"prepare\s+\w+\s*(?:\([^)]*\)\s*)?as\b|declare\s+\w+\s+(?:binary\s+)?(?:no\s+)?(?:scroll\s+)?cursor)",
                      re.I | re.M | re.S)
# What code outside the SQL homes may take from SQLAlchemy: types to annotate and pass
# connections with, its exceptions, and event hooks (tracing). Everything else builds or runs SQL.
SQLALCHEMY_TYPES = {"Connection", "Engine", "Executable", "ExceptionContext", "event", "exc"}
# Reaching past SQLAlchemy to the driver (DBAPI) or to a mapped class's Table.
DRIVER_ATTRIBUTES = {"exec_driver_sql", "driver_connection", "dbapi_connection", "raw_connection", "__table__"}


def sql_outside_repositories(root: pathlib.Path) -> list[str]:
    """SQL in any form (text, SQLAlchemy constructs whatever the import style, Table.__table__,
    DBAPI cursors, driver SQL) is written in repositories and tables (the kernel's: its
    repositories, tables and db/; migrations) only."""
    homes = _sql_homes(root)
    offenders = []
    for path, tree in _files(root):
        if path in homes:
            continue
        offenders += [f"{path}:{node.lineno} SQL text" for node in _strings(tree) if SQL_TEXT.search(node.value)]
        aliases = set()  # names bound to sqlalchemy modules (`import sqlalchemy as sa`)
        for node in _walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.split(".")[0]
                    if top in ("sqlalchemy", "psycopg", "psycopg2") and alias.name != "sqlalchemy":
                        if alias.name != "sqlalchemy.exc":
                            offenders.append(f"{path}:{node.lineno} imports {alias.name}")
                    if top == "sqlalchemy":
                        aliases.add(alias.asname or "sqlalchemy")
            elif isinstance(node, ast.ImportFrom) and not node.level:
                module = node.module or ""
                if module.split(".")[0] in ("psycopg", "psycopg2"):
                    offenders.append(f"{path}:{node.lineno} imports {module}")
                elif module.split(".")[0] == "sqlalchemy" and module != "sqlalchemy.exc":
                    offenders += [f"{path}:{node.lineno} imports {module}.{alias.name}" for alias in node.names
                                  if alias.name not in SQLALCHEMY_TYPES]
            elif isinstance(node, ast.Attribute):
                if isinstance(node.value, ast.Name) and node.value.id in aliases and node.attr not in SQLALCHEMY_TYPES:
                    offenders.append(f"{path}:{node.lineno} uses {node.value.id}.{node.attr}")
                if node.attr in DRIVER_ATTRIBUTES:
                    offenders.append(f"{path}:{node.lineno} reaches .{node.attr}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "cursor":
                offenders.append(f"{path}:{node.lineno} opens a DBAPI cursor")
    return offenders


def _table_owners(root: pathlib.Path) -> dict[str, str]:
    owners = {}
    for path in [*root.glob("*/tables.py"), *root.glob("kernel/**/tables.py")]:
        for node in _walk(_tree(path)):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__tablename__"
                                                    for t in node.targets):
                owners[node.value.value] = path.relative_to(root).parts[0]  # type: ignore[attr-defined]
    return owners


def _mapped_classes(root: pathlib.Path) -> dict[str, str]:
    """A mapped class's name (a class of a tables.py with a `__tablename__`) -> the domain (or kernel) owning it."""
    owners = {}
    for path in [*root.glob("*/tables.py"), *root.glob("kernel/**/tables.py")]:
        for node in _walk(_tree(path)):
            if isinstance(node, ast.ClassDef) and any(isinstance(t, ast.Name) and t.id == "__tablename__"
                                                      for item in node.body if isinstance(item, ast.Assign)
                                                      for t in item.targets):
                owners[node.name] = path.relative_to(root).parts[0]
    return owners


def other_domains_tables(root: pathlib.Path) -> list[str]:
    """SQL names only its own domain's tables (the kernel's, its own), in text in any spelling (case, quotes, a
    schema) and, where SQL is written (repositories, migrations), as a string of its own (`sa.table("personas")`,
    `text('"personas"')`); another domain's are reached through that domain's api. A tables.py names another domain's
    table only in a foreign key (the schema's), never its mapped class (`relationship("Persona")`: the ORM would load
    its rows)."""
    owners = _table_owners(root)
    homes = _sql_homes(root)
    offenders = []
    for path, tree in _files(root):
        if path.name == "tables.py":  # foreign keys ("personas.id") are the schema's, owned by the migrations
            offenders += [f"{path}:{node.lineno} names {owner}'s mapped class {node.value}"
                          for node in _strings(tree) if re.fullmatch(r"[\w.]+", node.value.strip())
                          for owner in {_mapped_classes(root).get(part) for part in node.value.strip().split(".")}
                          if owner is not None and owner not in (path.parts[0], "kernel")]
            # ... nor declares another domain's table (`Table("personas", Base.metadata, ...)`) for its repositories
            offenders += [f"{path}:{line} names {owners[table]}'s table {table}"
                          for line, table in _named_tables(tree, whole=True, known=owners)
                          if owners.get(table, path.parts[0]) not in (path.parts[0], "kernel")]
            continue
        for line, table in _named_tables(tree, whole=path in homes or _is_migration(path), known=owners):
            if owners.get(table, path.parts[0]) != path.parts[0]:
                offenders.append(f"{path}:{line} names {owners[table]}'s table {table}")
    return offenders


# A `tables` module (or a name in one), or the declarative Base (kernel.data.base).
TABLES_MODULE = re.compile(r"^persona_service(?:\.\w+)*\.(?:tables|data\.base)(?:\.\w+)?$")
DOOR = "persona_service.kernel.api"
DOOR_FILE = pathlib.Path("kernel", "api.py")  # re-exports Base and the outbox's table for domains' tables and repositories


def door_names(root: pathlib.Path) -> dict[str, str]:
    """The kernel door's names (kernel/api.py's TYPE_CHECKING block) -> the module each comes from."""
    tree = _tree(root / "kernel" / "api.py")
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    return {alias.asname or alias.name: node.module or "" for node in block.body if isinstance(node, ast.ImportFrom)
            for alias in node.names}


def _is_tables_module(name: str, root: pathlib.Path) -> bool:
    """A tables module or a name in one, the door's re-exports of them included (`kernel.api.Base`)."""
    door, _, rest = name.rpartition(".")
    return bool(TABLES_MODULE.match(name)) or door == DOOR and bool(TABLES_MODULE.match(door_names(root).get(rest, "")))


def tables_outside_their_domain(root: pathlib.Path) -> list[str]:
    """Tables (a `tables` module, Base and its metadata) are imported only by their own domain's
    repositories and tables (a domain's repositories may read the kernel's tables: the outbox);
    never by api.py, a service or a servicer, nor by another domain."""
    roles = _roles(root)
    homes = _sql_homes(root)
    offenders = []
    for path, tree in _files(root):
        role = roles.get(path)
        for node in _walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for name in _imported(path, node):
                    if not _is_tables_module(name, root) or path == DOOR_FILE:
                        continue
                    owner = name.split(".")[1]
                    own = owner == path.parts[0] or owner == "kernel" and role in ("repository", "tables", "migrations")
                    if not (path in homes and own):
                        offenders.append(f"{path}:{node.lineno} imports {name}")
                        break
            elif isinstance(node, ast.Attribute) and path.parts[0] != "kernel" and role != "tables" and (
                    node.attr in ("tables", "sorted_tables") and isinstance(node.value, ast.Attribute)
                    and node.value.attr == "metadata"
                    or node.attr == "metadata" and isinstance(node.value, ast.Name) and node.value.id == "Base"):
                offenders.append(f"{path}:{node.lineno} reaches the metadata's tables")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "MetaData" \
                    and path not in homes:
                offenders.append(f"{path}:{node.lineno} builds a MetaData")
    return offenders


# --- dynamic access ----------------------------------------------------------------------

# Attributes that lead from a function to its object or its module's globals.
INTROSPECTION = {"__self__", "__func__", "__wrapped__", "__globals__", "__closure__", "__builtins__", "f_globals",
                 "f_locals", "f_back", "gi_frame", "cr_frame", "ag_frame", "tb_frame", "tb_next", "f_builtins", "f_trace"}
# (file, attribute) -> why that file may reach it. The test stacks' boundary guard finds who ran what it watches by
# the Python stack (frames, outward) and wraps the driver's methods, a classmethod's function among them.
_GUARD = pathlib.Path("kernel", "data", "boundaries.py")
INTROSPECTION_DECLARED = {
    (_GUARD, "f_back"): "attributes a statement, commit or connection to the innermost domain frame",
    (_GUARD, "__func__"): "wraps a library's classmethod (psycopg's _connect_gen) to watch the connections it opens",
    (_GUARD, "f_locals"): "reads the origin a carrier of work handed to another thread or the event loop holds in its "
                          "own frame (who handed it over)",
}
# The loaders of names no import statement spells at run time, each in its file: PERSONA_EXTRA_MODULES, code named
# by configuration (kernel.module); the kernel's door loading a name it lists on first use (kernel.api).
DYNAMIC_LOADERS = {pathlib.Path("kernel", "module.py"): "extra_modules", DOOR_FILE: "__getattr__",
                   # The process template imports the entry modules its owner names (tests/support.py).
                   pathlib.Path("process", "template.py"): "_preload"}


@functools.cache
def _literal_names(tree: ast.AST) -> dict[int, set[str]]:
    """Per node: the loop variables, of loops enclosing it, that run over a literal tuple or list of
    strings (`for name in ("a", "b")`, comprehensions too)."""
    def literal(iterable: ast.expr) -> bool:
        return isinstance(iterable, ast.Tuple | ast.List | ast.Set) \
            and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in iterable.elts)

    names: dict[int, set[str]] = {}
    for node in _walk(tree):
        loops = [node] if isinstance(node, ast.For) else node.generators \
            if isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp) else []
        for loop in loops:
            if isinstance(loop.target, ast.Name) and literal(loop.iter):
                for inner in _walk(node):
                    names.setdefault(id(inner), set()).add(loop.target.id)
    return names


def dynamic_access(root: pathlib.Path) -> list[str]:
    """What no import contract sees: imports of computed names (but the extra modules' loader),
    a function's object or globals (`__self__`, `__globals__`…), and in a domain, attributes read
    by a computed name (getattr with a variable, vars(), globals())."""
    domains = _domains(root)
    offenders = []
    for path, tree in _files(root):
        if path.parts[0] not in domains and path.parts[0] not in SHARED:
            continue  # the registry and the CLI sit above everything and name every domain anyway
        literal = _literal_names(tree)
        loaders = [n for n in _walk(tree) if isinstance(n, ast.FunctionDef) and n.name == DYNAMIC_LOADERS.get(path)]
        exempt = {id(n) for loader in loaders for n in _walk(loader)}
        for node in _walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in INTROSPECTION \
                    and (path, node.attr) not in INTROSPECTION_DECLARED:
                offenders.append(f"{path}:{node.lineno} reaches .{node.attr}")
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            first = node.args[0] if node.args else None
            computed = first is not None and not (isinstance(first, ast.Constant) and isinstance(first.value, str))
            if name in ("import_module", "__import__", "resolve_name", "find_spec") and computed and id(node) not in exempt:
                offenders.append(f"{path}:{node.lineno} imports a computed name")
            if path.parts[0] in domains:
                attribute = node.args[1] if name in ("getattr", "setattr", "delattr", "hasattr") \
                    and len(node.args) > 1 else None
                if attribute is not None and not (isinstance(attribute, ast.Constant) or isinstance(attribute, ast.Name)
                                                  and attribute.id in literal.get(id(node), ())):
                    offenders.append(f"{path}:{node.lineno} {name}() with a computed name")
                if name in ("vars", "globals", "locals") and isinstance(func, ast.Name):
                    offenders.append(f"{path}:{node.lineno} calls {name}()")
    return offenders


def kernel_past_the_door(root: pathlib.Path) -> list[str]:
    """Every file in a domain's folder takes from the kernel only its door, `kernel.api`: lazily too, by a
    literal `import_module`, and in its migrations: a revision (`0035_….py`) is no importable module, so
    `lint-imports`' kernel-door contract never reads it; this rule does, for every file of the folder. The same for
    another domain (only its package and api.py) and the process assembly, which the independence contract reads
    of importable modules only."""
    offenders = []
    domains = _domains(root)
    for path, tree in _domain_files(root):
        for node in _walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _imported(path, node)[0]
                names = [base] if not re.fullmatch(r"persona_service\.\w+", base) \
                    else [f"{base}.{a.name}" for a in node.names]  # (`from persona_service.personas import repository`)
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.Call) and (node.func.id if isinstance(node.func, ast.Name) else getattr(
                    node.func, "attr", "")) in ("import_module", "__import__") and node.args \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                names = [node.args[0].value]
            else:
                continue
            offenders += [f"{path}:{node.lineno} imports {name}" for name in names
                          if re.match(r"persona_service\.kernel(?:\.|$)", name) and name != DOOR
                          or _past_another_door(name, path.parts[0], domains)]
    return offenders


def _past_another_door(name: str, own: str, domains: set[str]) -> bool:
    """An import of another domain's module but its door (its package, its api.py), or of the process assembly."""
    parts = name.split(".")
    return parts[0] == "persona_service" and len(parts) > 1 and (
        parts[1] == "process" or parts[1] in domains and parts[1] != own and len(parts) > 2 and parts[2] != "api")


# Dunder attributes a domain may read: names and the constructor's chain (`super().__init__`). Any other
# (`__dict__`, `__class__`, `__mro__`, `__module__`, `__subclasses__`...) walks from an object it was handed to
# what it was not: a door class's module, a capability's private state.
DUNDERS_ALLOWED = {"__name__", "__qualname__", "__doc__", "__init__"}
# Calls that read an attribute named by a string (`getattr(deps.hints, "_client")`, `attrgetter("hints._client")`).
ATTRIBUTE_BY_NAME = {"getattr", "hasattr", "setattr", "delattr", "attrgetter", "methodcaller"}


def _hidden(attribute: str) -> bool:
    return attribute.startswith("__") and attribute.endswith("__") and attribute not in DUNDERS_ALLOWED \
        or attribute.startswith("_") and not attribute.startswith("__")


# A string that names a private or hidden attribute (`"_client"`, `"resources._settings"`, `"__module__"`).
HIDDEN_NAME = re.compile(r"^_+[A-Za-z0-9]\w*$")
# What says where code comes from: a domain that rebinds one (`__name__ = "persona_service.chat.repository"` at its
# top, `cls.__qualname__ = ...`) poses as another module or class, to whatever judges code by its origin (Work.of
# binds only a repository module's classes; the boundary guard and these rules judge a file by its name).
IDENTITY = {"__name__", "__qualname__", "__module__", "__spec__", "__package__", "__file__", "__path__", "__loader__",
            "__class__", "__dict__"}
# Calls whose first argument names a new type, not an attribute (`TypeVar("_Ordered", ...)`).
TYPE_NAMERS = {"TypeVar", "ParamSpec", "TypeVarTuple", "NewType", "namedtuple", "NamedTuple", "TypedDict"}


def private_reach(root: pathlib.Path) -> list[str]:
    """A domain reads no other object's private attributes (`deps.hints._client`, `deps.resources._settings`), by an
    attribute or by a string naming it, nor walks an object's dunders past its name (`vars`-like `__dict__`,
    `type(x).__mro__`, `__class__`, `__module__`): a capability's `_name` is the boundary it keeps
    (tests/kernel/test_capabilities.py walks public ones only), so past it a servicer would hold the raw Redis client
    or the settings it was not handed. A string naming one is refused wherever it stands, whatever reads it
    (getattr, attrgetter, `inspect.getattr_static`, `functools.reduce(getattr, ...)`, a `type()` namespace's
    `__module__`...): a domain has no other use for the name of a hidden attribute."""
    offenders = []
    for path, tree in _domain_files(root):
        parents = _parents(tree)
        for node in _strings(tree):
            parent = parents.get(id(node))
            namer = isinstance(parent, ast.Call) and (parent.func.id if isinstance(parent.func, ast.Name) else getattr(
                parent.func, "attr", "")) in TYPE_NAMERS and parent.args and parent.args[0] is node
            if not namer and any(HIDDEN_NAME.match(part) and _hidden(part) for part in node.value.split(".")):
                offenders.append(f"{path}:{node.lineno} names a hidden attribute: {node.value!r}")
        for node in _walk(tree):
            named = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
            if named in IDENTITY and isinstance(getattr(node, "ctx", None), ast.Store | ast.Del):
                offenders.append(f"{path}:{node.lineno} rebinds {named}: code posing as another module or class")
            elif isinstance(node, ast.Attribute) and _hidden(node.attr) \
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
                             and not node.attr.startswith("__")):
                offenders.append(f"{path}:{node.lineno} reads {ast.unparse(node)}")
            elif isinstance(node, ast.Call) and (node.func.id if isinstance(node.func, ast.Name) else getattr(
                    node.func, "attr", "")) in ATTRIBUTE_BY_NAME:
                named = [part for arg in node.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                         for part in arg.value.split(".")]
                if any(map(_hidden, named)):
                    offenders.append(f"{path}:{node.lineno} reads {ast.unparse(node)}")
    return offenders


NEEDS = {"personal_data", "erasers", "erasure_locks", "review_resolvers"}  # kernel.ports.Need's values
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


@functools.cache
def _scopes(tree: ast.Module) -> dict[int, tuple[ast.AST, ...]]:
    """Per node: its enclosing functions (lambdas too), innermost first, and last the module."""
    scopes: dict[int, tuple[ast.AST, ...]] = {}

    def visit(node: ast.AST, chain: tuple[ast.AST, ...]) -> None:
        scopes[id(node)] = chain
        inner = (node, *chain) if isinstance(node, FUNCTIONS) else chain
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, (tree,))
    return scopes


def _getattr_literal(node: ast.AST) -> tuple[ast.expr, str] | None:
    """`getattr(obj, "name"[, default])` as (obj, name): the same read as `obj.name`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
        return node.args[0], node.args[1].value
    return None


@functools.cache
def _hook_reads(tree: ast.Module) -> tuple[tuple[int, str, str], ...]:
    """Each read of a modules' port in `tree`: (line, port, source). By the value, not its spelling: the modules'
    hooks (`X.modules`, `getattr(X, "modules")`) followed through assignments (tuples unpacked), attributes of
    self (of the class that sets them), the parameters of this file's functions it is passed to, and what they
    return. (Dynamic names are `dynamic_access`'s; another file's functions, the layers' and the contracts'.)"""
    nodes = _walk(tree)
    if not any(isinstance(node, ast.Attribute) and node.attr == "modules" or isinstance(node, ast.Name)
               and node.id == "modules" or isinstance(node, ast.Constant) and node.value == "modules" for node in nodes):
        return ()  # no hooks to follow (most files)
    scopes, parents = _scopes(tree), _parents(tree)
    defs: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    for node in nodes:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            defs.setdefault(node.name, []).append(node)
    names: set[tuple[int, str]] = set()  # (id(scope), name) bound to the hooks
    attributes: set[tuple[int, str]] = set()  # (id(class), attribute of self) bound to the hooks
    returning: set[str] = set()  # this file's functions returning the hooks

    def owner(node: ast.AST) -> ast.AST | None:
        """The class whose `self` a node's code sees: its outermost enclosing method's class."""
        methods = [scope for scope in scopes[id(node)] if isinstance(parents.get(id(scope)), ast.ClassDef)]
        return parents[id(methods[-1])] if methods else None

    def on_self(node: ast.expr) -> bool:
        return isinstance(node, ast.Name) and node.id in ("self", "cls")

    def hooks(node: ast.AST) -> bool:
        """Whether `node`'s value is the modules' hooks."""
        literal = _getattr_literal(node)
        if isinstance(node, ast.Attribute) or literal:
            value, attr = (node.value, node.attr) if isinstance(node, ast.Attribute) else literal  # type: ignore[misc]
            return attr == "modules" or on_self(value) and (id(owner(node)), attr) in attributes
        if isinstance(node, ast.Name):
            return node.id == "modules" or any((id(scope), node.id) in names for scope in scopes[id(node)])
        if isinstance(node, ast.Call):
            return _called(node) in returning
        if isinstance(node, ast.NamedExpr | ast.Starred):
            return hooks(node.value)
        if isinstance(node, ast.IfExp):
            return hooks(node.body) or hooks(node.orelse)
        if isinstance(node, ast.BoolOp):
            return any(map(hooks, node.values))
        return False

    def bind(target: ast.AST, value: ast.AST | None, holds: bool) -> bool:
        """Binds `target` to the hooks where `value` (or, with no value, `holds`) is them; True if that is new."""
        if isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Tuple | ast.List) \
                and len(target.elts) == len(value.elts):
            return any([bind(t, v, False) for t, v in zip(target.elts, value.elts, strict=True)])
        if not (holds or value is not None and hooks(value)):
            return False
        key = (id(scopes[id(target)][0]), target.id) if isinstance(target, ast.Name) \
            else (id(owner(target)), target.attr) if isinstance(target, ast.Attribute) and on_self(target.value) else None
        found = names if isinstance(target, ast.Name) else attributes
        if key is None or key in found:
            return False
        found.add(key)
        return True

    changed = True
    while changed:  # until nothing new is bound (a handful of rounds: each binds at least one name)
        changed = False
        for node in nodes:
            if isinstance(node, ast.Assign):
                changed |= any([bind(target, node.value, False) for target in node.targets])
            elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and node.value is not None:
                changed |= bind(node.target, node.value, False)
            elif isinstance(node, ast.Return) and node.value is not None and hooks(node.value):
                function = scopes[id(node)][0]
                if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef) and function.name not in returning:
                    returning.add(function.name)
                    changed = True
            elif isinstance(node, ast.Call) and _called(node) in defs:
                for function in defs[_called(node)]:
                    method = isinstance(parents.get(id(function)), ast.ClassDef) and isinstance(node.func, ast.Attribute)
                    params = [*function.args.posonlyargs, *function.args.args][method:]
                    passed = [*zip(params, node.args, strict=False),
                              *((p, k.value) for k in node.keywords for p in function.args.args + function.args.kwonlyargs
                                if p.arg == k.arg)]
                    for param, arg in passed:
                        if not isinstance(arg, ast.Starred) and hooks(arg) and (id(function), param.arg) not in names:
                            names.add((id(function), param.arg))
                            changed = True
    reads = []
    for node in nodes:
        if not isinstance(node, ast.Attribute | ast.Call):
            continue
        literal = _getattr_literal(node)
        value, attr = (node.value, node.attr) if isinstance(node, ast.Attribute) else literal or (None, "")
        if attr in NEEDS and value is not None and hooks(value):
            reads.append((node.lineno, attr, ast.unparse(node)))
    return tuple(reads)


def _called(call: ast.Call) -> str:
    """The name of this file's function a call may run: `f(...)`, or `self.f(...)` / `cls.f(...)`."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
        and func.value.id in ("self", "cls") else ""


def undeclared_needs(root: pathlib.Path) -> list[str]:
    """A domain reads of the modules' ports (`deps.modules.erasers`, `runtime.modules.personal_data`) only the
    capabilities its module declares (`needs=frozenset({Need.ERASERS, ...})` in its module.py): its servicers are
    handed no other (kernel.ports.DeclaredHooks, which refuses the read when it runs; this finds it in the source,
    wherever the hooks were copied to first: `_hook_reads`)."""
    declared: dict[str, set[str]] = {}
    for path, tree in _domain_files(root):
        if path.name == "module.py" and len(path.parts) == 2:
            declared[path.parts[0]] = {node.attr.lower() for call in _walk(tree) if isinstance(call, ast.Call)
                                       for keyword in call.keywords if keyword.arg == "needs"
                                       for node in _walk(keyword.value) if isinstance(node, ast.Attribute)
                                       and isinstance(node.value, ast.Name) and node.value.id == "Need"}
    found = {(path, line, need, source) for path, tree in _domain_files(root) for line, need, source in _hook_reads(tree)}
    # The hooks handed on to another file (a service's parameter): that file cannot see where its value came from,
    # so in a domain that does not declare a need, no name or attribute chain is read for it (a port's own
    # implementation is read off the repository built for it: `OrgRepository(conn).personal_data`).
    found |= {(path, node.lineno, node.attr, ast.unparse(node)) for path, tree in _domain_files(root)
              for node in _walk(tree) if isinstance(node, ast.Attribute) and node.attr in NEEDS
              and isinstance(node.value, ast.Name | ast.Attribute) and ast.unparse(node.value) not in ("self", "cls")}
    return [f"{path}:{line} reads {source} (its module does not declare {need})"
            for path, line, need, source in sorted(found, key=str) if need not in declared.get(path.parts[0], ())]


def ambient_reads(root: pathlib.Path) -> list[str]:
    """A servicer is handed its call (`Method(self, request, ctx)`) and hands on what its services need: no name
    of the kernel's door, no code of the providers or the domains reaches a context variable (or a side table
    keyed by objects), through however many kernel functions, by whatever name, and none of their files keeps
    call state at module level (a context variable, a weak table, a thread's slot); ambient state kept anywhere
    else (the fair gate's thread-local) is read only where it is kept, never handed on (returned, passed to a
    call, stored on an attribute), so no domain reaches it through a parameter, self or a function's result.
    By behaviour: tests/ambient_reads.py imports `root`'s copy of the package in a process of its own and
    resolves what each file's code loads to the objects it is. (It replaced `call_from_ambient_state`, which read
    the door's functions and the domains' module-level assignments by their spelling, one function deep.)"""
    return _AMBIENT.check(root)["lines"]


def reaches_past_the_door(root: pathlib.Path) -> list[str]:
    """A domain's code reaches of the kernel and the process assembly only what the door names, and none of the
    means that find the rest without an import a contract reads: by what each name it loads is at run time
    (tests/ambient_reads.py's `past_the_door`, in the same process as `ambient_reads`), so a kernel module or
    function re-exported through a provider or another module, `sys.modules[...]`, importlib's, pkgutil's and
    runpy's loaders, `__import__` and `__builtins__`, `gc`'s referrers, frames (`sys._getframe`, `inspect.stack`),
    `inspect.getmodule` of a door class, and the running task or thread as a side table, are named however spelled
    (aliases, attribute chains, getattr with a literal, lazy imports)."""
    return _AMBIENT.check(root)["past_the_door"]


# Any that crosses a domain's api.py today, each with why; this list only shrinks (a stale entry fails too).
ANY_ACROSS_APIS = {
}


# What the kernel's door hands a domain with an `Any` in it (issue 47, typed data across layers): unchecked data
# that mypy's disallow_any_explicit, which reads only a domain's own lines, cannot see. This list only shrinks:
# a new Any across the door fails `any_across_the_door`, and an entry no longer found does too.
_REGISTRAR = (
    "grpc's generated add_*Servicer_to_server, whose servicer parameter is the generated abstract *Servicer (its "
    "methods take grpc.ServicerContext): a module's servicer is a plain class (methods take a RequestContext) that "
    "process/server.py hands wrapped by the pipeline, so no one type fits: `object` refuses every generated "
    "function (parameters are contravariant), and a generic binding still needs a cast where the process registers"
)
ANY_ACROSS_THE_DOOR: dict[str, str] = {
    "kernel.api.ServiceBinding.register": _REGISTRAR,
    "kernel.api.ServiceBinding.__init__(register)": _REGISTRAR,
}


def any_across_the_door(root: pathlib.Path) -> list[str]:
    """No `typing.Any` crosses the kernel's door (`kernel/api.py`'s names, their fields and signatures: tests/
    ambient_reads.py's `any_across_the_door`) but the known ones, ANY_ACROSS_THE_DOOR."""
    found = dict(_AMBIENT.check(root)["any_across_the_door"])  # where -> the module defining it
    return [f"{where} ({home}) crosses the kernel's door with an Any (type it, or list it in ANY_ACROSS_THE_DOOR)"
            for where, home in found.items() if where not in ANY_ACROSS_THE_DOOR] + [
        f"ANY_ACROSS_THE_DOOR lists {where}, no longer found" for where in ANY_ACROSS_THE_DOOR
        if where not in found and root == PACKAGE]


def any_across_apis(root: pathlib.Path) -> list[str]:
    """No `typing.Any`, by any alias and in any position, crosses a domain's `api.py`: in what it exports, found by
    the objects themselves (a re-exported service's methods, its records' fields), not api.py's lines
    (tests/ambient_reads.py's `any_across_apis`); but the known ones, ANY_ACROSS_APIS."""
    found = _AMBIENT.check(root)["any_across_apis"]
    return [f"{line} crosses api.py (type it, or list it in ANY_ACROSS_APIS with why)" for line in found
            if line not in ANY_ACROSS_APIS] + [f"ANY_ACROSS_APIS lists {line}, no longer found" for line in ANY_ACROSS_APIS
                                               if line not in found and root == PACKAGE]


def sql_reached_outside_repositories(root: pathlib.Path) -> list[str]:
    """`sql_outside_repositories` by value: no SQL-writing piece of SQLAlchemy or the driver (`select`, `text`,
    `table`, `func`, a dialect, psycopg...) is reached by a domain's code outside its SQL homes, however it got
    there: through a repository's or tables' namespace (`repository.select`), an alias or a lazy import
    (tests/ambient_reads.py's `sql_reads`: what each name the code loads is at run time)."""
    homes = _sql_homes(root)
    return [f"{file}: {function} reaches {what}: SQL is written in repositories and tables"
            for file, function, what in _AMBIENT.check(root)["sql"] if pathlib.Path(file) not in homes]


# Where a domain may hold a database connection: its repositories (where SQL lives) and tables, and the code that
# opens a transaction and makes a Work of it (its wiring, jobs, commands, migrations). Everything else is handed the
# call's Work (kernel.data.work), whose repositories hold the connection.
CONNECTION_ROLES = {"repository", "tables", "module", "jobs", "commands", "migrations"}


def connections_outside_repositories(root: pathlib.Path) -> list[str]:
    """A domain's services, servicers, records and helpers never hold a database connection: they reach neither
    SQLAlchemy's Connection or Engine (not even to annotate one) nor `Work.on`, which makes a Work of a connection,
    by what their code loads at run time (tests/ambient_reads.py's `connection_reads`: any alias, lazy import or
    getattr with a literal). They take the Work they are handed and its repositories. And no file of a domain, a
    repository included, makes a connection, an engine or a pool of its own (`psycopg.connect`, `create_engine`,
    `psycopg_pool`, libpq's `PGconn`), by whatever name: its connection is the unit of work's."""
    roles = _roles(root)
    return [f"{file}: {function} reaches {what} ({roles.get(pathlib.Path(file))}): a service takes the call's Work"
            for file, function, what in _AMBIENT.check(root)["connections"]
            if roles.get(pathlib.Path(file)) not in CONNECTION_ROLES and not what.startswith("makes:")] + [
        f"{file}: {function} {what.replace('makes:', 'reaches what makes a connection: ')} "
        f"({roles.get(pathlib.Path(file))}): the kernel's engines own the connections; take the unit of work's"
        for file, function, what in _AMBIENT.check(root)["connections"] if what.startswith("makes:")]


# What a repository does with the connection it is built on: run statements and read the transaction it is in
# (`info`, `get_transaction`, a savepoint, the driver's connection for COPY). Deny by default: closing, invalidating or
# detaching it ends the unit of work's transaction beneath the caller, as a commit would.
CONNECTION_USES = {"execute", "scalar", "scalars", "info", "get_transaction", "in_transaction", "in_nested_transaction",
                   "begin_nested", "dialect", "connection"}


def _held_connections(cls: ast.ClassDef) -> set[str]:
    """The attributes of self a class's `__init__` keeps a `Connection` parameter in (`self._conn = conn`)."""
    held = set()
    for method in cls.body:
        if isinstance(method, ast.FunctionDef) and method.name == "__init__" and method.args.args:
            me = method.args.args[0].arg
            params = {a.arg for a in [*method.args.args[1:], *method.args.kwonlyargs]
                      if a.annotation is not None and "Connection" in ast.unparse(a.annotation)}
            held |= {t.attr for node in _walk(method) if isinstance(node, ast.Assign)
                     and isinstance(node.value, ast.Name) and node.value.id in params
                     for t in node.targets if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                     and t.value.id == me}
    return held


# What ends the unit of work's transaction or connection beneath the caller, on anything reached from the connection a
# repository holds (its transaction, its driver connection: `self._conn.get_transaction().close()`).
CONNECTION_ENDINGS = {"close", "invalidate", "detach", "commit", "rollback", "begin", "connect", "cancel", "finish",
                      "reset", "set_autocommit", "autocommit", "set_isolation_level", "isolation_level", "set_read_only",
                      "read_only", "tpc_begin", "tpc_prepare", "tpc_commit", "tpc_rollback", "execution_options"}


def _reached_from(node: ast.AST, me: str, held: set[str], copies: set[str], derived: set[str]) -> int | None:
    """How many attributes past the held connection `node` is (through calls: `self._conn.get_transaction().close` is
    2; a local assigned from one counts as 1), or None when it is not reached from it."""
    depth = 0
    while True:
        if _is_held(node, me, held, copies):
            return depth
        if isinstance(node, ast.Name) and node.id in derived:
            return depth + 1
        if isinstance(node, ast.Attribute):
            node, depth = node.value, depth + 1
        elif isinstance(node, ast.Call):
            node = node.func
        else:
            return None


def _is_held(node: ast.AST, me: str, held: set[str], copies: set[str]) -> bool:
    """Whether `node` is the held connection: `self._conn`, or a local it was copied to."""
    return isinstance(node, ast.Attribute) and node.attr in held and isinstance(node.value, ast.Name) \
        and node.value.id == me or isinstance(node, ast.Name) and node.id in copies


def connection_used_beyond_statements(root: pathlib.Path) -> list[str]:
    """A domain's class built on a connection (a repository: `__init__(self, conn: Connection)`) only runs statements
    on it (CONNECTION_USES): read as an attribute, by getattr with a literal, or through a local it was copied to
    (`conn = self._conn; conn.close()`). Its transaction is the unit of work's, which the caller ends."""
    offenders = []
    for path, tree in _domain_files(root):
        classes = [cls for cls in _walk(tree) if isinstance(cls, ast.ClassDef)]
        held = set().union(*map(_held_connections, classes))  # a subclass's methods hold what its base kept
        for cls in classes if held else ():
            for function in _walk(cls):
                if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef) or not function.args.args:
                    continue
                me = function.args.args[0].arg
                copies = {t.id for node in _walk(function) if isinstance(node, ast.Assign)
                          and _is_held(node.value, me, held, set()) for t in node.targets if isinstance(t, ast.Name)}
                derived = {t.id for node in _walk(function) if isinstance(node, ast.Assign | ast.NamedExpr)
                           and (_reached_from(node.value, me, held, copies, set()) or 0) >= 1
                           for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                           if isinstance(t, ast.Name)}
                for node in _walk(function):
                    depth = _reached_from(node, me, held, copies, derived) if isinstance(node, ast.Attribute) else None
                    if depth is not None and depth >= 2 and node.attr in CONNECTION_ENDINGS:  # type: ignore[attr-defined]
                        offenders.append(f"{path}:{node.lineno} {cls.name}.{function.name} ends what its connection "
                                         f"holds (.{node.attr}): a repository runs statements in the caller's unit "  # type: ignore[attr-defined]
                                         f"of work")
                    used = node.attr if isinstance(node, ast.Attribute) and _is_held(node.value, me, held, copies) \
                        else node.args[1].value if isinstance(node, ast.Call) and _call_name(node) in ATTRIBUTE_BY_NAME \
                        and len(node.args) > 1 and _is_held(node.args[0], me, held, copies) \
                        and isinstance(node.args[1], ast.Constant) else None
                    if used is not None and used not in CONNECTION_USES:
                        offenders.append(f"{path}:{node.lineno} {cls.name}.{function.name} uses its connection's "
                                         f".{used}: a repository runs statements in the caller's unit of work")
    return offenders


def whole_schema_outside_tables(root: pathlib.Path) -> list[str]:
    """No domain file but its tables reaches a view of every domain's tables at once: the shared metadata or mapper
    registry (off Base, off any mapped class, `ChatSession.metadata`, through a local) or the database's reflection
    (`sqlalchemy.inspect`, `MetaData`, its `reflect`): by what the code loads at run time (tests/ambient_reads.py's
    `schema_reads`). A repository names its own tables (its domain's tables.py, the kernel's through the door), so
    another domain's table is never within reach without being named, which `other_domains_tables` reads."""
    roles = _roles(root)
    return [f"{file}: {function} reaches {what} ({roles.get(pathlib.Path(file))}): name your own tables"
            for file, function, what in _AMBIENT.check(root)["schema"] if roles.get(pathlib.Path(file)) != "tables"]


def call_state_at_module_level(root: pathlib.Path) -> list[str]:
    """No function of a domain keeps state at module level, a process-wide side table for calls: it rebinds no
    global and changes no mutable container read off a module (its own globals or another's), through whatever
    local it was copied to (tests/ambient_reads.py's `module_state_writes`: by the values its instructions hold).
    Module and class bodies build the module and may."""
    return _AMBIENT.check(root)["module_state"]


def call_state_on_servicers(root: pathlib.Path) -> list[str]:
    """A servicer is built once per App and serves every call: outside `__init__` its methods set no attribute of
    self (directly, by setattr with a literal, or augmented), nor change a container its `__init__` built (an item
    set or deleted, a method or function that changes one), which would hand one call's state to the next."""
    offenders = []
    for path, role in _roles(root).items():
        if role != "servicer":
            continue
        containers = {cls.name: _servicer_containers(cls) for cls in _walk(_tree(root / path))
                      if isinstance(cls, ast.ClassDef)}
        for cls in _walk(_tree(root / path)):
            if not isinstance(cls, ast.ClassDef):
                continue
            for method in cls.body:
                if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) or method.name == "__init__" \
                        or not method.args.args:
                    continue
                me = method.args.args[0].arg
                for node in _walk(method):
                    stored = isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store | ast.Del) \
                        and isinstance(node.value, ast.Name) and node.value.id == me
                    named = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                        and node.func.id in ("setattr", "delattr") and node.args \
                        and isinstance(node.args[0], ast.Name) and node.args[0].id == me
                    if stored or named or _changes_a_container(node, me, containers.get(cls.name, set())):
                        offenders.append(f"{path}:{node.lineno} {cls.name}.{method.name} sets state on the servicer")
    return offenders


# Calls that make a mutable container: what a servicer's `__init__` may build and no later method may change.
CONTAINER_MAKERS = {"dict", "list", "set", "bytearray", "deque", "defaultdict", "OrderedDict", "Counter", "Queue",
                    "SimpleQueue", "LifoQueue", "PriorityQueue", "WeakValueDictionary", "WeakKeyDictionary", "WeakSet"}
# What changes a container it is called on, or handed to (ambient_reads' _MUTATORS, as source names).
CONTAINER_CHANGES = {"append", "appendleft", "add", "update", "setdefault", "pop", "popitem", "popleft", "clear",
                     "extend", "extendleft", "insert", "remove", "discard", "sort", "reverse", "rotate", "put",
                     "put_nowait", "get_nowait", "heappush", "heappop", "heapify", "heapreplace", "heappushpop",
                     "insort", "insort_left", "insort_right", "setitem", "delitem", "__setitem__", "__delitem__"}


def _call_name(call: ast.Call) -> str:
    """The name a call's callable is read by: `f(...)` or `x.f(...)`."""
    return call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")


def _servicer_containers(cls: ast.ClassDef) -> set[str]:
    """The attributes of self a class's `__init__` sets to a mutable container (a literal, a comprehension, a call
    of a container's class)."""
    names = set()
    for method in cls.body:
        if isinstance(method, ast.FunctionDef) and method.name == "__init__" and method.args.args:
            me = method.args.args[0].arg
            for node in _walk(method):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                    if isinstance(node, ast.AnnAssign) and node.value is not None else []
                value = getattr(node, "value", None)
                built = isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp) \
                    or isinstance(value, ast.Call) and _call_name(value) in CONTAINER_MAKERS
                names |= {t.attr for t in targets if built and isinstance(t, ast.Attribute)
                          and isinstance(t.value, ast.Name) and t.value.id == me}
    return names


def _self_container(node: ast.AST, me: str, containers: set[str]) -> bool:
    """Whether `node` is `me.<a container __init__ built>` (or an item or slice of one)."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return isinstance(node, ast.Attribute) and node.attr in containers and isinstance(node.value, ast.Name) \
        and node.value.id == me


def _changes_a_container(node: ast.AST, me: str, containers: set[str]) -> bool:
    """`self.seen[key] = ...`, `del self.seen[key]`, `self.seen[key] += 1`, `self.recent.append(...)`, or
    `heapq.heappush(self.pending, ...)`, on a container the servicer's `__init__` built."""
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
        return _self_container(node.value, me, containers)
    if isinstance(node, ast.Call):
        if _call_name(node) not in CONTAINER_CHANGES:
            return False
        if isinstance(node.func, ast.Attribute) and _self_container(node.func.value, me, containers):
            return True
        return any(_self_container(arg, me, containers) for arg in node.args)
    return False


# Roles whose code may reach the network (NETWORK in tests/ambient_reads.py: sockets, HTTP, S3, Stripe, Redis, gRPC):
# domain logic and the work around it; never a repository (its world is the connection it is handed), tables,
# records, settings, api.py's own code nor a pure helper.
NETWORK_ROLES = {"service", "servicer", "jobs", "commands", "module"}


def network_outside_services(root: pathlib.Path) -> list[str]:
    """A repository (tables, records, a helper) calls no network: by what its code reaches at run time
    (tests/ambient_reads.py's `network_reads`: a module or function of a network library, by any alias, lazy
    import or chain such as `urllib.request.urlopen`, or what starts a process, `os.popen`, or an event loop), not by
    its imports' spelling. A file named a service does not either (its client files do), and no file reaches Redis
    (the kernel's capabilities do: `Hints`, the limiter)."""
    roles = _roles(root)
    return [f"{file}: {function} reaches {library} ({roles.get(pathlib.Path(file))}): the network is a client's"
            for file, function, library in _AMBIENT.check(root)["network"]
            if roles.get(pathlib.Path(file)) not in NETWORK_ROLES or _service_file(pathlib.Path(file))
            or re.match(r"redis(?:\.|$)", library)]


def _service_file(path: pathlib.Path) -> bool:
    """A file named a service (`service.py`, `*_service.py`): domain logic, which reaches the network through its
    client files (`files/s3.py`, `webhooks/http.py`: a service by roles.toml), as the boundary guard holds it."""
    return path.stem == "service" or path.stem.endswith("_service")


# What a domain's api.py may hand other domains: its services, records, settings and helpers; never a repository or
# tables (another domain would hold SQL on this one's tables), a servicer, its wiring or jobs.
API_EXPORTABLE = {"service", "records", "settings", "support", "api", "package"}


def api_exports_by_role(root: pathlib.Path) -> list[str]:
    """What each domain's api.py exports is defined in a file of a role other domains may use (API_EXPORTABLE): by
    the exported objects (tests/ambient_reads.py's `api_exports`), so a repository re-exported under any name, or
    through a service module's own import of it, or its module, is found; and what those exports hand out by their
    types (a result, a public field: `api_hands_out`) is no class of such a file nor a connection (a service's method
    returning its repository, bound to the caller's unit of work, is a repository across api.py)."""
    roles = _roles(root)
    offenders = []
    for api, name, home in _AMBIENT.check(root)["api_exports"]:
        path = _module_file(root, home)
        role = roles.get(path) if path is not None else None
        if path is not None and path.parts[0] == pathlib.Path(api).parts[0] and role not in API_EXPORTABLE:
            offenders.append(f"{api} exports {name} from {path} ({role})")
    for api, function, what in _AMBIENT.check(root)["api_reaches"]:  # what api.py's own code reaches of its domain
        path = _home_file(root, what)
        role = roles.get(path) if path is not None else None
        if path is not None and role not in API_EXPORTABLE:
            offenders.append(f"{api}: {function} reaches {what} ({role}): api.py hands out what other domains may use")
    for where, kind, home, defined in _AMBIENT.check(root)["api_hands_out"]:
        path = _module_file(root, home)
        role = roles.get(path) if path is not None else None
        if path is not None and path.parts[0] not in SHARED and role not in API_EXPORTABLE or CONNECTION_TYPES.match(kind) \
                or kind == "builtins.module":  # a module: whatever it holds, its repository included
            offenders.append(f"{where.partition('.')[0]}/api.py hands out {kind} ({role or 'a connection or module'}) "
                             f"at {where}, in {defined}")
    return offenders


def _home_file(root: pathlib.Path, dotted: str) -> pathlib.Path | None:
    """The package file a dotted name is or is defined in (`persona_service.personas.repository.PersonaRepository`)."""
    parts = dotted.split(".")
    return next((found for n in range(len(parts), 1, -1) if (found := _module_file(root, ".".join(parts[:n])))), None)


# What holds a database connection (SQLAlchemy's, the driver's, a pool): never handed across a domain's api.py.
CONNECTION_TYPES = re.compile(r"^(?:sqlalchemy\.(?:engine|orm|pool)|psycopg(?:_pool)?)\.")


# Roles whose code may read settings or the environment: a module gets its settings when it is built (its wiring,
# jobs, commands, its Settings' own defaults); a servicer in `__init__`, once per App. A Resource's opener is
# called once per App too (tests/ambient_reads.py counts it as module level).
SETTINGS_ROLES = {"module", "jobs", "commands", "settings", "package"}


def settings_at_call_sites(root: pathlib.Path) -> list[str]:
    """No settings loaded nor environment read at a call site (issue 47, "The call, explicit"): the door's `load`,
    a `from_env`, `os.environ`/`os.getenv` and their kin, found by what the code loads at run time (any alias,
    lazy import or getattr with a literal), are called only at module level, in a servicer's `__init__`, a
    Resource's opener, or by a file whose role builds the module (SETTINGS_ROLES); never in a service, a
    repository, records or a servicer's method serving a call."""
    roles = _roles(root)
    offenders = []
    for file, function, what in _AMBIENT.check(root)["settings_reads"]:
        role = roles.get(pathlib.Path(file))
        at_build = function == "<module>" or function.endswith(".__init__") and role == "servicer"
        if not at_build and role not in SETTINGS_ROLES:
            offenders.append(f"{file}: {function} reads {what} ({role}): load settings when the module is built")
    return offenders


class _AmbientReader:
    """`tests/ambient_reads.py --serve`, started by the first check and stopped after this file's tests: each folder
    is still read in a process that imports that folder's copy of the package and nothing else of it (a child the
    server forks), but the interpreter's start and the libraries' imports are paid once, not once a check."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[str] | None = None
        self.last: tuple[pathlib.Path, dict[str, list]] | None = None  # one answer serves every rule it feeds

    def check(self, root: pathlib.Path) -> dict[str, list]:
        if self.last is not None and self.last[0] == root:
            return self.last[1]
        if self.process is None or self.process.poll() is not None:
            env = {key: value for key, value in _unmeasured(os.environ).items() if key != "PYTHONPATH"}
            self.errors = tempfile.TemporaryFile(mode="w+")
            self.process = subprocess.Popen([sys.executable, str(REPO / "tests" / "ambient_reads.py"), "--serve"],
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors, text=True,
                                            env={**env, "PYTHONWARNINGS": "ignore"}, cwd=REPO)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(str(root)) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            self.errors.seek(0)
            raise AssertionError(f"ambient_reads.py --serve ended: {self.errors.read()}")
        result = json.loads(answer)
        assert "error" not in result, result["error"]
        self.last = (root, result)
        return result

    def close(self) -> None:
        if self.process is not None:
            self.process.communicate()  # its stdin closed, it ends
            self.errors.close()
            self.process = None


_AMBIENT = _AmbientReader()


@pytest.fixture(scope="module", autouse=True)
def _ambient_reader_stops() -> Iterator[None]:
    yield
    _AMBIENT.close()


AST_RULES: list[Callable[[pathlib.Path], list[str]]] = [
    files_without_a_role, grpc_outside_servicers, sql_outside_repositories, transactions_outside_units_of_work,
    tables_outside_their_domain, other_domains_tables, layers_inside_domains, dynamic_access, kernel_naming_domains,
    raw_rows, rows_read_by_key,
    ambient_reads, kernel_past_the_door, private_reach, undeclared_needs, reaches_past_the_door,
    settings_at_call_sites, any_across_apis, network_outside_services, api_exports_by_role,
    sql_reached_outside_repositories, call_state_at_module_level, call_state_on_servicers,
    connections_outside_repositories, any_across_the_door, whole_schema_outside_tables,
    connection_used_beyond_statements,
]


@pytest.mark.parametrize("rule", AST_RULES, ids=lambda rule: rule.__name__)
def test_ast_rule_holds(rule):
    assert rule(PACKAGE) == []


# --- import loops -------------------------------------------------------------------

# Loops not broken yet (issue 47, "No loops"), each with why; tests/import_cycles.py says how imports
# count (type-only and function-level ones too). Any other loop fails, and so does an entry here that
# no longer loops or has grown (a component is matched whole): this list only shrinks.
KNOWN_LOOPS: dict[str, dict[frozenset[str], str]] = {
    "packages": {},
    "kernel parts": {},
    "modules": {},
}


def loops_not_known(root: pathlib.Path) -> list[str]:
    """Each import loop of `root` (a persona_service folder) that KNOWN_LOOPS does not list, with its imports."""
    return [f"{granularity}: {' <-> '.join(sorted(loop))} (" + "; ".join(path_through(root, loop, group)) + ")"
            for granularity, group in GRANULARITIES.items()
            for loop in cycles(root)[granularity] if loop not in KNOWN_LOOPS[granularity]]


def test_no_import_loops_but_the_known_ones():
    new = loops_not_known(PACKAGE)
    assert not new, "import loops (move the shared piece below both):\n" + "\n".join(new)


def test_every_known_loop_still_loops():
    """A loop broken, or grown into a bigger one, leaves its entry: delete it (or fix the new loop)."""
    found = cycles(PACKAGE)
    stale = [f"{g}: {' <-> '.join(sorted(loop))}" for g, known in KNOWN_LOOPS.items() for loop in known
             if loop not in found[g]]
    assert not stale, "KNOWN_LOOPS lists loops that are gone or changed:\n" + "\n".join(stale)


# --- no Any in a domain (mypy's disallow_any_explicit, pyproject.toml) ----------------------------------------

def _mypy_overrides() -> list[dict[str, object]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    return list(config["tool"]["mypy"]["overrides"])


def _names_in_code(path: pathlib.Path) -> set[str]:
    """The names a file's code uses (its tokens, so not the words of its strings and comments)."""
    import io
    import tokenize

    return {token.string for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
            if token.type == tokenize.NAME}


# Held as the domains are, though no module of the registry: the process assembly (the edge's configuration, the
# embedded servers, the process template and supervision), whose JSON crosses process boundaries; the whole kernel
# (its request pipeline, kernel.transport, which every call crosses; its data layer; its own modules, the door's);
# and the model providers, whose JSON comes from outside (an OpenAI-compatible server's answers, the runners').
HELD_LIKE_DOMAINS = ("process", "kernel", "providers")


def test_every_domain_is_held_to_no_explicit_any():
    """Each domain's package (and process/, the kernel, the providers) is under `disallow_any_explicit`: a new domain, or
    one dropped from the list, would let `Any` (an annotation, `cast(Any, ...)`) carry unchecked data across its
    layers again."""
    held = {module for section in _mypy_overrides() if section.get("disallow_any_explicit") is True
            for module in section["module"]}  # type: ignore[union-attr]
    packages = [*(module.name for module in MODULES.all), *HELD_LIKE_DOMAINS]
    assert {f"persona_service.{name}.*" for name in packages} <= held


def test_every_module_let_off_no_explicit_any_still_holds_one():
    """The modules still allowed an `Any` (open JSON read without checks) only shrink: an entry whose file holds
    none any more leaves the list, so the module cannot gain one back unnoticed."""
    let_off = [module for section in _mypy_overrides() if section.get("disallow_any_explicit") is False
               for module in section["module"]]  # type: ignore[union-attr]
    stale = [module for module in let_off if not module.endswith(".settings")
             and "Any" not in _names_in_code((PACKAGE / pathlib.Path(*module.split(".")[1:])).with_suffix(".py"))]
    assert not stale, f"no Any left in these: remove them from pyproject.toml's disallow_any_explicit = false: {stale}"


# --- every strict flag for the server (mypy --strict, pyproject.toml) ------------------------------------------

def _let_off_strict(pyproject: pathlib.Path) -> list[str]:
    """'module: option' for each of mypy's strict flags (its own list, the one `mypy --help` shows under --strict)
    that the mypy configuration in `pyproject` does not hold for a module of persona_service, and for a module whose
    errors it ignores or some of whose error codes it disables."""
    import io
    from unittest import mock

    from mypy.config_parser import parse_config_file
    from mypy.main import define_options
    from mypy.options import Options

    _, _, strict_flags = define_options()
    options = Options()

    def set_strict() -> None:
        for dest, value in strict_flags:
            setattr(options, dest, value)

    report = io.StringIO()
    with mock.patch.dict(os.environ):  # (it sets MYPY_CONFIG_FILE_DIR)
        parse_config_file(options, set_strict, str(pyproject), stdout=report, stderr=report)
    assert not report.getvalue(), report.getvalue()
    modules = sorted({".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
                      for path in PACKAGE.rglob("*.py")})
    held = [*strict_flags, ("ignore_errors", False), ("disabled_error_codes", set())]
    return [f"{module}: {dest}" for module in modules for dest, value in held
            if getattr(options.clone_for_module(module), dest) != value]


def test_every_strict_flag_holds_for_the_server():
    """Issue 47: `mypy --strict server/persona_service` is what the project's `mypy` checks: no module of the server
    is let off a strict flag (pyproject's `strict = true`), so an unused `# type: ignore`, an untyped library call
    or an implicit re-export fails `make typecheck` as it fails `mypy --strict`."""
    assert _let_off_strict(REPO / "pyproject.toml") == []


_LET_OFF_ONE = "[[tool.mypy.overrides]]\nmodule = ['persona_service.kernel.wakeups']\ndisallow_untyped_calls = false\n\n"


@pytest.mark.parametrize(("old", "new", "let_off"), [
    ("\nstrict = true\n", "\n", "persona_service.kernel.wakeups: warn_unused_ignores"),
    ("[[tool.mypy.overrides]]\n", _LET_OFF_ONE + "[[tool.mypy.overrides]]\n",
     "persona_service.kernel.wakeups: disallow_untyped_calls"),
], ids=["strict dropped", "a module let off one flag"])
def test_a_strict_flag_let_off_fails(tmp_path, old, new, let_off):
    """The check above fails on pyproject.toml with `strict = true` dropped, or with one module let off one flag."""
    text = (REPO / "pyproject.toml").read_text()
    assert old in text
    (tmp_path / "pyproject.toml").write_text(text.replace(old, new, 1))
    assert let_off in _let_off_strict(tmp_path / "pyproject.toml")


# --- the checks catch what they claim to ---------------------------------------------

# (what, file, code appended to it, the check that must name that file)
PLANTED = [
    ("the kernel's data part importing its transport", "kernel/data/uow.py",
     "from persona_service.kernel.transport import auth as _planted\n", lint_imports),
    ("relative kernel->domain import", "kernel/principal.py", "from ..billing import repository as _planted\n",
     lint_imports),
    ("relative cross-domain repository import", "chat/service.py",
     "from ..personas import repository as _planted\n", lint_imports),
    ("cross-domain servicer import", "chat/service.py", "from persona_service.personas import servicer as _planted\n",
     lint_imports),
    ("cross-domain import past the api", "chat/service.py",
     "from persona_service.personas.directory import PersonaDirectory as _planted\n", lint_imports),
    ("relative cross-domain service import", "marketplace/service.py", "from ..billing import service as _planted\n",
     lint_imports),
    ("sqlalchemy in a servicer", "chat/servicer.py", "from sqlalchemy import text as _planted\n",
     sql_outside_repositories),
    ("raw SQL in a servicer", "chat/servicer.py",
     "def _planted(conn):\n    return conn.exec_driver_sql('SELECT count(*) FROM chat_sessions').scalar()\n",
     sql_outside_repositories),
    ("SQL built in a service", "personas/service.py",
     "from sqlalchemy import select as _s\n\n\ndef _planted(table):\n    return _s(table)\n", sql_outside_repositories),
    ("SQL built through a module alias in a service", "personas/service.py",
     "import sqlalchemy as sa\n\n\ndef _planted(table):\n    return sa.select(table)\n", sql_outside_repositories),
    ("a mapped class's Table in a service", "personas/service.py",
     "def _planted(mapped):\n    return mapped.__table__.update()\n", sql_outside_repositories),
    ("a DBAPI cursor in a servicer", "chat/servicer.py",
     "def _planted(ctx):\n    ctx.conn.connection.cursor().execute('delete from chat_messages')\n",
     sql_outside_repositories),
    ("lower-case SQL text in a service", "chat/service.py", "_PLANTED = 'select id from chat_sessions where id = %s'\n",
     sql_outside_repositories),
    ("grpc in a service", "personas/service.py", "import grpc as _planted\n", grpc_outside_servicers),
    ("grpc in a service that is not named service.py", "orgs/keys.py", "import grpc as _planted\n",
     grpc_outside_servicers),
    ("grpc in a worker", "webhooks/worker.py", "import grpc as _planted\n", grpc_outside_servicers),
    ("a commit in a service", "personas/service.py", "def _planted(conn):\n    conn.commit()\n",
     transactions_outside_units_of_work),
    ("a commit in a service that is not named service.py", "orgs/keys.py", "def _planted(conn):\n    conn.commit()\n",
     transactions_outside_units_of_work),
    ("a transaction of its own in a service", "personas/service.py",
     "def _planted(engine):\n    with engine.begin():\n        pass\n", transactions_outside_units_of_work),
    ("a file with no role", "chat/helpers.py", "def _planted():\n    return 1\n", files_without_a_role),
    ("another domain's tables imported", "chat/repository.py", "from ..orgs.tables import User as _planted\n",
     lint_imports),
    ("another domain's tables in SQL", "chat/repository.py", "_PLANTED = 'SELECT id FROM organizations'\n",
     other_domains_tables),
    ("another domain's tables in lower-case SQL", "chat/repository.py", "_PLANTED = 'select id from organizations'\n",
     other_domains_tables),
    ("another domain's table through the metadata", "chat/repository.py",
     "def _planted():\n    from persona_service.kernel.data.base import Base\n\n    return Base.metadata.tables['personas']\n",
     tables_outside_their_domain),
    ("a table re-exported through api.py", "personas/api.py",
     "from persona_service.personas.tables import Persona as Persona  # noqa: F401\n", tables_outside_their_domain),
    ("a service importing its tables", "chat/service.py", "from .tables import ChatSession as _planted\n",
     tables_outside_their_domain),
    ("a repository importing its own servicer lazily", "chat/repository.py",
     "def _planted():\n    from persona_service.chat import servicer\n\n    return servicer\n", layers_inside_domains),
    ("a service importing its servicer", "orgs/keys.py", "from .keys_servicer import ApiKeyServicer as _planted\n",
     layers_inside_domains),
    ("the kernel importing a domain by a computed name", "kernel/transport/outbox.py",
     "def _planted():\n    import importlib\n\n    return importlib.import_module('persona_service.' + 'bill' + 'ing.service')\n",
     dynamic_access),
    ("a servicer reaching the App through a bound method", "personas/servicer.py",
     "def _planted(deps):\n    return deps.invalidate.__self__\n", dynamic_access),
    ("a servicer reading an attribute by a computed name", "personas/servicer.py",
     "def _planted(deps, name):\n    return getattr(deps, name)\n", dynamic_access),
    ("the kernel names a domain", "kernel/principal.py", "_PLANTED = 'scim:provision'\n", kernel_naming_domains),
    ("a module's migration touching another's table", "billing/migrations/0009_billing_processor.py",
     "def _planted():\n    op.drop_column('users', 'name')\n", other_domains_tables),
    ("another module's table in a migration's SQL", "webhooks/migrations/0013_standard_webhooks.py",
     "def _planted():\n    op.execute('UPDATE personas SET slug = slug')\n", other_domains_tables),
    ("a raw row returned", "chat/repository.py", "def _planted(conn, stmt):\n    return conn.execute(stmt).mappings().all()\n",
     raw_rows),
    ("a row read by key", "chat/service.py", "def _planted(row):\n    return row[\"id\"]\n", rows_read_by_key),
    ("a servicer given the App", "personas/servicer.py", "from persona_service.process.app import App as _planted\n",
     reaches_past_the_door),
    ("the App imported relatively", "chat/openai_servicer.py", "from ..process import app as _planted\n",
     reaches_past_the_door),
    ("the App reached through the process package", "webhooks/servicer.py",
     "import persona_service.process as _process\n\n\ndef _planted() -> type:\n    return _process.app.App\n",
     reaches_past_the_door),
    ("a servicer importing the request context's module past the door", "scim/servicer.py",
     "from persona_service.kernel.transport.context import RequestContext as _planted\n", lint_imports),
    ("the request context's module through its package", "chat/servicer.py",
     "from persona_service.kernel.transport import context as _ctx\n\n\ndef _planted():\n    return _ctx.RequestContext\n",
     lint_imports),
    ("the door's function finding the call in a side table", "kernel/transport/convert.py",
     "import weakref\n\n_by_call = weakref.WeakKeyDictionary()\n\n\ndef int32(context):\n    return _by_call[context]\n",
     ambient_reads),
    ("the door's function reading a context variable", "kernel/clock.py",
     "import contextvars\n\n_now = contextvars.ContextVar('now')\n\n\ndef utcnow():\n    return _now.get()\n",
     ambient_reads),
    ("a servicer keeping its calls in a context variable", "personas/servicer.py",
     "import contextvars\n\n_planted = contextvars.ContextVar('call')\n", ambient_reads),
    ("a function of the kernel's door reading a context variable (every domain calling it reaches it)",
     "kernel/clock.py", "import contextvars\n\n_now = contextvars.ContextVar('now')\n\n\ndef utcnow():\n"
     "    return _now.get()\n", ambient_reads),
    ("a kernel function behind the door reading a context variable, reached through a door's class",
     "kernel/transport/context.py", "import contextvars as _cv\n\n_call = _cv.ContextVar('call')\n\n\n"
     "def _current_call():\n    return _call.get()\n\n\nRequestContext.planted = lambda self: _current_call()\n",
     ambient_reads),
    ("a service keeping a thread's slot for its calls at module level", "chat/service.py",
     "import threading as _t\n\n_planted = _t.local()\n", ambient_reads),
    ("a provider taking a snapshot of the context by an alias, lazily", "providers/composed.py",
     "def _planted():\n    from contextvars import copy_context as snapshot\n\n    return snapshot()\n", ambient_reads),
    ("a provider keeping a context variable of its own", "providers/local/generation.py",
     "import contextvars as _cv\n\n_planted = _cv.ContextVar('call')\n", ambient_reads),
    # Ambient state handed on rather than read where it is kept (issue 47): a thread-local, through a function's
    # result, a parameter, an attribute an object is built with, getattr with a literal.
    ("a door function returning a thread's slot it keeps", "kernel/clock.py",
     "import threading\n\n_slot = threading.local()\n\n\ndef utcnow():\n    return _slot\n", ambient_reads),
    ("the process assembly handing the fair gate's thread's slot to a function it is given, lazily", "process/stack.py",
     "def _planted(kind):\n    from persona_service.kernel.transport import fair\n\n    return kind.run(fair._holding)\n",
     ambient_reads),
    ("a kernel class keeping the fair gate's thread's slot on self when built", "kernel/transport/fair.py",
     "class Holder:\n    def __init__(self):\n        self.slot = _holding\n", ambient_reads),
    ("a service reading the fair gate's thread's slot by getattr with a literal", "chat/service.py",
     "def _planted():\n    from persona_service.kernel.transport import fair\n\n"
     "    return getattr(fair, '_holding').turn\n", ambient_reads),
    ("a domain reaching the runs past the kernel's door", "chat/service.py",
     "from persona_service.kernel.transport.runs import RunStore as _planted\n", lint_imports),
    ("a domain's command reaching the engine past the door, lazily", "orgs/commands.py",
     "def _planted():\n    from persona_service.kernel.data.engine import make_engine\n\n    return make_engine\n",
     lint_imports),
    ("a domain importing a kernel package past the door", "chat/service.py",
     "from persona_service.kernel import transport as _planted\n", lint_imports),
    ("a service importing Base through the door", "chat/service.py",
     "from persona_service.kernel.api import Base as _planted\n", tables_outside_their_domain),
    ("a type-only import loop inside the kernel", "kernel/clock.py",
     "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
     "    from persona_service.kernel.data.personal_data import Subject as _planted\n", loops_not_known),
    ("a function-level import loop between domains", "personas/service.py",
     "def _planted():\n    from persona_service.chat import api\n\n    return api\n", loops_not_known),
    ("a loop between the kernel's parts, lazily", "kernel/data/records.py",
     "def _planted():\n    from persona_service.kernel.transport import tasks\n\n    return tasks\n", loops_not_known),
    ("a provider importing the process assembly, lazily", "providers/pricing.py",
     "def _planted():\n    from persona_service.process import app\n\n    return app\n", loops_not_known),
    ("the kernel importing a provider, type-only", "kernel/resources.py",
     "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from persona_service.providers.retrying import Retrying as _planted\n",
     loops_not_known),
    ("the kernel importing the process assembly, lazily", "kernel/entry.py",
     "def _planted():\n    from persona_service.process import stack\n\n    return stack\n", lint_imports),
    ("a domain's migration importing the kernel past its door", "chat/migrations/0035_chat_message_partitions.py",
     "from persona_service.kernel.data.partition_swap import MonthlySwap as _planted\n", kernel_past_the_door),
    ("a domain's migration importing a kernel module lazily, relatively", "webhooks/migrations/0013_standard_webhooks.py",
     "def _planted():\n    from ...kernel.data import engine\n\n    return engine\n", kernel_past_the_door),
    ("a service importing a kernel module by a literal name", "chat/service.py",
     "def _planted():\n    import importlib\n\n    return importlib.import_module('persona_service.kernel.transport.fair')\n",
     kernel_past_the_door),
    ("a servicer reaching Redis past its hints' boundary", "personas/servicer.py",
     "def _planted(deps):\n    return deps.hints._client.keys('persona:limits:*')\n", private_reach),
    ("a servicer reading the settings its resources keep", "chat/servicer.py",
     "def _planted(deps):\n    return deps.resources._settings.database_url\n", private_reach),
    ("another domain's exported service's repository reached through it", "marketplace/service.py",
     "def _planted(work):\n    from persona_service.billing.api import BillingService\n"
     "    return BillingService(work, None, None)._repo.subscription('org')\n", private_reach),
    ("a domain importing the process assembly", "chat/service.py",
     "from persona_service.process.readiness import readiness_of as _planted\n", lint_imports),
    # Reaching past the door by what a name is at run time, not how an import spells it (issue 47).
    ("a service finding the engine's module in sys.modules", "chat/service.py",
     "def _planted():\n    import sys\n\n    return sys.modules['persona_service.kernel.data.engine'].make_engine\n",
     reaches_past_the_door),
    ("a service loading a kernel module by importlib.util's spec", "chat/service.py",
     "def _planted():\n    import importlib.util as u\n\n    return u.module_from_spec(u.find_spec('persona_service.kernel.transport.runs'))\n",
     reaches_past_the_door),
    ("a kernel module re-exported through a provider", "chat/service.py",
     "from persona_service.providers.remote import fair as _planted\n", reaches_past_the_door),
    ("a door class's module found by inspect", "chat/servicer.py",
     "import inspect as _i\n\nfrom persona_service.kernel.api import RequestContext as _RC\n\n\n"
     "def _planted():\n    return _i.getmodule(_RC).Connection\n", reaches_past_the_door),
    ("a servicer walking the garbage collector's referrers", "chat/servicer.py",
     "import gc as _gc\n\n\ndef _planted(deps):\n    return _gc.get_referrers(deps.hints)\n", reaches_past_the_door),
    ("the running task as a side table", "chat/service.py",
     "import asyncio as _a\n\n\ndef _planted():\n    return _a.current_task().call\n", reaches_past_the_door),
    ("__import__ from the builtins' table", "chat/service.py",
     "def _planted():\n    return __builtins__['__import__']('persona_service.kernel.data.engine')\n",
     reaches_past_the_door),
    # Typed data across layers: no Any crosses a domain's api.py, however spelled or wherever defined.
    ("a service's method returning Any, exported through api.py", "personas/service.py",
     "def _planted_any(self) -> dict[str, typing.Any]:\n    return {}\n\n\nimport typing  # noqa: E402\n\n"
     "PersonaService.export_raw = _planted_any\n", any_across_apis),
    ("a record's field typed Any by a module alias, exported through api.py", "orgs/api.py",
     "import typing as _t\nfrom dataclasses import dataclass as _dc\n\n\n@_dc(frozen=True)\nclass PlantedRecord:\n"
     "    extra: _t.Any\n\n\n__all__ = [*__all__, 'PlantedRecord']\n", any_across_apis),
    # A transaction ended or its mode changed by any spelling; SQL and names split in parts.
    ("a service keeping a connection's commit in a local", "personas/service.py",
     "def _planted(conn):\n    done = conn.commit\n    done()\n", transactions_outside_units_of_work),
    ("a service committing by getattr with a literal", "chat/service.py",
     "def _planted(conn):\n    getattr(conn, 'commit')()\n", transactions_outside_units_of_work),
    ("a service switching its connection to autocommit", "chat/service.py",
     "def _planted(conn):\n    return conn.execution_options(isolation_level='AUTOCOMMIT')\n",
     transactions_outside_units_of_work),
    ("SQL concatenated in a servicer", "chat/servicer.py", "_PLANTED = 'SELE' + 'CT id FROM chat_sessions'\n",
     sql_outside_repositories),
    ("the kernel naming a domain by concatenation", "kernel/principal.py", "_PLANTED = 'bill' + 'ing:invoices'\n",
     kernel_naming_domains),
    # The network is a service's; api.py hands out no repository; a literal import_module is an import.
    ("a repository calling the network through urllib, lazily", "chat/repository.py",
     "def _planted():\n    import urllib.request as _u\n\n    return _u.urlopen('http://example.com').read()\n",
     network_outside_services),
    ("a repository re-exported through api.py", "personas/api.py",
     "from persona_service.personas.repository import PersonaRepository as PersonaRepository  # noqa: F401\n\n"
     "__all__ = [*__all__, 'PersonaRepository']\n", api_exports_by_role),
    ("the kernel importing a provider by a literal import_module", "kernel/entry.py",
     "def _planted():\n    import importlib\n\n    return importlib.import_module('persona_service.providers.pricing')\n",
     loops_not_known),
    # SQL by what it is, not how it was imported.
    ("select reached through the repository's namespace in a service", "chat/service.py",
     "def _planted(table):\n    from persona_service.chat import repository as _r\n\n    return _r.select(table)\n",
     sql_reached_outside_repositories),
    # No new Any across the kernel's door, by any alias.
    ("a door function taking an aliased Any", "kernel/clock.py",
     "from typing import Any as _Loose  # noqa: E402\n\n\ndef iso(value: _Loose) -> str:  # noqa: F811\n"
     "    return str(value)\n", any_across_the_door),
    # ... nor one hidden in a type alias (the door's check reads what an alias stands for, not only its name).
    ("a door function returning a list of an alias of a dict of Any", "kernel/clock.py",
     "import typing as _t  # noqa: E402\n\n_Stamps = dict[str, _t.Any]\n\n\n"
     "def iso(value: object) -> list[_Stamps]:  # noqa: F811\n    return []\n", any_across_the_door),
    ("a door function returning a TypeAlias, by another name, of a quoted alias of Any", "kernel/ids.py",
     "from typing import Any as _Loose, TypeAlias as _TA  # noqa: E402\n\n_Raw: _TA = '_Loose | None'\n"
     "_Rows: _TA = 'list[_Raw]'\n\n\ndef new_id(prefix: str) -> _Rows:  # noqa: F811\n    return []\n",
     any_across_the_door),
    ("a door function taking a recursive alias with an Any at its leaves", "kernel/clock.py",
     "from typing import Any as _A  # noqa: E402\n\n_Tree = dict[str, '_Tree | list[_Tree] | _Leaf']\n_Leaf = _A\n\n\n"
     "def iso(value: _Tree) -> str:  # noqa: F811\n    return str(value)\n", any_across_the_door),
    # A service is handed the call's Work, never a connection, however it names one.
    ("a service annotating a connection it is handed", "chat/service.py",
     "from sqlalchemy import Connection as PlantedConnection  # noqa: E402\n\n\n"
     "def _planted(conn: 'PlantedConnection') -> None:\n    pass\n", connections_outside_repositories),
    ("a servicer making a Work of a connection, through getattr", "chat/servicer.py",
     "def _planted(conn):\n    from persona_service.kernel import api as _door\n\n"
     "    return getattr(_door.Work, 'on')(conn)\n", connections_outside_repositories),
    ("a service reaching the engine class lazily through sqlalchemy's engine module", "billing/service.py",
     "def _planted():\n    import sqlalchemy.engine as _e\n\n    return _e.Engine\n", connections_outside_repositories),
    # Call state kept beside the call: at module level or on the servicer every call shares.
    ("a service keeping calls in a module-level dict through a local", "chat/service.py",
     "_CALLS: dict[int, object] = {}\n\n\ndef _planted(ctx):\n    held = _CALLS\n    held[id(ctx)] = ctx\n",
     call_state_at_module_level),
    ("a servicer rebinding a global to the last call", "webhooks/servicer.py",
     "_LAST = None\n\n\ndef _planted(ctx):\n    global _LAST\n    _LAST = ctx\n", call_state_at_module_level),
    ("a servicer keeping the call on self in a method", "chat/servicer.py",
     "class _Planted:\n    def Get(self, request, ctx):\n        self.last = ctx\n", call_state_on_servicers),
    # Settings come once, when a module is built: none at a call site, whatever the spelling.
    ("getenv imported lazily in a repository", "billing/repository.py",
     "def _planted():\n    from os import getenv\n\n    return getenv('STRIPE_KEY')\n", settings_at_call_sites),
    ("settings loaded in a servicer's method, not its __init__", "chat/servicer.py",
     "class _Planted:\n    def serve(self):\n        from persona_service.kernel.api import load\n\n        return load()\n",
     settings_at_call_sites),
    # Private and dunder reads by a string or through an object's own table.
    ("a servicer reading a private attribute by getattr with a literal", "personas/servicer.py",
     "def _planted(deps):\n    return getattr(deps.hints, '_client').keys('*')\n", private_reach),
    ("a servicer reading an object's __dict__", "chat/servicer.py",
     "def _planted(deps):\n    return deps.hints.__dict__['_client']\n", private_reach),
    ("a door class's __mro__", "chat/servicer.py",
     "from persona_service.kernel.api import RequestContext as _RC\n\n\ndef _planted():\n"
     "    return type(_RC).__mro__[0].__dict__\n", private_reach),
    # Another domain's tables in any spelling of SQL (case, quotes, schema) and as a string of their own.
    ("another domain's schema-qualified table in a repository's SQL", "chat/repository.py",
     "_PLANTED = 'SELECT id FROM public.personas'\n", other_domains_tables),
    ("another domain's quoted table in a repository's SQL", "chat/repository.py",
     "_PLANTED = 'SELECT id FROM \"organizations\"'\n", other_domains_tables),
    ("another domain's table by sqlalchemy.table() in a repository", "chat/repository.py",
     "def _planted(conn):\n    import sqlalchemy as sa\n\n    return conn.execute(sa.select(sa.table('personas', "
     "sa.column('id')))).all()\n", other_domains_tables),
    ("a migration updating another's schema-qualified table through its bind", "chat/migrations/0035_chat_message_partitions.py",
     "def _planted():\n    import sqlalchemy as sa\n\n    op.get_bind().execute(sa.text('UPDATE public.personas SET slug = slug'))\n",
     other_domains_tables),
    ("a migration's lower-case SQL on another's quoted table", "webhooks/migrations/0013_standard_webhooks.py",
     "def _planted():\n    op.get_bind().exec_driver_sql('delete from public.\"organizations\"')\n",
     other_domains_tables),
    ("a domain servicer reading the erasers its module does not declare", "chat/servicer.py",
     "def _planted(deps):\n    return deps.modules.erasers\n", undeclared_needs),
    ("a job reading the review resolvers its module does not declare", "privacy/module.py",
     "def _planted(runtime):\n    return runtime.modules.review_resolvers\n", undeclared_needs),
    # By the value, not its spelling: the hooks copied elsewhere before the read (issue 47).
    ("a servicer copying the hooks into a local before reading the erasers", "chat/servicer.py",
     "def _planted(deps):\n    hooks = deps.modules\n    return hooks.erasers\n", undeclared_needs),
    ("a servicer keeping the hooks on self when built, reading the locks in a method", "chat/servicer.py",
     "class _Planted:\n    def __init__(self, deps):\n        self.hooks = deps.modules\n\n"
     "    def locks(self):\n        return self.hooks.erasure_locks\n", undeclared_needs),
    ("a servicer unpacking the hooks from a tuple", "webhooks/servicer.py",
     "def _planted(deps):\n    resources, hooks = deps.resources, deps.modules\n    return hooks.review_resolvers\n",
     undeclared_needs),
    ("a servicer handing the hooks to a helper of its file", "personas/servicer.py",
     "def _exporters(hooks):\n    return hooks.personal_data\n\n\ndef _planted(deps):\n"
     "    return _exporters(hooks=deps.modules)\n", undeclared_needs),
    ("a servicer reaching the hooks by getattr with a literal", "chat/servicer.py",
     "def _planted(deps):\n    return getattr(deps, 'modules').erasers\n", undeclared_needs),
    ("a servicer's method returning its deps' hooks", "scim/servicer.py",
     "class _Planted:\n    def __init__(self, deps):\n        self.deps = deps\n\n    def _hooks(self):\n"
     "        return self.deps.modules\n\n    def erase(self):\n        return getattr(self._hooks(), 'erasers')\n",
     undeclared_needs),
    ("the hooks handed to a function of another file that reads the erasers", "chat/service.py",
     "def _planted_erasers(hooks):\n    return hooks.erasers\n", undeclared_needs),
    ("a job passing its runtime's hooks through a helper's parameter by a walrus", "privacy/module.py",
     "def _resolvers(hooks):\n    return hooks.review_resolvers\n\n\ndef _planted(runtime):\n"
     "    return (held := runtime.modules) and _resolvers(held)\n", undeclared_needs),
    # A second review's kinds (issue 47), each passing every check before: by the means, not the spelling.
    # A hidden attribute named by a string, whatever reads it.
    ("a servicer reading a private attribute by inspect.getattr_static", "chat/servicer.py",
     "def _planted(deps):\n    import inspect as _i\n\n    return _i.getattr_static(deps.hints, '_client').keys('*')\n",
     private_reach),
    ("a service posing as its repository module to have Work.of hand it the connection", "chat/service.py",
     "__name__ = 'persona_service.chat.repository'\n\n\nclass _Forged:\n    def __init__(self, conn):\n"
     "        self.conn = conn\n\n\ndef _planted(work):\n    return work.of(_Forged).conn\n", private_reach),
    ("a servicer reading private state by functools.reduce(getattr, names)", "chat/servicer.py",
     "import functools as _f  # noqa: E402\n\n\ndef _planted(deps):\n"
     "    return _f.reduce(getattr, ('resources', '_settings'), deps).database_url\n", private_reach),
    ("a service forging a repository class's module to have Work.of hand it the connection", "chat/service.py",
     "def _planted(work):\n    forged = type('Forged', (), {'__module__': 'persona_service.chat.repository',\n"
     "                                 '__init__': lambda self, c: setattr(self, 'c', c)})\n"
     "    return work.of(forged).c\n", private_reach),
    # Any function of a reflective module (introspection, loaders, unpickling, frames, raw memory), listed or not.
    ("a service loading a kernel function by unpickling a global", "chat/service.py",
     "import pickle as _p  # noqa: E402\n\n\ndef _planted():\n"
     "    return _p.loads(b'cpersona_service.kernel.data.engine\\nmake_engine\\n.')\n", reaches_past_the_door),
    ("a service loading a kernel file by path with importlib.machinery's loader", "chat/service.py",
     "import importlib.machinery as _m  # noqa: E402\nimport pathlib as _pl  # noqa: E402\n\n\ndef _planted():\n"
     "    path = _pl.Path(__file__).parents[1] / 'kernel' / 'transport' / 'fair.py'\n"
     "    return _m.SourceFileLoader('fair_copy', str(path)).load_module()\n", reaches_past_the_door),
    ("a service walking the stack's frames with traceback", "chat/service.py",
     "import traceback as _tb  # noqa: E402\n\n\ndef _planted():\n    return next(_tb.walk_stack(None))[0].f_builtins\n",
     reaches_past_the_door),
    ("a service locating a kernel module by pydoc.locate", "chat/service.py",
     "def _planted():\n    import pydoc as _pd\n\n    return _pd.locate('persona_service.kernel.transport.fair').FairExecutor\n",
     reaches_past_the_door),
    ("a service reading an object by its address through ctypes", "chat/service.py",
     "import ctypes as _c  # noqa: E402\n\n\ndef _planted(deps):\n    return _c.cast(id(deps.hints), _c.py_object).value\n",
     reaches_past_the_door),
    # Another domain past its api.py, by what is reached rather than by an import.
    ("a domain reaching another's repository through the package an import of its api.py binds", "chat/service.py",
     "import persona_service.personas.api  # noqa: E402\n\n\ndef _planted(conn):\n"
     "    return persona_service.personas.repository.PersonaRepository(conn)\n", reaches_past_the_door),
    ("api.py re-exporting its repository module", "personas/api.py",
     "from persona_service.personas import repository as repository  # noqa: E402\n", api_exports_by_role),
    ("an exported function handing out a module of its domain across api.py", "personas/api.py",
     "import types as _types  # noqa: E402\n\n\ndef planted_helpers() -> _types.ModuleType:\n"
     "    from persona_service.personas import repository\n\n    return repository\n", api_exports_by_role),
    ("an exported service's method handing out its repository across api.py", "personas/service.py",
     "from persona_service.personas.repository import PersonaRepository as _PR  # noqa: E402\n\n\n"
     "def _planted_repo(self) -> _PR:\n    return self.work.of(_PR)\n\n\nPersonaService.repository = _planted_repo\n",
     api_exports_by_role),
    # Settings and the environment, by what they are.
    ("a service building its module's Settings at a call site", "chat/service.py",
     "def _planted():\n    from persona_service.chat.settings import ChatSettings\n\n    return ChatSettings()\n",
     settings_at_call_sites),
    ("a service reading the environment through posix.environ", "chat/service.py",
     "import posix as _px  # noqa: E402\n\n\ndef _planted():\n    return _px.environ.get(b'DATABASE_URL')\n",
     settings_at_call_sites),
    # Call state kept beside the call, in any holder.
    ("a servicer keeping calls in a container its __init__ built", "chat/servicer.py",
     "class _Planted:\n    def __init__(self):\n        self.seen = {}\n\n    def Get(self, request, ctx):\n"
     "        self.seen[request.id] = ctx\n", call_state_on_servicers),
    ("a service keeping the last call on a module-level class's attribute", "chat/service.py",
     "class _Memo:\n    last = None\n\n\ndef _planted(ctx):\n    _Memo.last = ctx\n", call_state_at_module_level),
    ("a service keeping calls in a module-level list through heapq", "chat/service.py",
     "import heapq as _hq  # noqa: E402\n\n_PENDING: list[tuple[int, int]] = []\n\n\ndef _planted(ctx):\n"
     "    _hq.heappush(_PENDING, (1, id(ctx)))\n", call_state_at_module_level),
    ("a service keeping calls in a module-level queue", "chat/service.py",
     "import queue as _q  # noqa: E402\n\n_PENDING: _q.Queue[object] = _q.Queue()\n\n\ndef _planted(ctx):\n"
     "    _PENDING.put(ctx)\n", call_state_at_module_level),
    ("a service memoizing a read by the call's Work", "chat/service.py",
     "import functools as _ft  # noqa: E402\n\n\n@_ft.cache\ndef _planted(work: Work, org_id: str) -> int:\n"
     "    return work.of(ChatSessionRepository).count(org_id)\n", call_state_at_module_level),
    # Every domain's tables at once, without naming one.
    ("a repository reaching the shared metadata through its mapped class, by a local", "chat/repository.py",
     "def _planted():\n    schema = ChatSession.metadata\n    return schema.sorted_tables\n", whole_schema_outside_tables),
    ("a repository walking every mapped class through Base.registry", "chat/repository.py",
     "def _planted():\n    from persona_service.kernel.api import Base\n\n"
     "    return [m.class_ for m in Base.registry.mappers]\n", whole_schema_outside_tables),
    ("a repository reflecting the database's tables", "chat/repository.py",
     "def _planted(conn):\n    import sqlalchemy as sa\n\n    names = sa.inspect(conn).get_table_names()\n"
     "    return conn.execute(sa.select(sa.table(names[0], sa.column('id')))).all()\n", whole_schema_outside_tables),
    # A repository's connection and the network.
    ("a repository closing the unit of work's connection, through a local", "chat/repository.py",
     "class _PlantedRepository(ChatSessionRepository):\n    def done(self) -> None:\n        conn = self._conn\n"
     "        conn.close()\n", connection_used_beyond_statements),
    ("a repository calling the network through xmlrpc", "chat/repository.py",
     "def _planted():\n    import xmlrpc.client as _x\n\n    return _x.ServerProxy('http://example.com').ping()\n",
     network_outside_services),
    # ... and the checks' own neighbours, tried after (the same review).
    ("a service setting a module-level class's attribute by setattr", "chat/service.py",
     "class _Memo:\n    last = None\n\n\ndef _planted(ctx):\n    setattr(_Memo, 'last', ctx)  # noqa: B010\n",
     call_state_at_module_level),
    ("a service keeping calls in a closure's cell made at module level", "chat/service.py",
     "def _make():\n    seen = []\n\n    def keep(ctx):\n        seen.append(ctx)\n\n    return keep\n\n\n"
     "_planted = _make()\n", call_state_at_module_level),
    ("a service keeping calls in a default argument made by a call", "chat/service.py",
     "import collections as _co  # noqa: E402\n\n\ndef _planted(ctx, _seen=_co.deque()):  # noqa: B008\n"
     "    _seen.append(ctx)\n", call_state_at_module_level),
    ("a service reading a frame's builtins off a traceback", "chat/service.py",
     "import sys as _s  # noqa: E402\n\n\ndef _planted():\n    try:\n        raise ValueError\n    except ValueError:\n"
     "        return _s.exc_info()[2].tb_frame.f_builtins\n", dynamic_access),
    ("a domain's tables declaring an ORM relationship to another domain's mapped class", "chat/tables.py",
     "from sqlalchemy.orm import relationship as _rel  # noqa: E402\n\n"
     "ChatSession.planted_persona = _rel('Persona', viewonly=True)\n", other_domains_tables),
    # A third review (issue 47): kinds that passed every static check, each caught now by what it does.
    ("a service's SQL text opened by a comment", "chat/service.py",
     "_PLANTED_RECENT = '/* recent first */ SELECT id FROM chat_sessions ORDER BY created_at DESC'\n",
     sql_outside_repositories),
    ("a service's SQL text as a bytes literal", "chat/service.py",
     "_PLANTED_PURGE = b'DELETE FROM chat_messages WHERE session_id = %s'\n", sql_outside_repositories),
    ("a servicer's COPY statement", "chat/servicer.py",
     "_PLANTED_EXPORT = 'COPY chat_messages TO STDOUT (FORMAT csv)'\n", sql_outside_repositories),
    ("another domain's table after a comma in a repository's FROM", "chat/repository.py",
     "_PLANTED = 'SELECT s.id FROM chat_sessions s, personas p WHERE p.id = s.persona_id AND p.archived'\n",
     other_domains_tables),
    ("another domain's table in a repository's DELETE ... USING", "chat/repository.py",
     "_PLANTED = 'DELETE FROM chat_sessions USING personas WHERE personas.id = chat_sessions.persona_id'\n",
     other_domains_tables),
    ("a domain's tables.py declaring another domain's table", "chat/tables.py",
     'from sqlalchemy import Column as _Col, String as _Str, Table as _Tbl  # noqa: E402\n\n'
     "PersonasSeen = _Tbl('personas', Base.metadata, _Col('id', _Str, primary_key=True), extend_existing=True)\n",
     other_domains_tables),
    ("a relationship to another domain's mapped class by its module path", "chat/tables.py",
     'from sqlalchemy.orm import relationship as _rel  # noqa: E402\n\n'
     "ChatSession.planted_persona = _rel('persona_service.personas.tables.Persona', viewonly=True)\n",
     other_domains_tables),
    ('a repository ending the transaction in SQL text', "chat/repository.py",
     "def _planted_checkpoint(conn: Connection) -> None:\n    conn.execute(text('COMMIT'))\n",
     transactions_outside_units_of_work),
    ("a repository closing the unit of work's transaction object", "chat/repository.py",
     'class _PlantedRepository(ChatSessionRepository):\n    def abandon(self) -> None:\n'
     '        transaction = self._conn.get_transaction()\n        if transaction is not None:\n'
     '            transaction.close()\n', connection_used_beyond_statements),
    ('a repository closing the driver connection beneath its connection', "chat/repository.py",
     'class _PlantedRepository(ChatSessionRepository):\n    def reset(self) -> None:\n'
     '        self._conn.connection.close()\n', connection_used_beyond_statements),
    ("a repository opening a driver connection by psycopg's connect imported by name", "chat/repository.py",
     'def _planted_count(url: str) -> object:\n    from psycopg import connect as _open\n\n'
     '    with _open(url) as raw:\n'
     "        return raw.execute('SELECT count(*) FROM chat_sessions').fetchone()\n", connections_outside_repositories),
    ('a repository taking a connection from a psycopg_pool of its own', "chat/repository.py",
     'def _planted_pool(url: str) -> object:\n    import psycopg_pool\n\n'
     '    return psycopg_pool.ConnectionPool(url, min_size=1).getconn()\n', connections_outside_repositories),
    # libpq beneath psycopg: a PGconn a domain opens is C's (no audit event for the boundary guard), and the class is
    # psycopg_binary's or psycopg_c's however it is imported.
    ('a repository opening a libpq connection of its own beneath psycopg', "chat/repository.py",
     'from psycopg.pq import PGconn as _PGconn  # noqa: E402\n\n\ndef _planted_libpq(dsn: bytes) -> object:\n'
     '    return _PGconn.connect(dsn)\n', connections_outside_repositories),
    ('a service reading the environment through os.path.expandvars', "chat/service.py",
     'def _planted_prompt(template: str) -> str:\n    import os.path as _p\n\n'
     '    return _p.expandvars(template)\n', settings_at_call_sites),
    ('a service reading a .env file at a call site', "chat/service.py",
     'def _planted_key() -> str | None:\n    from dotenv import dotenv_values\n\n'
     "    return dotenv_values('.env').get('OPENAI_API_KEY')\n", settings_at_call_sites),
    ('a service keeping calls in a class-level dict through self', "chat/service.py",
     'class _PlantedService:\n    _recent: dict[str, object] = {}\n\n'
     '    def remember(self, ctx: object) -> None:\n        self._recent[str(id(ctx))] = ctx\n',
     call_state_at_module_level),
    ('a service appending calls to a list a module-level class holds', "chat/service.py",
     'class _Registry:\n    calls: list[object] = []\n\n\ndef _planted(ctx: object) -> None:\n'
     '    _Registry.calls.append(ctx)\n', call_state_at_module_level),
    ('a service keeping calls in a module-level UserDict', "chat/service.py",
     'import collections as _co  # noqa: E402\n\n_SEEN: _co.UserDict[int, object] = _co.UserDict()\n\n\n'
     'def _planted(ctx: object) -> None:\n    _SEEN[id(ctx)] = ctx\n', call_state_at_module_level),
    ('an untyped lambda exported through api.py', "personas/api.py",
     'planted_lookup = lambda directory, persona_id: directory.get(persona_id)  # noqa: E731\n', any_across_apis),
    ('a namedtuple with untyped fields exported through api.py', "personas/api.py",
     'import collections as _co  # noqa: E402\n\n'
     "PlantedSummary = _co.namedtuple('PlantedSummary', 'id name tags')\n", any_across_apis),
    ('an exported function handing out its repository typed as object', "personas/api.py",
     'from persona_service.kernel.api import Work as _Work  # noqa: E402\n\n\n'
     'def planted_versions(work: _Work) -> object:\n'
     '    from persona_service.personas.repository import PersonaRepository\n\n'
     '    return work.of(PersonaRepository)\n', api_exports_by_role),
    ('a service making a Redis client of its own', "chat/service.py",
     'def _planted_bump(url: str) -> int:\n    import redis\n\n'
     "    return int(redis.Redis.from_url(url).incr('chat:planted'))\n", network_outside_services),
    ('a service.py calling the network itself, not through its client file', "personas/service.py",
     'def _planted_fetch(host: str) -> bytes:\n    import http.client as _h\n\n'
     "    conn = _h.HTTPSConnection(host)\n    conn.request('GET', '/')\n"
     '    return conn.getresponse().read()\n', network_outside_services),
    ("a repository starting a process (os.popen('curl ...'))", "chat/repository.py",
     'def _planted_fetch(url: str) -> str:\n    import os\n\n'
     "    return os.popen(f'curl -s {url}').read()\n", network_outside_services),
    ('a repository resolving a host through an event loop of its own', "chat/repository.py",
     'def _planted_resolve(host: str) -> object:\n    import asyncio as _a\n\n'
     '    loop = _a.new_event_loop()\n    return loop.run_until_complete(loop.getaddrinfo(host, 443))\n',
     network_outside_services),
    ('a repository connecting through multiprocessing.connection', "chat/repository.py",
     'def _planted_ping(port: int) -> object:\n    from multiprocessing.connection import Client\n\n'
     "    return Client(('localhost', port)).recv()\n", network_outside_services),
    ('a kernel class behind the door through typing.get_type_hints of a door class', "chat/service.py",
     'def _planted_resources() -> object:\n    import typing as _t\n\n'
     '    from persona_service.kernel.api import Runtime as _R\n\n'
     "    return _t.get_type_hints(_R)['resources']\n", reaches_past_the_door),
    ("a domain's migration importing another domain's repository", "chat/migrations/0035_chat_message_partitions.py",
     'def _planted_backfill(conn):\n'
     '    from persona_service.personas.repository import PersonaRepository\n\n'
     '    return PersonaRepository(conn)\n', kernel_past_the_door),
    ('a repository method handing out SQLAlchemy rows', "chat/repository.py",
     'from sqlalchemy import Row as _Row  # noqa: E402\n\n\n'
     'class _PlantedRepository(ChatSessionRepository):\n'
     '    def recent(self) -> Sequence[_Row[str, str]]:\n'
     '        return self._conn.execute(select(ChatSession.id, ChatSession.title)).all()\n', raw_rows),
    ("a repository walking every mapped class through its own class's mapper", "chat/repository.py",
     'def _planted_all() -> list[type]:\n    from sqlalchemy.orm import class_mapper\n\n'
     '    return [m.class_ for m in class_mapper(ChatSession).registry.mappers]\n', whole_schema_outside_tables),
]


@pytest.mark.parametrize(("what", "file", "code", "check"), PLANTED, ids=[p[0] for p in PLANTED])
def test_each_planted_violation_fails(tmp_path, what, file, code, check):
    copy = tmp_path / "persona_service"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "static"))
    planted = copy / file
    planted.write_text((planted.read_text() if planted.exists() else "") + "\n\n" + code)
    found = check(copy)
    assert found, f"{check.__name__} did not catch: {what}"
    module = "persona_service." + file.removesuffix(".py").replace("/", ".")
    assert file in str(found) or module in str(found), found


# Violations planted across files: (what, {file: code appended}, check, the file the violation is found in).
PLANTED_ACROSS_FILES = [
    ("a door function taking an alias of Any imported, type-only and relatively, from another kernel module",
     {"kernel/json_values.py": "from typing import Any as _A  # noqa: E402\n\nLooseObject = dict[str, _A]\n",
      "kernel/ids.py": "from typing import TYPE_CHECKING  # noqa: E402\n\nif TYPE_CHECKING:\n"
                       "    from .json_values import LooseObject\n\n\n"
                       "def new_ids(values: list[LooseObject]) -> list[str]:  # noqa: F811\n    return []\n"},
     any_across_the_door, "kernel/ids.py"),
    ("a door class's field typed by a module's alias of an alias of Any, read through the module", {
        "kernel/json_values.py": "from typing import Any as _A  # noqa: E402\n\n_Inner = _A | None\n"
                                 "Outer = tuple[_Inner, ...]\n",
        "kernel/principal.py": "from persona_service.kernel import json_values as _jv  # noqa: E402\n\n"
                               "Principal.__annotations__['planted'] = 'dict[str, _jv.Outer]'\n"},
     any_across_the_door, "kernel/principal.py"),
]


@pytest.mark.parametrize(("what", "files", "check", "found_in"), PLANTED_ACROSS_FILES,
                         ids=[p[0] for p in PLANTED_ACROSS_FILES])
def test_each_violation_planted_across_files_fails(tmp_path, what, files, check, found_in):
    copy = tmp_path / "persona_service"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "static"))
    for file, code in files.items():
        planted = copy / file
        planted.write_text(planted.read_text() + "\n\n" + code)
    found = check(copy)
    assert found, f"{check.__name__} did not catch: {what}"
    module = "persona_service." + found_in.removesuffix(".py").replace("/", ".")
    assert found_in in str(found) or module in str(found), found


def test_blanking_any_rule_fails_the_self_test():
    """Each AST rule catches at least one planted violation that names it as its check, so a rule
    that returned nothing would fail that planted case."""
    assert {rule.__name__ for rule in AST_RULES} <= {check.__name__ for *_, check in PLANTED}


# --- the registry and the event catalogue ------------------------------------------------


def _domain_folders() -> set[str]:
    return {p.parent.name for p in PACKAGE.glob("*/__init__.py")} - SHARED


def test_every_domain_folder_is_registered():
    registered = {module.name for module in MODULES.all}
    assert _domain_folders() == registered


def test_every_event_type_comes_from_the_enum_and_has_one_emitter():
    from persona.v1 import events_pb2
    from persona_service.kernel.transport.outbox import EVENT_TYPES
    from persona_service.kernel.transport.validation import enum_wire_names

    assert len(events_pb2.EventType.keys()) == 17  # sixteen types and UNSPECIFIED
    assert EVENT_TYPES == set(enum_wire_names("persona.v1.EventType")) and len(EVENT_TYPES) == 16
    declared = [t for m in MODULES.all for t in m.event_types]
    assert len(declared) == len(set(declared)), "an event type is declared by two modules"
    assert set(declared) == EVENT_TYPES


def test_no_proto_repeats_the_event_type_list():
    from persona_service.kernel.transport.outbox import EVENT_TYPES

    for proto in (PACKAGE.parents[1] / "proto").rglob("*.proto"):
        if proto.name != "events.proto":
            text = proto.read_text()
            named = {t for t in EVENT_TYPES if f'"{t}"' in text}  # comments may name a type in backquotes
            assert not named, f"{proto.name} lists event types {sorted(named)}: use one_of_enum"
