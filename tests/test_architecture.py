"""The layout's rules, checked on the source: the kernel imports no domain
module, every domain folder is in the registry, and modules reach each
other only through services (never another module's repository or tables)."""

from __future__ import annotations

import ast
import pathlib
import re

import pytest
from persona_service.registry import MODULES

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "server" / "persona_service"
# Infrastructure shared by every layer; neither kernel nor a domain.
SHARED = {"kernel", "providers"}


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n for n in names if n.startswith("persona_service.")}


def _domain_folders() -> set[str]:
    return {p.parent.name for p in PACKAGE.glob("*/__init__.py")} - SHARED


def test_kernel_imports_no_module():
    offenders = []
    for path in (PACKAGE / "kernel").rglob("*.py"):
        for name in _imports(path):
            top = name.split(".")[1]
            if top not in SHARED:
                offenders.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert offenders == []


def test_providers_import_no_module():
    offenders = [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in (PACKAGE / "providers").rglob("*.py")
        for name in _imports(path)
        if name.split(".")[1] not in SHARED
    ]
    assert offenders == []


def test_every_domain_folder_is_registered():
    registered = {module.name for module in MODULES.all}
    assert _domain_folders() == registered


@pytest.mark.parametrize("domain", sorted(_domain_folders()))
def test_modules_use_only_each_others_services(domain):
    """Another module's repository, tables or internals are off limits."""
    private = ("repository", "keys_repository", "tables")
    offenders = []
    for path in (PACKAGE / domain).rglob("*.py"):
        for name in _imports(path):
            parts = name.split(".")
            if parts[1] in SHARED | {domain, "registry"} or len(parts) < 3:
                continue
            if parts[2] in private:
                offenders.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert offenders == []


# Types of the spec whose modules do not exist yet (billing, marketplace).
NOT_YET_EMITTED: set[str] = set()


def test_every_event_type_comes_from_the_enum_and_has_one_emitter():
    from persona.v1 import events_pb2
    from persona_service.kernel.outbox import EVENT_TYPES
    from persona_service.kernel.transport.validation import enum_wire_names

    assert len(events_pb2.EventType.keys()) == 17  # sixteen types and UNSPECIFIED
    assert EVENT_TYPES == set(enum_wire_names("persona.v1.EventType")) and len(EVENT_TYPES) == 16
    declared = [t for m in MODULES.all for t in m.event_types]
    assert len(declared) == len(set(declared)), "an event type is declared by two modules"
    assert set(declared) | NOT_YET_EMITTED == EVENT_TYPES
    assert not set(declared) & NOT_YET_EMITTED, "update NOT_YET_EMITTED: the type has an emitter now"


def test_no_proto_repeats_the_event_type_list():
    from persona_service.kernel.outbox import EVENT_TYPES

    for proto in (PACKAGE.parents[1] / "proto").rglob("*.proto"):
        if proto.name != "events.proto":
            text = proto.read_text()
            named = {t for t in EVENT_TYPES if f'"{t}"' in text}  # comments may name a type in backquotes
            assert not named, f"{proto.name} lists event types {sorted(named)}: use one_of_enum"


ROW_READ = re.compile(r"\b(?:row|rows\[-?\d+\]|record|session|parent)\[\"\w+\"\]")


def test_rows_cross_layers_as_typed_records():
    """Repositories turn every row they read into a record (kernel.db.records
    or a typed constructor); services and servicers never read rows by key."""
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text()
        name = path.relative_to(PACKAGE)
        for number, line in enumerate(source.splitlines(), 1):
            if ".mappings()" in line:
                window = "\n".join(source.splitlines()[number - 1 : number + 1])
                assert "record" in window, f"{name}:{number} returns raw rows: {line.strip()}"
            assert not ROW_READ.search(line), f"{name}:{number} reads a row by key: {line.strip()}"
