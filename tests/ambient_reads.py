"""Which code of the providers and the domains reads ambient call state (issue 47, "The call, explicit").

Run as `python ambient_reads.py <persona_service folder>`: prints one offender a line. Or as `python
ambient_reads.py --serve` (tests/test_architecture.py's `ambient_reads`: the clean package and each planted copy):
it reads a folder a line on stdin (a JSON string) and answers each with a JSON line, `{"lines": [...]}` or
`{"error": ...}`. Each folder is read in a child forked for it from a process that never imports the package, so the
child imports that folder's copy as a fresh process would; the serving process imports, after its first folder, the
libraries that folder's check had loaded (SQLAlchemy, gRPC, the protos...), so the next checks skip the
interpreter's start and those imports (a check in a fresh process cost 2.6-3.4 CPU s, a forked child about 1.2: the
copy's own imports and the reading).

By behaviour, not by spelling: each name of the kernel's door, and each file of providers/ and of the domains
(their migrations aside: a revision runs under Alembic, not in a call), is imported and its code read
instruction by instruction; every global it loads, every attribute read off that, every name a function-level
import binds, is resolved to the object it is at run time. An offender is code that reaches a
`contextvars.ContextVar` (or `copy_context`, or a weak side table keyed by objects, as the request context's
`context_of` was) or a function of the package that does, however deep in the kernel, by whatever name or
alias. A context variable, a weak table or a thread-local kept at the top level of one of these files is an
offender too. What it cannot see: an object reached through an argument or `self` (`ctx.x`, `self.bus.y`),
which is what the call handed is for; nor a read of a thread-local (the fair gate's guard against nested
turns in `fair.turn_for`, which a runner takes for its calls).
"""

from __future__ import annotations

import builtins
import contextlib
import contextvars
import dis
import functools
import importlib
import inspect
import json
import os
import pathlib
import sys
import threading
import traceback
import types
import weakref
from collections.abc import Iterator

SHARED = {"kernel", "providers", "process"}
AMBIENT = (contextvars.ContextVar, weakref.WeakKeyDictionary)
# What a file may not keep at module level: call state outliving the call's arguments (a thread's slot too).
KEPT = (*AMBIENT, weakref.WeakValueDictionary, threading.local)
_reads: dict[int, str | None] = {}  # id(function) -> what ambient state it reaches ('' while being read)


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _attribute(owner: object, name: str) -> object:
    """`owner.name` for what code reads attributes off (modules, classes, module-level objects); None if unknown."""
    try:
        return getattr(owner, name)
    except Exception:  # noqa: BLE001 - a property that needs an instance, a lazy name that fails to load
        return None


def _imported(name: str, level: int, fromlist: object, package: str) -> object:
    """What an import statement binds: the module named, or for `import a.b` the top package `a`."""
    try:
        module = importlib.import_module("." * level + name, package if level else None)
    except Exception:  # noqa: BLE001
        return None
    return module if fromlist or level else sys.modules[name.partition(".")[0]]


def resolved(code: types.CodeType, globals_: dict[str, object], package: str) -> Iterator[object]:
    """The objects `code` (and the code nested in it) names: loaded globals, attributes read off them, names
    bound by function-level imports, and those read off them in turn."""
    for one in _codes(code):
        local: dict[str, object] = {}
        current: object = None
        consts: list[object] = []  # the constants loaded just before (an import's level and names)
        for ins in dis.get_instructions(one):
            name = ins.argval
            if ins.opname == "LOAD_CONST":
                consts = [*consts[-1:], name]
                current = None
                continue
            if ins.opname == "IMPORT_NAME" and len(consts) == 2:
                level, fromlist = consts
                current = _imported(name, level if isinstance(level, int) else 0, fromlist, package)
            elif ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                current = globals_.get(name, getattr(builtins, str(name), None))
            elif ins.opname in ("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE"):
                current = local.get(name)
            elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD", "IMPORT_FROM") and current is not None:
                current = _attribute(current, name)
                if current is None and ins.opname == "IMPORT_FROM":
                    continue
            elif ins.opname in ("STORE_FAST", "STORE_DEREF", "STORE_NAME") and current is not None:
                local[name] = current
                continue
            else:
                current = None
                consts = []
                continue
            consts = []
            if current is not None:
                yield current


def _functions(obj: object) -> Iterator[types.FunctionType]:
    """The package's functions `obj` is or holds: a function (unwrapped), a bound method's, a class's own."""
    obj = getattr(obj, "__func__", obj)
    if isinstance(obj, functools.partial):
        obj = obj.func
    if isinstance(obj, type):
        if obj.__module__.startswith("persona_service"):
            for value in vars(obj).values():
                yield from _functions(value.fget if isinstance(value, property) else value)
        return
    if callable(obj):
        obj = inspect.unwrap(obj)
        if isinstance(obj, types.FunctionType) and obj.__module__.startswith("persona_service"):
            yield obj


