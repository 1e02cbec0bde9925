"""The layout's rules, checked on the source: the kernel imports no domain
module, every domain folder is in the registry, and modules reach each
other only through services (never another module's repository or tables)."""

from __future__ import annotations

import ast
import pathlib

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
