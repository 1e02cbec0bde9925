"""Import cycles in persona_service, at three granularities (issue 47, "No loops").

Every import counts: module-level, inside a function, under `if TYPE_CHECKING:`, and a literal name imported by a
call (`importlib.import_module("persona_service.chat.api")`, `__import__(...)`),
since a type-only loop still ties two pieces together (neither can be read,
moved or tested without the other). Cycles are reported as strongly connected
components of the import graph, at the granularity of:

- packages: the domains, the kernel, the providers and the process assembly
  (`personas <-> chat`, `kernel <-> providers`);
- kernel parts: `kernel/transport`, `kernel/data` and the kernel's own
  top-level modules (`kernel/clock.py`, `kernel/module.py`);
- modules: every module of the package (`kernel/data/audit_repository.py`).
"""

from __future__ import annotations

import ast
import functools
import pathlib
from collections.abc import Callable, Iterator

ROOT = "persona_service"


def module_name(root: pathlib.Path, path: pathlib.Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([ROOT, *parts])


def _modules(root: pathlib.Path) -> dict[str, pathlib.Path]:
    return {module_name(root, path): path for path in sorted(root.rglob("*.py")) if "migrations" not in path.parts}


def _targets(path: pathlib.Path, root: pathlib.Path, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The package's modules an import names: `from a import b` is a.b when b is a module, else a."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:
        package = module_name(root, path).split(".")
        if path.name != "__init__.py":
            package.pop()
        base = ".".join([*package[:len(package) - node.level + 1], *filter(None, [node.module])])
    for alias in node.names:
        yield f"{base}.{alias.name}"
    yield base


def _literal_import(node: ast.AST) -> ast.Import | None:
    """`importlib.import_module("a.b")` or `__import__("a.b")` (any spelling of the callee) as `import a.b`."""
    if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str) and not node.args[0].value.startswith(".")):
        return None
    callee = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
    if callee not in ("import_module", "__import__"):
        return None
    return ast.Import(names=[ast.alias(name=node.args[0].value)], lineno=node.lineno, col_offset=node.col_offset)


@functools.cache
def _imports(text: str) -> tuple[ast.Import | ast.ImportFrom, ...]:
    """A source's imports, anywhere in it: statements, and a literal name imported by a call (an import by a
    computed name is test_architecture's `dynamic_access`); parsed once per distinct source (the graph is built
    again for each planted copy of the package, in which one file differs)."""
    nodes = list(ast.walk(ast.parse(text)))
    return tuple(node for node in nodes if isinstance(node, ast.Import | ast.ImportFrom)) \
        + tuple(found for node in nodes if (found := _literal_import(node)) is not None)


def import_graph(root: pathlib.Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, anywhere in the file."""
    modules = _modules(root)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in _imports(path.read_text()):
            found = [t for t in _targets(path, root, node) if t in modules and t != name]
            # `from a import b`: b is the module when it is one; a is named only for attributes
            graph[name] |= set(found[:-1] or found[-1:]) if isinstance(node, ast.ImportFrom) else set(found)
    return graph


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's components of more than one node, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(component)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return components


def package_of(module: str) -> str:
    """`persona_service.chat.service` -> chat; the registry, CLI and package root are their own."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def kernel_part_of(module: str) -> str | None:
    """`persona_service.kernel.data.uow` -> kernel.data; None outside the kernel (the providers and the
    process assembly are packages of their own, above it)."""
    parts = module.split(".")
    return ".".join(parts[1:3]) if parts[1:2] == ["kernel"] and len(parts) > 2 else None


def module_of(module: str) -> str:
    return module.removeprefix(f"{ROOT}.")


def _collapsed(graph: dict[str, set[str]], group: Callable[[str], str | None]) -> dict[str, set[str]]:
    collapsed: dict[str, set[str]] = {}
    for source, targets in graph.items():
        node = group(source)
        if node is None:
            continue
        collapsed.setdefault(node, set())
        collapsed[node] |= {g for t in targets if (g := group(t)) is not None and g != node}
    return collapsed


GRANULARITIES: dict[str, Callable[[str], str | None]] = {
    "packages": package_of, "kernel parts": kernel_part_of, "modules": module_of,
}


def cycles(root: pathlib.Path) -> dict[str, list[frozenset[str]]]:
    """Granularity -> the cycles (components of more than one node) found at it."""
    graph = import_graph(root)
    return {name: sorted((frozenset(c) for c in _strongly_connected(_collapsed(graph, group))), key=sorted)
            for name, group in GRANULARITIES.items()}


def path_through(root: pathlib.Path, component: frozenset[str], group: Callable[[str], str | None]) -> list[str]:
    """One loop inside a component, as the modules' imports that make it (for the failure message)."""
    graph = import_graph(root)
    edges = {(s, t) for s, ts in graph.items() for t in ts
             if group(s) in component and group(t) in component and group(s) != group(t)}
    return sorted(f"{s} -> {t}" for s, t in edges)


if __name__ == "__main__":
    here = pathlib.Path(__file__).resolve().parents[1] / "server" / ROOT
    for granularity, found in cycles(here).items():
        for component in found:
            print(f"{granularity}: {' <-> '.join(sorted(component))}")
            for edge in path_through(here, component, GRANULARITIES[granularity]):
                print(f"    {edge}")