def ambient(obj: object) -> str | None:
    """What ambient state `obj` is or reaches: a context variable's name, through the functions that read it."""
    if obj is contextvars.copy_context:  # every context variable at once
        return "contextvars.copy_context"
    holder = getattr(obj, "__self__", obj)
    if isinstance(holder, AMBIENT):
        return f"{type(holder).__name__}({getattr(holder, 'name', '')!r})".replace("(''", "(")
    for function in _functions(obj):
        key = id(function)
        if key not in _reads:
            _reads[key] = ""  # a recursion through it finds nothing more
            names = resolved(function.__code__, function.__globals__, function.__module__.rpartition(".")[0])
            found = next(filter(None, map(ambient, names)), None)
            _reads[key] = f"{function.__module__}.{function.__qualname__} -> {found}" if found else None
        if _reads[key]:
            return _reads[key]
    return None


def _module_name(root: pathlib.Path, path: pathlib.Path) -> str:
    return ".".join(["persona_service", *path.relative_to(root).with_suffix("").parts]).removesuffix(".__init__")


def door_offenders() -> Iterator[str]:
    """The kernel as the domains reach it: each name of its door (kernel/api.py), a function or a class's own
    functions, followed through the kernel as far as it goes. (What stays behind the door, the pipeline
    and the runs, is handed the call too: the request context is no context variable since issue 47.)"""
    door = importlib.import_module("persona_service.kernel.api")
    for name in door.__all__:
        found = ambient(getattr(door, name))
        if found:
            yield f"kernel/api.py: {name} reaches ambient state ({found})"


def offenders(root: pathlib.Path) -> Iterator[str]:
    """Each read, named once, where it is made (a function of another file read here is that file's offence)."""
    yield from door_offenders()
    # The process assembly keeps the process's state; the providers and the domains are read, and the kernel
    # through its door.
    domains = {p.parent.name for p in root.glob("*/__init__.py")} - {"kernel", "process"}
    paths = sorted(p for d in sorted(domains) for p in (root / d).rglob("*.py") if "migrations" not in p.parts)
    read_here = {_module_name(root, path) for path in paths}
    for path in paths:
        relative, name = path.relative_to(root), _module_name(root, path)
        module = importlib.import_module(name)
        globals_ = vars(module)
        for key, value in list(globals_.items()):
            if isinstance(value, KEPT):
                yield f"{relative}: keeps {key}, a {type(value).__name__}"
        code = compile(path.read_text(), str(path), "exec")
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        seen: set[str] = set()
        for obj in resolved(code, globals_, package):
            if getattr(obj, "__module__", name) in read_here - {name}:
                continue
            found = ambient(obj)
            if found and found not in seen:
                seen.add(found)
                yield f"{relative}: reads ambient state ({found})"


def _checked(folder: pathlib.Path) -> dict[str, object]:
    """In the child forked for `folder`: its offenders, and the libraries its check loaded (for the next ones)."""
    os.chdir(folder.parent)
    sys.path.insert(0, str(folder.parent))
    lines = list(offenders(folder))
    libraries = [name for name, module in list(sys.modules.items()) if name.partition(".")[0] != "persona_service"
                 and name != "__main__" and not str(getattr(module, "__file__", "") or "").startswith(str(folder))]
    return {"lines": lines, "libraries": libraries}


def _preload(names: list[str]) -> None:
    """Import what a check loaded besides the package, so every later child starts with it. A library that
    fails to import on its own (or out of its order) is left to the children, as before."""
    for name in names:
        try:
            importlib.import_module(name)
        except BaseException:  # noqa: BLE001, S112 - the child imports it itself
            continue


def serve() -> None:
    """One folder a line on stdin, one JSON line on stdout for each; each folder's check runs in a child forked
    from this process, which has imported none of the package (so no copy's module or metric is left behind)."""
    preloaded = "--no-preload" in sys.argv
    for request in sys.stdin:
        folder = pathlib.Path(json.loads(request)).resolve()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: answer through the pipe, then leave without this process's exit handlers
            os.close(read)
            os.dup2(2, 1)  # stdout is the answers' channel: what the import prints goes to stderr
            try:
                result = _checked(folder)
            except BaseException:  # noqa: BLE001 - reported to the test, which fails with it
                result = {"error": traceback.format_exc()}
            with os.fdopen(write, "w") as pipe:
                json.dump(result, pipe)
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            text = pipe.read()
        _, status = os.waitpid(pid, 0)
        result = json.loads(text) if text else {"error": f"the check of {folder} ended with status {status}"}
        libraries = result.pop("libraries", [])
        print(json.dumps(result), flush=True)
        if not preloaded and "error" not in result:
            preloaded = True
            with contextlib.redirect_stdout(sys.stderr):
                _preload(libraries)  # type: ignore[arg-type]
            if threading.active_count() > 1:  # a fork copies no thread: start again, with nothing preloaded
                os.execv(sys.executable, [sys.executable, __file__, "--serve", "--no-preload"])


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve()
        sys.exit(0)
    folder = pathlib.Path(sys.argv[1]).resolve()
    sys.path.insert(0, str(folder.parent))
    for line in offenders(folder):
        print(line)
