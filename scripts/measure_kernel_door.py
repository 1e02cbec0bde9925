"""How many of the kernel's modules the domains import (issue 47, "one door"; target: 1, kernel/api.py).

    python scripts/measure_kernel_door.py            (the summary)
    python scripts/measure_kernel_door.py --names    (also each kernel module with the names domains take from it)

A domain is a package directly under server/persona_service/ that is neither the kernel nor the shared
providers (`kernel/`, `providers/`): every file under it counts, its migrations included. `registry.py` and
`cli.py` are the composition root, above every domain, and are not counted. Imports are read with `ast`, lazy
ones and those under TYPE_CHECKING included, relative ones resolved; `from persona_service.kernel.x import y`
counts module `kernel.x` when `y` is a name in it and module `kernel.x.y` when `y` is a submodule.

Measured: before the door (e91e132), 42 of the kernel's 83 modules, 111 names, 328 import statements in 99
files (the issue's 41 of 82 was an earlier commit's); with it, 1 of 85 (kernel.api; it and kernel/entry.py
are new), the same 111 names from one module.
"""

from __future__ import annotations

import argparse
import ast
import pathlib
from collections import defaultdict

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = REPO / "server" / "persona_service"
NOT_DOMAINS = {"kernel", "providers", "process"}


def kernel_modules(package: pathlib.Path = PACKAGE) -> set[str]:
    """Every module of the kernel (packages as their dotted name), e.g. `kernel.data.uow`."""
    found = set()
    for path in (package / "kernel").rglob("*.py"):
        parts = path.relative_to(package).with_suffix("").parts
        found.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def domains(package: pathlib.Path = PACKAGE) -> list[str]:
    return sorted(p.name for p in package.iterdir()
                  if (p / "__init__.py").exists() and p.name not in NOT_DOMAINS)


def _absolute(path: pathlib.Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = ["persona_service", *path.parts[:-1]]
    return ".".join([*package[:len(package) - node.level + 1], *filter(None, [node.module])])


def kernel_imports(package: pathlib.Path = PACKAGE) -> list[tuple[str, int, str, str]]:
    """(file, line, kernel module, name) for each name a domain file takes from the kernel
    (name '' for `import persona_service.kernel.x`)."""
    modules = kernel_modules(package)
    found = []
    for domain in domains(package):
        for path in sorted((package / domain).rglob("*.py")):
            relative = path.relative_to(package)
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.name.startswith("persona_service.kernel"):
                            found.append((str(relative), node.lineno, alias.name.removeprefix("persona_service."), ""))
                elif isinstance(node, ast.ImportFrom):
                    base = _absolute(relative, node).removeprefix("persona_service.")
                    if base != "kernel" and not base.startswith("kernel."):
                        continue
                    for alias in node.names:
                        sub = f"{base}.{alias.name}"
                        if sub in modules:
                            found.append((str(relative), node.lineno, sub, "*"))
                        else:
                            found.append((str(relative), node.lineno, base, alias.name))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--names", action="store_true", help="list each module with the names taken from it")
    args = parser.parse_args()
    imports = kernel_imports()
    by_module: dict[str, set[str]] = defaultdict(set)
    for _, _, module, name in imports:
        by_module[module].add(name)
    names = {(module, name) for _, _, module, name in imports}
    statements = {(file, line) for file, line, _, _ in imports}
    files = {file for file, _, _, _ in imports}
    print(f"domains: {len(domains())} ({', '.join(domains())})")
    print(f"kernel modules imported by domains: {len(by_module)} of {len(kernel_modules())}")
    print(f"distinct names imported: {len(names)}; import statements: {len(statements)}; in {len(files)} files")
    if args.names:
        for module in sorted(by_module):
            shown = sorted(n or "(the module)" for n in by_module[module])
            print(f"  {module}: {', '.join('(the module)' if n == '*' else n for n in shown)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
