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
offender too.

Ambient state held anywhere else (a module-level `ContextVar`, weak table or thread-local of the kernel, the
process assembly...) stays in the functions that read it: `flow` runs each function's instructions over the
objects it knows and names every such object it hands on (returns or yields, passes to a call, stores on an
attribute (`self.slot = _holding` in an `__init__`), in a global or a container), so none reaches a domain
through a parameter, an attribute of an object it is handed, or a function's result; reading off it
(`_holding.turn`, `getattr(_holding, "turn")`, `_var.get()`) is the owner's own business (the fair gate's guard
against nested turns, `fair.turn_for`). And a provider's or a domain's code whose values include one, by a name,
an attribute chain, getattr with a literal or a function of the package returning it, is an offender, a
thread-local too. What it cannot see: an object reached through an argument or `self` (`ctx.x`, `self.bus.y`)
that no code of the package put there (what the call handed is for); a thread-local an object keeps for itself
(Retrying's per-call failures, `self._local`).
"""

from __future__ import annotations

import array
import ast
import asyncio
import builtins
import collections
import collections.abc
import contextlib
import contextvars
import dis
import enum
import functools
import importlib
import importlib.machinery
import importlib.util
import inspect
import json
import os
import pathlib
import queue
import re
import sys
import threading
import traceback
import types
import typing
import weakref
from collections.abc import Callable, Iterator
from typing import Any

SHARED = {"kernel", "providers", "process"}
AMBIENT = (contextvars.ContextVar, weakref.WeakKeyDictionary)
# What a file may not keep at module level: call state outliving the call's arguments (a thread's slot too).
KEPT = (*AMBIENT, weakref.WeakValueDictionary, weakref.WeakSet, threading.local)
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


Instruction = tuple[str, int, int | None, Any]  # opname, opcode, arg (None: takes none), argval (as dis's)
_CACHES: list[int] | None = getattr(dis, "_inline_cache_entries", None)  # 3.11's inline caches after an op
_NAMES, _CONSTS = frozenset(dis.hasname), frozenset(dis.hasconst)
_VARIABLES = frozenset(dis.haslocal) | frozenset(dis.hasfree)
_LOAD_GLOBAL = dis.opmap["LOAD_GLOBAL"]


_codes_by_source: dict[bytes, types.CodeType] = {}


def _compiled(text: str | bytes, path: str = "<package>") -> types.CodeType:
    """A file's code, compiled once per distinct source, for reading it here and for importing it (`_source_to_code`):
    a planted copy differs from the package in one file, so its child (forked from the server, which compiled the
    package's files: `_warm`) compiles, imports and decodes only that file's code afresh (a copy has no __pycache__)."""
    data = text.encode() if isinstance(text, str) else bytes(text)
    if data not in _codes_by_source:
        _codes_by_source[data] = compile(data, path, "exec", dont_inherit=True)
    return _codes_by_source[data]


_loader: Any = importlib.machinery.SourceFileLoader
_source_to_code = _loader.source_to_code


def _package_source_to_code(self: object, data: bytes, path: str, *, _optimize: int = -1) -> types.CodeType:
    if f"{os.sep}persona_service{os.sep}" in str(path) and _optimize == -1:
        return _compiled(data, str(path))
    return _source_to_code(self, data, path, _optimize=_optimize)  # type: ignore[no-any-return]


@functools.cache
def _instructions(code: types.CodeType) -> tuple[Instruction, ...]:
    """`dis.get_instructions(code)` as plain tuples, decoded here: its Instruction objects (positions, argrepr)
    were most of a check's time. Where this interpreter's layout is not 3.11's, dis's own."""
    variable = getattr(code, "_varname_from_oparg", None)
    if _CACHES is None or variable is None:
        return tuple((i.opname, i.opcode, i.arg, i.argval) for i in dis.get_instructions(code))
    found: list[Instruction] = []
    raw, extended, at = code.co_code, 0, 0
    while at < len(raw):
        op, arg = raw[at], raw[at + 1] | extended
        at += 2 + 2 * _CACHES[op]
        if op == dis.EXTENDED_ARG:
            extended = arg << 8
            continue
        extended = 0
        if op < dis.HAVE_ARGUMENT:
            found.append((dis.opname[op], op, None, None))
            continue
        value: Any = code.co_names[arg >> 1 if op == _LOAD_GLOBAL else arg] if op in _NAMES \
            else code.co_consts[arg] if op in _CONSTS else variable(arg) if op in _VARIABLES else arg
        found.append((dis.opname[op], op, arg, value))
    return tuple(found)


def resolved(code: types.CodeType, globals_: dict[str, object], package: str) -> Iterator[object]:
    """The objects `code` (and the code nested in it) names: loaded globals, attributes read off them, names
    bound by function-level imports, and those read off them in turn."""
    for one in _codes(code):
        local: dict[str, object] = {}
        current: object = None
        consts: list[object] = []  # the constants loaded just before (an import's level and names)
        for opname, _, _, name in _instructions(one):
            if opname == "LOAD_CONST":
                consts = [*consts[-1:], name]
                current = None
                continue
            if opname == "IMPORT_NAME" and len(consts) == 2:
                level, fromlist = consts
                current = _imported(name, level if isinstance(level, int) else 0, fromlist, package)
            elif opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                current = globals_.get(name, getattr(builtins, str(name), None))
            elif opname in ("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE"):
                current = local.get(name)
            elif opname in ("LOAD_ATTR", "LOAD_METHOD", "IMPORT_FROM") and current is not None:
                current = _attribute(current, name)
                if current is None and opname == "IMPORT_FROM":
                    continue
            elif opname in ("STORE_FAST", "STORE_DEREF", "STORE_NAME") and current is not None:
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


# --- what leaves the function holding it ----------------------------------------------------------------------------

# Module-level state a function could keep calls in: mutable containers (queues too: every use of one moves its
# items), and what changes them: their methods, and the functions that change one handed to them (heapq's, bisect's
# insort, operator's setitem...: by the name a function is defined with, so an alias or an unbound `list.append`
# counts too).
_QUEUES = (queue.Queue, queue.SimpleQueue, asyncio.Queue)
# By what they are, not their class: any mutable mapping, sequence or set (UserDict, ChainMap, a shelf...) holds items
# across calls as a dict does.
_CONTAINERS = (dict, list, set, bytearray, collections.deque, array.array, *_QUEUES, collections.abc.MutableMapping,
               collections.abc.MutableSequence, collections.abc.MutableSet)
_MUTATORS = {"append", "appendleft", "add", "update", "setdefault", "pop", "popitem", "popleft", "clear", "extend",
             "extendleft", "insert", "remove", "discard", "__setitem__", "__delitem__", "sort", "reverse", "rotate",
             "put", "put_nowait", "get", "get_nowait", "heappush", "heappop", "heapify", "heapreplace", "heappushpop",
             "insort", "insort_left", "insort_right", "setitem", "delitem", "iadd", "iconcat", "ior", "iand", "isub",
             "shuffle", "__iadd__", "__ior__", "__isub__", "__iand__", "frombytes", "fromlist"}
_DICT_READS = {"get"}  # on a dict (not a queue) `get` reads
_NULL = object()  # what a call's callable sits on (LOAD_GLOBAL's or PUSH_NULL's NULL)
# Builtins handed an object that only read or set an attribute of it (fair.turn_for's `getattr(_holding, "turn")`).
_READERS = (getattr, setattr, hasattr, delattr, isinstance, type, id)
_NO_STACK = {"NOP", "RESUME", "CACHE", "PRECALL", "KW_NAMES", "EXTENDED_ARG", "JUMP_FORWARD", "JUMP_BACKWARD",
             "JUMP_BACKWARD_NO_INTERRUPT"}
_returns: dict[int, object] = {}  # id(function) -> the ambient object it returns (None: none)


def _callee_name(callee: object) -> str:
    return str(getattr(callee, "__qualname__", "") or "a callable it was handed")


def flow(code: types.CodeType, globals_: dict[str, object], package: str,
         watch: Callable[[object, object], str | None] | None = None,
         cells: dict[str, object] | None = None, instance: tuple[str, type] | None = None) -> Iterator[tuple[object, str]]:
    """Ambient state (`KEPT`) in `code`'s values, by running its instructions over known objects (one code object;
    unknown values, an argument or self, stay unknown): (object, '') for each it produces (a global, an attribute
    chain, getattr with a literal, an import, what a package function called returns) and (object, how) for each
    it hands on (returns or yields, passes to a call, stores on an attribute, in a global, a container). Reading
    off it (`_holding.turn`, `getattr(_holding, ...)`, `_var.get()`) hands nothing on. With `watch`, also
    (value, '@' + what) for each value produced that `watch(value, owner)` names, `owner` being what it was read off
    (the module whose globals, the object of an attribute or getattr, the module of an import; None for a result).
    `cells`: what a function's closure holds (its free variables), which outlives every call as a global does.
    `instance`: (a method's first parameter, its class): what it reads off self that the class itself holds (a
    class-level dict) is the class's, shared by every instance and call; what it sets on self is the instance's."""
    stack: list[object] = []
    local: dict[str, object] = dict(cells or {})
    viewed: set[int] = set()  # classes a method's self stands for
    if instance is not None:
        local[instance[0]] = instance[1]
        viewed.add(id(instance[1]))

    def pop() -> object:
        return stack.pop() if stack else None

    shared: set[int] = set()  # ids of mutable containers read off a module (its globals, another's attribute)
    kept: set[int] = set()  # ids of any other object read off a module: a class, an instance (not a module)
    for value in (cells or {}).values():
        if value is None:
            continue
        if isinstance(value, _CONTAINERS):
            shared.add(id(value))
        elif not isinstance(value, types.ModuleType | types.FunctionType | str | bytes | int | float | tuple | frozenset):
            kept.add(id(value))

    def push(value: object, owner: object = None) -> Iterator[tuple[object, str]]:
        stack.append(value)
        # Read off a module, or off what a module keeps (a class, an object: `_Registry.calls`), it is module-level.
        held = isinstance(owner, types.ModuleType | dict) or id(owner) in kept or id(owner) in viewed
        if held and owner is not sys.modules and value is not None:
            if isinstance(value, _CONTAINERS):
                shared.add(id(value))
            elif not isinstance(value, types.ModuleType | types.FunctionType | types.BuiltinFunctionType
                                | str | bytes | int | float | tuple | frozenset):
                kept.add(id(value))
        if isinstance(value, KEPT):
            yield value, ""
        what = watch(value, owner) if watch is not None and value is not None else None
        if what:
            yield value, "@" + what

    def hands(value: object, how: str) -> Iterator[tuple[object, str]]:
        if isinstance(value, KEPT):
            yield value, how

    for op, opcode, raw, name in _instructions(code):
        arg = raw or 0
        if op == "LOAD_CONST":
            stack.append(name)
        elif op in ("LOAD_GLOBAL", "LOAD_NAME"):
            if op == "LOAD_GLOBAL" and arg & 1:
                stack.append(_NULL)
            yield from push(globals_.get(name, getattr(builtins, str(name), None)), globals_)
        elif op in ("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_CLASSDEREF"):
            stack.append(local.get(name))
        elif op == "PUSH_NULL":
            stack.append(_NULL)
        elif op in ("LOAD_ATTR", "LOAD_METHOD"):
            owner = pop()
            if watch is not None and id(owner) in shared and name in _MUTATORS \
                    and not (name in _DICT_READS and not isinstance(owner, _QUEUES)):
                yield owner, f"@mutates:a container (.{name})"
            if op == "LOAD_METHOD":
                stack.append(_NULL)
            yield from push(None if owner is None or owner is _NULL else _attribute(owner, name), owner)
        elif op == "IMPORT_NAME":
            fromlist, level = pop(), pop()
            yield from push(_imported(name, level if isinstance(level, int) else 0, fromlist, package), sys.modules)
        elif op == "IMPORT_FROM":
            owner = stack[-1] if stack else None
            yield from push(None if owner is None else _attribute(owner, name), owner)
        elif op in ("STORE_FAST", "STORE_DEREF"):
            local[name] = pop()
        elif op in ("STORE_ATTR", "DELETE_ATTR"):
            target = pop()
            if watch is not None and target is not None and (id(target) in kept or id(target) in shared
                                                             or isinstance(target, types.ModuleType)):
                yield target, f"@mutates:sets .{name} of a module-level object"
            if op == "STORE_ATTR":
                yield from hands(pop(), f"stores it on .{name}")
        elif op in ("STORE_GLOBAL", "STORE_SUBSCR", "DELETE_SUBSCR", "DELETE_GLOBAL"):
            container = None
            if op in ("STORE_SUBSCR", "DELETE_SUBSCR"):
                _, container = pop(), pop()
            if watch is not None and (op.endswith("GLOBAL") or id(container) in shared):
                yield container, f"@mutates:{'the global ' + str(name) if op.endswith('GLOBAL') else 'a container'}"
            if op.startswith("STORE"):
                yield from hands(pop(), "stores it in a global" if op == "STORE_GLOBAL" else "stores it in a container")
        elif op in ("RETURN_VALUE", "YIELD_VALUE"):
            yield from hands(pop(), "returns it" if op == "RETURN_VALUE" else "yields it")
            if op == "YIELD_VALUE":
                stack.append(None)
        elif op in ("BUILD_TUPLE", "BUILD_LIST", "BUILD_SET", "LIST_APPEND", "SET_ADD"):
            for value in [pop() for _ in range(arg if op.startswith("BUILD") else 1)]:
                yield from hands(value, "puts it in a container")
            if op.startswith("BUILD"):
                stack.append(None)
        elif op == "CALL":
            args = [pop() for _ in range(arg)][::-1]
            callee, _ = pop(), pop()  # the callable, on its NULL (LOAD_METHOD's too, here)
            if watch is not None and (callee is setattr or callee is delattr) and args and args[0] is not None \
                    and (id(args[0]) in kept or id(args[0]) in shared or isinstance(args[0], types.ModuleType)):
                yield args[0], f"@mutates:sets {args[1] if len(args) > 1 else 'an attribute'} of a module-level object"
            if watch is not None and getattr(callee, "__name__", None) in _MUTATORS \
                    and any(id(value) in shared for value in args if value is not None) \
                    and not getattr(callee, "__module__", "").startswith("persona_service"):
                yield callee, f"@mutates:a container (passed to {_callee_name(callee)})"
            if not any(callee is reader for reader in _READERS):  # (by identity: `==` may be anything's)
                for value in args:
                    yield from hands(value, f"passes it to {_callee_name(callee)}")
            literal = callee is getattr and len(args) >= 2 and isinstance(args[1], str) and args[0] is not None
            yield from push(_attribute(args[0], args[1]) if literal else _returned(callee),  # type: ignore[arg-type]
                            args[0] if literal else None)
        elif op == "COPY":
            stack.append(stack[-arg] if len(stack) >= arg else None)
        elif op == "SWAP" and len(stack) >= arg:
            stack[-1], stack[-arg] = stack[-arg], stack[-1]
        elif op not in _NO_STACK:  # any other: its net effect, its result unknown
            try:
                effect = dis.stack_effect(opcode, raw, jump=False)
            except ValueError:
                effect = 0
            del stack[max(0, len(stack) + min(effect, 0)):]
            stack.extend([None] * max(effect, 0))
            if stack:
                stack[-1] = None


def _returned(callee: object) -> object:
    """The ambient object a function of the package returns (through the functions it calls), else None."""
    try:
        function = inspect.unwrap(getattr(callee, "__func__", callee)) if callable(callee) else None
    except Exception:  # noqa: BLE001 - a wrapper that loops, an object whose attributes fail
        return None
    if not (isinstance(function, types.FunctionType) and function.__module__.startswith("persona_service")):
        return None
    key = id(function)
    if key not in _returns:
        _returns[key] = None  # a recursion through it finds nothing more
        package = function.__module__.rpartition(".")[0]
        _returns[key] = next((value for value, how in flow(function.__code__, function.__globals__, package)
                              if how == "returns it"), None)
    return _returns[key]


def _package() -> dict[str, types.ModuleType]:
    """The package's modules imported so far (by name)."""
    return {name: module for name, module in list(sys.modules.items())
            if name.startswith("persona_service.") and getattr(module, "__file__", None)}


def _kept(modules: dict[str, types.ModuleType]) -> dict[int, str]:
    """id -> `module.name` of the ambient objects the package's modules keep at their top level."""
    return {id(value): f"{name}.{key}" for name, module in modules.items() for key, value in vars(module).items()
            if isinstance(value, KEPT)}


def _named(value: object, kept: dict[int, str]) -> str:
    kind = "threading.local" if isinstance(value, threading.local) else type(value).__qualname__
    return f"{kept.get(id(value), 'ambient state')}, a {kind}"


def handed_on(root: pathlib.Path, read_here: set[str]) -> Iterator[str]:
    """The rest of the package (the kernel, the process assembly) keeps ambient state for itself: a function of a
    module holding some (or a module that does), or naming one, may read it, never hand it on, so no domain gets
    it through a parameter, an attribute an object was built with, or a function's result. A file not imported
    yet that names one (the process assembly's, a lazy import's) is imported to be read."""
    modules = _package()
    kept = _kept(modules)
    if not kept:
        return
    homes = {id(module) for module in modules.values() if any(id(v) in kept for v in vars(module).values())}
    spelled = re.compile(r"\b(?:" + "|".join(sorted({re.escape(k.rpartition(".")[2]) for k in kept.values()})) + r")\b")
    for path in sorted(root.rglob("*.py")):
        name = _module_name(root, path)
        if name in read_here or "migrations" in path.parts:
            continue
        text, module = path.read_text(), modules.get(name)
        holds = module is not None and any(id(v) in kept or id(v) in homes for v in vars(module).values())
        if not holds and not spelled.search(text):
            continue
        if module is None:
            try:
                module = importlib.import_module(name)
            except Exception:  # noqa: BLE001, S112 - what does not import alone runs nowhere alone
                continue
        code = _compiled(text)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for one in _codes(code):
            for value, how in flow(one, vars(module), package):
                if how:
                    yield f"{path.relative_to(root)}: {one.co_qualname} hands on {_named(value, kept)} ({how})"


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
        own = {id(value) for value in globals_.values() if isinstance(value, KEPT)}
        for key, value in list(globals_.items()):
            if isinstance(value, KEPT):
                yield f"{relative}: keeps {key}, a {type(value).__name__}"
        code = _compiled(path.read_text())
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        seen: set[str] = set()
        for obj in resolved(code, globals_, package):
            if getattr(obj, "__module__", name) in read_here - {name}:
                continue
            found = ambient(obj)
            if found and found not in seen:
                seen.add(found)
                yield f"{relative}: reads ambient state ({found})"
        # Any ambient object in its values, a thread's slot too: reached by a name or through a function's result.
        for one in _codes(code):
            for value, _ in _flowed(one, globals_, package):
                if isinstance(value, KEPT) and id(value) not in own:
                    own.add(id(value))  # named once
                    yield f"{relative}: {one.co_qualname} reaches {_named(value, _kept(_package()))}"
    yield from handed_on(root, read_here)


# --- what a domain reaches past the kernel's door, or of the process, at run time --------------------------------


def _reflective() -> dict[int, str]:
    """id -> name of what finds objects by no import a contract reads: the loaded modules, the importers, the
    garbage collector's and the frames' views, the builtins' table, code run from a string (exec, eval, compile),
    attribute readers by a string (operator's); and where a call's state could hide beside its
    arguments (the running task, the thread). By identity: whatever alias or attribute chain reaches it."""
    import asyncio
    import gc
    import importlib.util
    import operator
    import pkgutil
    import runpy

    found: dict[int, str] = {id(gc): "gc", id(sys.modules): "sys.modules", id(builtins.__dict__): "__builtins__"}
    for owner, names in ((sys, ("_getframe", "_current_frames", "settrace", "setprofile")),
                         (gc, ("get_referrers", "get_referents", "get_objects")),
                         (inspect, ("currentframe", "stack", "trace", "getmodule", "getmembers", "getclosurevars",
                                    "getouterframes", "getinnerframes")),
                         (importlib, ("import_module", "reload", "__import__")),
                         (importlib.util, ("find_spec", "module_from_spec", "spec_from_file_location",
                                           "spec_from_loader", "resolve_name")),
                         (pkgutil, ("resolve_name", "iter_modules", "walk_packages", "get_loader", "find_loader")),
                         (runpy, ("run_module", "run_path")), (builtins, ("__import__", "globals", "locals", "vars", "exec", "eval", "compile")),
                         (asyncio, ("current_task", "all_tasks")), (operator, ("attrgetter", "methodcaller")),
                         # evaluating annotations imports what their strings name (a door class's fields: the kernel
                         # classes behind the door, another domain's repository on a service's attribute)
                         (typing, ("get_type_hints", "ForwardRef", "_eval_type")),
                         (threading, ("current_thread", "enumerate", "main_thread", "_active"))):
        for name in names:
            value = getattr(owner, name, None)
            if value is not None:
                found[id(value)] = f"{getattr(owner, '__name__', owner)}.{name}"
    return found


# Whole modules that find or make objects by no import a contract reads: introspection, the garbage collector, the
# import system and its loaders, (un)pickling (it imports what a byte string names), pydoc's locate, frames and
# tracebacks, raw memory. No domain has a use for them, so any function or class of theirs counts, by the module it
# comes from, listed or not (inspect.getattr_static, pickle.loads, importlib.machinery's loaders, traceback's
# walk_stack, pydoc.locate, ctypes.cast): a new spelling in one of them is found too.
REFLECTIVE_HOMES = re.compile(r"^_?(?:gc|inspect|importlib|pkgutil|runpy|ctypes|pickle|pickletools|copyreg|marshal|"
                              r"pydoc|traceback|zipimport|code|codeop|imp|dis|symtable)(?:\.|$)")


def _reflective_home(value: object) -> str | None:
    """The reflective module (REFLECTIVE_HOMES) `value` is, or whose function or class it is."""
    if isinstance(value, types.ModuleType):
        name = value.__name__
    elif isinstance(value, type | types.FunctionType | types.BuiltinFunctionType | types.MethodDescriptorType):
        name = str(getattr(value, "__module__", "") or "")
    else:
        return None
    return name if REFLECTIVE_HOMES.match(name) else None


# The process's environment: settings come from a module's Settings, loaded once when it is built (issue 47).
_ENVIRONMENT = {id(os.environ): "os.environ", id(os.environb): "os.environb", id(os.getenv): "os.getenv",
                id(os.getenvb): "os.getenvb", id(os.putenv): "os.putenv", id(os.unsetenv): "os.unsetenv",
                **({id(os.environ._data): "os.environ's table"} if hasattr(os.environ, "_data") else {})}
if hasattr(os, "posix") or os.name == "posix":
    import posix

    _ENVIRONMENT[id(posix.environ)] = "posix.environ"  # the table os.environ was copied from


# Libraries that reach another process over the network (a module of theirs, or a function or class they define).
# The standard library's clients and servers are all here (xmlrpc, the mail and news protocols, socketserver...).
NETWORK = re.compile(r"^(?:_?socket|_?ssl|select|selectors|http\.client|http\.server|urllib\.request|xmlrpc|requests|httpx|"
                     r"urllib3|aiohttp|boto3|botocore|stripe|smtplib|ftplib|imaplib|poplib|nntplib|telnetlib|socketserver|"
                     r"redis|grpc|websockets?|asyncio\.(?:streams|base_events|selector_events|events|runners|unix_events|"
                     r"subprocess)|subprocess|multiprocessing|concurrent\.futures\.process|pty|paramiko|"
                     r"pika|kafka|pymongo|dns)(?:\.|$)")
# What starts a process (it may reach anything: `os.popen('curl ...')`), by identity: the os functions the audit hook
# of the boundary guard sees as process events.
_PROCESS_STARTERS = {id(getattr(os, name)): f"os.{name}" for name in dir(os)
                     if re.match(r"^(?:system|popen|fork|forkpty|spawn\w*|exec\w*|posix_spawnp?)$", name)}


def _network(value: object) -> str | None:
    """Which network library `value` is of: a module, or a function or class it defines; or what starts a process."""
    if id(value) in _PROCESS_STARTERS:
        return f"a process ({_PROCESS_STARTERS[id(value)]})"
    if isinstance(value, types.ModuleType):
        name = value.__name__
    elif isinstance(value, type | types.FunctionType | types.BuiltinFunctionType):
        name = str(getattr(value, "__module__", "") or "")
        if name == "_socket":
            name = "socket"
    else:
        return None
    return name if NETWORK.match(name) else None


def _sql_construct(value: object) -> str | None:
    """Which SQL-writing piece of SQLAlchemy or the driver `value` is (a submodule, or a function or class they
    define): not the types code annotates and passes connections with, their exceptions, event hooks, nor the
    `sqlalchemy` package itself (its names are each read off it, and so found)."""
    if isinstance(value, types.ModuleType):
        name = value.__name__
    elif isinstance(value, type | types.FunctionType | types.BuiltinFunctionType):
        name = f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', '')}"
    else:
        return None
    if not re.match(r"^(?:sqlalchemy|psycopg|psycopg2)\.", name) or re.match(r"^sqlalchemy\.(?:exc|event)(?:\.|$)", name):
        return None
    import sqlalchemy

    allowed = (sqlalchemy.Connection, sqlalchemy.Engine, sqlalchemy.Executable, sqlalchemy.engine.ExceptionContext)
    return None if any(value is kind for kind in allowed) else name


def _behind_the_door(value: object, door: set[int]) -> str | None:
    """What of the kernel or the process assembly `value` is, when it is no name of the door: a module of theirs
    (but the door), or a function, class or object their modules define or keep."""
    if id(value) in door:
        return None
    if isinstance(value, types.ModuleType):
        name = value.__name__
        inside = re.match(r"persona_service\.(?:kernel|process)(?:\.|$)", name) and name != "persona_service.kernel.api"
        return f"module {name}" if inside else None
    home = getattr(value, "__module__", None) if isinstance(value, type | types.FunctionType | types.BuiltinFunctionType
                                                           | functools.partial) else None
    if isinstance(home, str) and re.match(r"persona_service\.(?:kernel|process)\.", home):
        return f"{home}.{getattr(value, '__qualname__', type(value).__qualname__)}"
    return None


def _identity(value: object) -> int:
    """A bound method by its function (`Work.on` read off the class is a new bound method at each read)."""
    return id(getattr(value, "__func__", value))


def _connections(door: types.ModuleType) -> dict[int, str]:
    """What holds or makes a database connection: SQLAlchemy's Connection and Engine (the only pieces of it
    `_sql_construct` lets code name, to annotate), and the door's `Work.on`, which makes a Work of a connection."""
    import psycopg
    import sqlalchemy

    found = {id(sqlalchemy.Connection): "sqlalchemy.Connection", id(sqlalchemy.Engine): "sqlalchemy.Engine"}
    # What makes a connection or an engine of its own (`makes:`, refused in any file of a domain: the kernel's engines
    # own the connections, and the unit of work hands them out).
    makers = [sqlalchemy.create_engine, sqlalchemy.engine_from_config, sqlalchemy.create_pool_from_url,
              psycopg.Connection.connect, psycopg.AsyncConnection.connect]
    try:
        import sqlalchemy.ext.asyncio as _async

        makers += [_async.create_async_engine, _async.async_engine_from_config]
    except ImportError:
        pass
    found |= {_identity(maker): f"makes:{getattr(maker, '__module__', '')}.{getattr(maker, '__qualname__', '')}"
              for maker in makers}
    work = getattr(door, "Work", None)  # (a copy of the package from before the Work has none)
    return found if work is None else {**found, _identity(work.on): "kernel.api.Work.on"}


# Pools of connections (a module of theirs, or a class or function they define): a pool is an engine of its own. And
# libpq beneath psycopg, whichever build holds it (pure Python, binary, C): its PGconn is a connection of its own that
# no cursor sees (the boundary guard cannot see one a domain opens: C, no audit event).
POOLS = re.compile(r"^(?:psycopg_pool|sqlalchemy\.pool|(?:psycopg|psycopg_binary|psycopg_c)\.pq)(?:\.|$)")


def _pool(value: object) -> str | None:
    name = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None) \
        if isinstance(value, type | types.FunctionType | types.BuiltinFunctionType) else None
    return name if isinstance(name, str) and POOLS.match(name) else None


# Libraries whose purpose is reading settings (a .env file, the environment): any function or class of theirs.
SETTINGS_HOMES = re.compile(r"^(?:dotenv|pydantic_settings|decouple|environs)(?:\.|$)")
# The operating system's modules, whose functions hand out what the environment holds (paths, the user, variables).
ENVIRONMENT_HOMES = re.compile(r"^(?:os|posixpath|ntpath|genericpath|getpass|posix|nt)$")
_environment_readers: dict[int, str | None] = {}


def _reads_environment(value: object) -> str | None:
    """What `value` reads of the environment by what it is: a function or class of a settings library, or a function
    of the operating system's modules whose own code reaches the environment and answers with it (`os.path.expandvars`,
    `expanduser`, `os.get_exec_path`, `getpass.getuser`: one level deep). (A library reading a knob of its own, ssl's
    SSLKEYLOGFILE, is the library's configuration, not the domain's settings.)"""
    home = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None) \
        if isinstance(value, type | types.FunctionType) else None
    if isinstance(home, str) and SETTINGS_HOMES.match(home):
        return home + ("" if isinstance(value, types.ModuleType) else f".{value.__qualname__}")  # type: ignore[union-attr]
    function = getattr(value, "__func__", value)
    if not isinstance(function, types.FunctionType) or not ENVIRONMENT_HOMES.match(str(function.__module__)):
        return None
    if id(function) not in _environment_readers:
        _environment_readers[id(function)] = None
        names = resolved(function.__code__, function.__globals__, str(function.__module__).rpartition(".")[0])
        read = next((_ENVIRONMENT[id(name)] for name in names if id(name) in _ENVIRONMENT), None)
        if read:
            _environment_readers[id(function)] = f"{function.__module__}.{function.__qualname__} (reads {read})"
    return _environment_readers[id(function)]


def _settings_class(value: object) -> bool:
    """A pydantic Settings class (a module's or the kernel's): its constructor reads the environment."""
    from pydantic_settings import BaseSettings

    return isinstance(value, type) and issubclass(value, BaseSettings)


def _whole_schema(door: types.ModuleType) -> dict[int, str]:
    """What sees every domain's tables at once, whatever table it is asked for: the shared metadata and the mapper
    registry (read off Base or off any mapped class: `ChatSession.metadata`), and the database's reflection
    (`sqlalchemy.inspect`, an Inspector, `MetaData.reflect`, a registry of its own)."""
    import sqlalchemy
    import sqlalchemy.orm

    found = {id(sqlalchemy.inspect): "sqlalchemy.inspect", id(sqlalchemy.MetaData): "sqlalchemy.MetaData",
             id(sqlalchemy.Inspector): "sqlalchemy.Inspector", id(sqlalchemy.orm.registry): "sqlalchemy.orm.registry",
             id(sqlalchemy.MetaData.reflect): "MetaData.reflect",
             # a mapper (any mapped class's) holds the registry, every mapped class
             id(sqlalchemy.orm.class_mapper): "sqlalchemy.orm.class_mapper",
             id(sqlalchemy.orm.object_mapper): "sqlalchemy.orm.object_mapper"}
    base = getattr(door, "Base", None)
    if base is not None:
        found |= {id(base.metadata): "Base.metadata (every table)", id(base.registry): "Base.registry (every mapped class)"}
    return found


def _api_exported() -> set[int]:
    """ids of what any domain's api.py exports (and the api modules themselves): what another domain may hold."""
    package = importlib.import_module("persona_service")
    root = pathlib.Path(str(package.__file__)).parent
    found: set[int] = set()
    for path in sorted(root.glob("*/api.py")):
        if path.parent.name in SHARED:
            continue
        module = importlib.import_module(_module_name(root, path))
        found |= {id(module), *(id(getattr(module, name, None)) for name in _exported(module))}
    return found


def _domain_value(value: object, exported: set[int]) -> str | None:
    """The domain module, function or class `value` is when its api.py does not export it (a domain's package and
    api modules are its door): `persona_service.<domain>.<file>[.<name>]`."""
    if id(value) in exported:
        return None
    if isinstance(value, types.ModuleType):
        name = value.__name__
        if name.count(".") < 2 or name.endswith(".api"):
            return None
    elif isinstance(value, type | types.FunctionType | functools.partial):
        name = f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', '')}"
    else:
        return None
    parts = name.split(".")
    if parts[0] != "persona_service" or len(parts) < 3 or parts[1] in SHARED:
        return None
    return name


@functools.cache
def _watched() -> Callable[[object, object], str | None]:
    """What `_flowed` names besides ambient state (once per child: the door is the copy's): `past:` a reflective
    mean or what of the kernel or the process assembly the door does not name, read off a module; `settings:` a
    read of settings or of the environment."""
    door_module = importlib.import_module("persona_service.kernel.api")
    door = {id(getattr(door_module, name)) for name in door_module.__all__} | {id(door_module)}
    reflective = _reflective()
    loaders = {id(door_module.load): "kernel.api.load", **_ENVIRONMENT}

    connections = _connections(door_module)
    schema = _whole_schema(door_module)
    exported = _api_exported()

    def watch(value: object, owner: object) -> str | None:
        if _identity(value) in connections:
            return "conn:" + connections[_identity(value)]
        if id(value) in reflective:
            return "past:" + reflective[id(value)]
        home = _reflective_home(value)
        if home:
            return "past:" + home + (f".{value.__name__}" if not isinstance(value, types.ModuleType) else "")
        if _settings_class(value):
            return f"settings:{value.__qualname__}() (a Settings class: building one reads the environment)"  # type: ignore[union-attr]
        if id(value) in schema:
            return "schema:" + schema[id(value)]
        foreign = _domain_value(value, exported) if isinstance(owner, types.ModuleType | dict) else None
        if foreign:
            return "domain:" + foreign
        if id(value) in loaders:
            return "settings:" + loaders[id(value)]
        if callable(value) and getattr(value, "__name__", "") == "from_env":
            return "settings:" + str(getattr(value, "__qualname__", "from_env"))
        environment = _reads_environment(value)
        if environment:
            return "settings:" + environment
        pool = _pool(value)
        if pool:
            return "conn:makes:" + pool + " (a pool or libpq connection of its own)"
        behind = _behind_the_door(value, door) if isinstance(owner, types.ModuleType | dict) else None
        if behind:
            return "past:" + behind
        network = _network(value)
        if network:
            return "network:" + network
        sql = _sql_construct(value)
        return "sql:" + sql if sql else None

    return watch


_flows: dict[int, list[tuple[object, str]]] = {}


def _flowed(code: types.CodeType, globals_: dict[str, object], package: str) -> list[tuple[object, str]]:
    """`flow` with `_watched()`, once per code object (offenders, past_the_door and settings_reads read it)."""
    if id(code) not in _flows:
        _flows[id(code)] = list(flow(code, globals_, package, _watched()))
    return _flows[id(code)]


_domain_code_lists: dict[tuple[pathlib.Path, ...], list[tuple[pathlib.Path, types.ModuleType, types.CodeType, str]]] = {}


def _domain_codes(root: pathlib.Path, paths: list[pathlib.Path]) -> list[tuple[pathlib.Path, types.ModuleType,
                                                                                types.CodeType, str]]:
    """(file, its module, each code object in it, its package) for the domains' files, listed once per child."""
    key = (root, *paths)
    if key not in _domain_code_lists:
        found = []
        for path in paths:
            name = _module_name(root, path)
            module = importlib.import_module(name)
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            relative = path.relative_to(root)
            found += [(relative, module, one, package) for one in _codes(_compiled(path.read_text()))]
        _domain_code_lists[key] = found
    return _domain_code_lists[key]


def past_the_door(root: pathlib.Path, paths: list[pathlib.Path]) -> Iterator[str]:
    """A domain's code (lazy imports, aliases and getattr with a literal too) reaches of the kernel only what its
    door names, and none of the reflective means that would find the rest (`sys.modules`, importlib's and pkgutil's
    loaders, `gc`, frames, `__builtins__`) nor the running task or thread as a side table: by what each name it loads
    is at run time, so a kernel module or function re-exported by a provider, a door class's module found by
    `inspect.getmodule` or an import by `sys.modules[...]` is named, however spelled. Any function or class of a
    reflective module counts (REFLECTIVE_HOMES). And of another domain, only what its api.py exports: a module,
    function or class of its read off a module (`persona_service.personas.repository`, reached through the package
    an import of its api.py binds) is named, as the independence contract names an import of it."""
    named: set[tuple[str, str, str]] = set()
    for relative, module, one, package in _domain_codes(root, paths):
        for _, how in _flowed(one, vars(module), package):
            crossing = how.startswith("@domain:") and how.split(".")[1] != relative.parts[0]
            if (how.startswith("@past:") or crossing) and (str(relative), one.co_qualname, how) not in named:
                named.add((str(relative), one.co_qualname, how))
                what = how.removeprefix("@past:").removeprefix("@domain:")
                yield f"{relative}: {one.co_qualname} reaches {what}" + (" past its domain's api.py" if crossing else "")


def schema_reads(root: pathlib.Path, paths: list[pathlib.Path]) -> Iterator[tuple[str, str, str]]:
    """(file, function, what) for each view of every domain's tables at once a domain's code reaches (the shared
    metadata or mapper registry, however read: off Base, off a mapped class, by a local; the database's reflection),
    by what it is at run time. (Which files may: the caller's rule.)"""
    for relative, module, one, package in _domain_codes(root, paths):
        for what in dict.fromkeys(how for _, how in _flowed(one, vars(module), package) if how.startswith("@schema:")):
            yield str(relative), one.co_qualname, what.removeprefix("@schema:")


def network_reads(root: pathlib.Path, paths: list[pathlib.Path]) -> Iterator[tuple[str, str, str]]:
    """(file, function, library) for each network library (NETWORK) a domain's code reaches, by what each name it
    loads is at run time (an alias, a lazy import, a chain such as `urllib.request.urlopen`). (Which roles may: the
    caller's rule.)"""
    for relative, module, one, package in _domain_codes(root, paths):
        for what in dict.fromkeys(how for _, how in _flowed(one, vars(module), package) if how.startswith("@network:")):
            yield str(relative), one.co_qualname, what.removeprefix("@network:")


def connection_reads(root: pathlib.Path, paths: list[pathlib.Path]) -> Iterator[tuple[str, str, str]]:
    """(file, function, what) for each thing a domain's code reaches that holds or makes a database connection
    (`_connections`), by what it is at run time: an annotation's import, an alias, a lazy import, getattr with a
    literal. (Which files may: the caller's rule.)"""
    for relative, module, one, package in _domain_codes(root, paths):
        for what in dict.fromkeys(how for _, how in _flowed(one, vars(module), package) if how.startswith("@conn:")):
            yield str(relative), one.co_qualname, what.removeprefix("@conn:")


def sql_reads(root: pathlib.Path, paths: list[pathlib.Path]) -> Iterator[tuple[str, str, str]]:
    """(file, function, what) for each SQL-writing piece of SQLAlchemy or the driver a domain's code reaches, by
    what it is at run time (through a repository's or tables' namespace, an alias, a lazy import). (Which files
    may: the caller's rule.)"""
    for relative, module, one, package in _domain_codes(root, paths):
        for what in dict.fromkeys(how for _, how in _flowed(one, vars(module), package) if how.startswith("@sql:")):
            yield str(relative), one.co_qualname, what.removeprefix("@sql:")


def module_state_writes(root: pathlib.Path, paths: list[pathlib.Path]) -> Iterator[str]:
    """Each function of a domain that writes module-level state: rebinds a global, or changes a mutable container
    read off a module (its own globals or another's attribute), through any local it was copied to: a process-wide
    side table for calls (issue 47, "The call, explicit"); module level itself builds the module."""
    for relative, module, one, package in _domain_codes(root, paths):
        if not one.co_flags & inspect.CO_OPTIMIZED:  # the module's and its classes' bodies: what builds the module
            continue
        flowed = _flowed(one, vars(module), package)
        owner, _, method = one.co_qualname.partition(".")
        cls = vars(module).get(owner)
        if method and "." not in method and isinstance(cls, type) and one.co_argcount and any(
                isinstance(value, _CONTAINERS) for klass in cls.__mro__ if klass is not object
                for name, value in vars(klass).items() if not name.startswith("__")):
            # A method of a class holding a container at class level: what it reads off self may be that container.
            flowed = [*flowed, *flow(one, vars(module), package, _watched(), instance=(one.co_varnames[0], cls))]
        for what in dict.fromkeys(how for _, how in flowed if how.startswith("@mutates:")):
            yield f"{relative}: {one.co_qualname} {what.removeprefix('@mutates:').replace('a container', 'changes a module-level container').replace('the global', 'rebinds the global')}"


# What a memoized function's arguments may be: plain values, the same for every call and tenant (a resource type's
# name), so its cache is configuration read once, not call state.
_PLAIN = (str, int, float, bool, bytes, type(None), tuple, frozenset, enum.Enum)


def _memoized(module: types.ModuleType) -> Iterator[tuple[str, types.FunctionType]]:
    """(qualname, wrapped function) for each memoizing cache (functools.cache, lru_cache: what has `cache_info`) a
    module or one of its classes keeps."""
    for owner in (module, *(v for v in vars(module).values() if isinstance(v, type) and v.__module__ == module.__name__)):
        for value in list(vars(owner).values()):
            function = getattr(value, "__wrapped__", None)
            if hasattr(value, "cache_info") and isinstance(function, types.FunctionType):
                yield function.__qualname__, function


def closure_state(root: pathlib.Path, paths: list[pathlib.Path]) -> Iterator[str]:
    """Each function a domain's module keeps (at its top level or on its classes) whose closure or default arguments
    it changes: a cell made when the module was built, or a default made when the function was, outlives every call
    as a global does (`seen = []` in a factory whose function is kept at module level; `def f(ctx, _seen=[])`)."""
    for path in paths:
        module = importlib.import_module(_module_name(root, path))
        package = module.__name__.rpartition(".")[0]
        owners = (module, *(v for v in vars(module).values() if isinstance(v, type) and v.__module__ == module.__name__))
        for value in [v for owner in owners for v in list(vars(owner).values())]:
            function = inspect.unwrap(getattr(value, "__func__", value)) if callable(value) else None
            if not isinstance(function, types.FunctionType) or function.__module__ != module.__name__ \
                    or not (function.__closure__ or function.__defaults__ or function.__kwdefaults__):
                continue
            code = function.__code__
            positional = code.co_varnames[:code.co_argcount]
            cells = {**dict(zip(positional[len(positional) - len(function.__defaults__ or ()):],
                                function.__defaults__ or (), strict=True)), **(function.__kwdefaults__ or {}),
                     **{name: cell.cell_contents for name, cell in zip(code.co_freevars, function.__closure__ or ())
                        if _filled(cell)}}
            for what in dict.fromkeys(how for _, how in flow(function.__code__, function.__globals__, package,
                                                             _watched(), cells) if how.startswith("@mutates:")):
                what = what.removeprefix("@mutates:").replace("a container", "changes a container its closure or "
                                                              "defaults hold")
                yield f"{path.relative_to(root)}: {function.__qualname__} {what}"


def _filled(cell: object) -> bool:
    try:
        cell.cell_contents  # type: ignore[attr-defined]  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def memoized_call_state(root: pathlib.Path, paths: list[pathlib.Path]) -> Iterator[str]:
    """Each memoizing cache of a domain keyed by anything but plain values (`_PLAIN`, by the parameters' annotations;
    an unannotated one counts): a module-level table of calls' arguments (a Work, a principal, a repository...) and
    what was read with them, kept past the call and shared by every tenant (issue 47, "The call, explicit")."""
    for path in paths:
        module = importlib.import_module(_module_name(root, path))
        for qualname, function in _memoized(module):
            if function.__module__ != module.__name__:
                continue
            code = function.__code__
            for name in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]:
                if name in ("self", "cls"):
                    continue
                annotation = function.__annotations__.get(name)
                kinds = list(_named_types(annotation, function.__module__)) if annotation is not None else []
                loose = [k for k in kinds if not issubclass(k, _PLAIN)]
                if annotation is None or loose or not kinds:
                    what = "no annotation" if annotation is None else str(annotation)
                    yield f"{path.relative_to(root)}: {qualname} keeps a cache keyed by its argument {name} ({what})"


def api_exports(root: pathlib.Path) -> Iterator[tuple[str, str, str]]:
    """(api.py, exported name, the module defining it) for each function or class a domain's api.py exports, by the
    object (so a re-export of a re-export is named by where it is defined)."""
    for path in sorted(root.glob("*/api.py")):
        if path.parent.name in ("kernel", "process", "providers"):
            continue
        module = importlib.import_module(_module_name(root, path))
        for name in _exported(module):
            value = getattr(module, name, None)
            home = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None) \
                if isinstance(value, type | types.FunctionType) else type(value).__module__  # an instance: its class's
            if isinstance(home, str):
                yield str(path.relative_to(root)), name, home


def _named_types(annotation: object, module_name: str) -> Iterator[type]:
    """The classes an annotation names (a string under `from __future__ import annotations`, read in `module_name`:
    its names, `module.Class` attributes and quoted parts), as far as they resolve."""
    if not isinstance(annotation, str):
        if isinstance(annotation, type):
            yield annotation
        for arg in typing.get_args(annotation):
            yield from _named_types(arg, module_name)
        return
    try:
        tree = ast.parse(annotation, mode="eval")
    except SyntaxError:
        return
    for node in ast.walk(tree):
        value: object = None
        if isinstance(node, ast.Name):
            value = _name_in(node.id, module_name)
            value = getattr(builtins, node.id, None) if value is None else value
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            value = _attribute(_name_in(node.value.id, module_name), node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield from _named_types(node.value, module_name)
        if isinstance(value, type):
            yield value


def api_hands_out(root: pathlib.Path) -> Iterator[tuple[str, str, str, str]]:
    """(where, what crosses, the module defining its class, the module defining the signature) for each class an api.py's exports hand out by their
    types: a function's or method's result, a class's public field (what another domain is handed; what it hands
    in must already be its own). By the objects, as `any_across_apis` reads them: a re-exported service's method
    returning its repository, or a connection, is found. (Which classes may not cross: the caller's rule.)"""
    for path in sorted(root.glob("*/api.py")):
        if path.parent.name in SHARED:
            continue
        module = importlib.import_module(_module_name(root, path))
        for name in _exported(module):
            for where, annotation, home in _signatures(getattr(module, name, None), f"{path.parent.name}.api.{name}"):
                if where.endswith(")") and not where.endswith("(return)"):
                    continue  # a parameter: what the caller hands in
                for kind in _named_types(annotation, home):
                    yield where, f"{kind.__module__}.{kind.__qualname__}", kind.__module__, home


def api_reaches(root: pathlib.Path, paths: list[pathlib.Path]) -> Iterator[tuple[str, str, str]]:
    """(api.py, function, what) for each module, function or class of its own domain an api.py's code reaches that no
    api.py exports (its repository, a lazy import of it too): by what it is at run time. (Which roles it may be of:
    the caller's rule; an api.py re-exports and builds what other domains may use.)"""
    for relative, module, one, package in _domain_codes(root, paths):
        if relative.name != "api.py":
            continue
        for what in dict.fromkeys(how for _, how in _flowed(one, vars(module), package) if how.startswith("@domain:")):
            if what.split(".")[1] == relative.parts[0]:
                yield str(relative), one.co_qualname, what.removeprefix("@domain:")


def handed_out_by_classes(root: pathlib.Path, paths: list[pathlib.Path]) -> Iterator[tuple[str, str, str]]:
    """(file, where, class) for each class a public method of a domain's class hands out by its result's type, when
    it is a row or a result set of SQLAlchemy or the driver (by its class: a Row, RowMapping, any Result, a cursor):
    typed records cross layers, not rows. (Which files' classes may not: the caller's rule.)"""
    import psycopg
    from sqlalchemy.engine import Row, RowMapping
    from sqlalchemy.engine.result import ResultInternal

    rows = (Row, RowMapping, ResultInternal, psycopg.BaseConnection, getattr(psycopg, "BaseCursor", psycopg.Cursor))
    for path in paths:
        module = importlib.import_module(_module_name(root, path))
        for name, value in list(vars(module).items()):
            if not (isinstance(value, type) and value.__module__ == module.__name__):
                continue
            for where, annotation, home in _signatures(value, f"{module.__name__}.{name}"):
                if where.endswith("(return)"):
                    for kind in _named_types(annotation, home):
                        if issubclass(kind, rows):
                            yield str(path.relative_to(root)), where, f"{kind.__module__}.{kind.__qualname__}"


def settings_reads(root: pathlib.Path, paths: list[pathlib.Path]) -> Iterator[tuple[str, str, str]]:
    """(file, function, what) for each read of settings or of the environment by a domain's code: the door's `load`,
    a `from_env`, `os.environ` and its kin, by whatever name; a module's Resource opener (`Resource(name, open)`:
    once per App) counts as module level. (Which functions may: the caller's rule.)"""
    from persona_service.kernel.resources import Resource

    for relative, module, one, package in _domain_codes(root, paths):
        openers = {(value.open.__code__.co_name, value.open.__code__.co_firstlineno)
                   for value in vars(module).values() if isinstance(value, Resource)
                   and isinstance(value.open, types.FunctionType) and value.open.__module__ == module.__name__}
        if (one.co_name, one.co_firstlineno) in openers:
            continue
        for _, how in _flowed(one, vars(module), package):
            if how.startswith("@settings:"):
                yield str(relative), one.co_qualname, how.removeprefix("@settings:")


# --- Any across a domain's public surface -------------------------------------------------------------------------


@functools.cache
def _imports_of(module_name: str) -> dict[str, tuple[str, str | None]]:
    """Every name a module's imports bind (the TYPE_CHECKING ones too, which its globals lack, and relative ones):
    name -> (module, name in it, or None for the module itself)."""
    try:
        tree = ast.parse(inspect.getsource(sys.modules[module_name]))
    except (OSError, TypeError, SyntaxError):
        return {}
    package = module_name if hasattr(sys.modules[module_name], "__path__") else module_name.rpartition(".")[0]
    bound: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            try:
                home = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            except ImportError:
                continue
            bound.update({alias.asname or alias.name: (f"{home}.{alias.name}", None) if node.module is None
                          else (home, alias.name) for alias in node.names})
        elif isinstance(node, ast.ImportFrom) and node.module:
            bound.update({alias.asname or alias.name: (node.module, alias.name) for alias in node.names})
        elif isinstance(node, ast.Import):
            bound.update({alias.asname or alias.name.partition(".")[0]:
                          (alias.name if alias.asname else alias.name.partition(".")[0], None) for alias in node.names})
    return bound


def _name_in(name: str, module_name: str) -> object:
    """What `name` is in a module, as its annotations see it (a type-only import resolved by importing it)."""
    globals_ = vars(sys.modules[module_name])
    if name in globals_:
        return globals_[name]
    home = _imports_of(module_name).get(name)
    try:
        return None if home is None else _attribute(importlib.import_module(home[0]), home[1]) if home[1] \
            else importlib.import_module(home[0])
    except Exception:  # noqa: BLE001 - a name that does not load is no Any
        return None


# What a module-level assignment's value must be to make its name a type alias (`Rows = list[Any]`, `Raw = Any`,
# `Maybe = Any | None`): a call, a literal or a comprehension makes a value, not a type.
_TYPE_EXPRESSIONS = (ast.Subscript, ast.Name, ast.Attribute, ast.BinOp)


def _is_type_alias(annotation: ast.expr, module_name: str) -> bool:
    """Whether a module-level annotation says TypeAlias, by any name (`from typing import TypeAlias as TA`)."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return False
    if isinstance(annotation, ast.Name):
        return annotation.id == "TypeAlias" or _name_in(annotation.id, module_name) is typing.TypeAlias
    if isinstance(annotation, ast.Attribute):
        return annotation.attr == "TypeAlias"
    return False


@functools.cache
def _aliases_of(module_name: str) -> dict[str, ast.expr]:
    """The type aliases a module defines at its top level (inside `if TYPE_CHECKING:` and `try:` too): name -> the
    type expression it stands for. `X = <type expression>`, `X: TypeAlias = ...` (a string value parsed: mypy reads
    it so), and PEP 695's `type X = ...` where the Python reading it has one."""
    try:
        tree = ast.parse(inspect.getsource(sys.modules[module_name]))
    except (KeyError, OSError, TypeError, SyntaxError):
        return {}
    aliases: dict[str, ast.expr] = {}
    statements: list[ast.stmt] = list(tree.body)
    type_statement = getattr(ast, "TypeAlias", None)  # 3.12's `type X = ...`
    while statements:
        node = statements.pop(0)
        if isinstance(node, (ast.If, ast.Try)):
            statements.extend([*node.body, *node.orelse, *getattr(node, "finalbody", ())])
        elif type_statement is not None and isinstance(node, type_statement):
            aliases[node.name.id] = node.value  # type: ignore[attr-defined]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None \
                and _is_type_alias(node.annotation, module_name):
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                try:
                    value = ast.parse(value.value, mode="eval").body
                except SyntaxError:
                    continue
            aliases[node.target.id] = value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, _TYPE_EXPRESSIONS):
            aliases[node.targets[0].id] = node.value
    return aliases


def _holds_any(value: object, seen: set[int]) -> bool:
    """Whether a type object (`dict[str, Any]`, `Optional[Any]`, `Callable[..., Any]`) holds typing.Any anywhere in
    its arguments: an alias whose source this check cannot read (built at run time, or from a compiled module)."""
    if value is Any:
        return True
    if id(value) in seen or not (isinstance(value, types.UnionType) or typing.get_origin(value) is not None):
        return False
    seen.add(id(value))
    return any(_holds_any(arg, seen) for arg in typing.get_args(value)
               for arg in (arg if isinstance(arg, (list, tuple)) else [arg]))


def _names_any(name: str, module_name: str, seen: set[tuple[str, str]]) -> bool:
    """Whether `name`, as `module_name`'s annotations see it, is typing.Any or an alias holding it: the alias the
    module defines, or the one it imports (from wherever that module has it), followed through aliases of aliases
    (`seen`: a recursive alias, `Tree = dict[str, "Tree | int"]`, is read once)."""
    if (module_name, name) in seen or module_name not in sys.modules:
        return False
    seen.add((module_name, name))
    value = _name_in(name, module_name)
    if value is Any:
        return True
    alias = _aliases_of(module_name).get(name)
    if alias is not None:
        return _expression_says_any(alias, module_name, seen)
    home = _imports_of(module_name).get(name)
    if home is not None and home[1] is not None:
        try:
            importlib.import_module(home[0])
        except Exception:  # noqa: BLE001 - a module that does not load holds no alias we can read
            return False
        return _names_any(home[1], home[0], seen)
    return _holds_any(value, set())


def _expression_says_any(tree: ast.expr, module_name: str, seen: set[tuple[str, str]]) -> bool:
    """Whether a type expression, read in `module_name`, names typing.Any, directly or through aliases (a quoted
    part, `list["Rows"]`, read as the expression it holds)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and _names_any(node.id, module_name, seen):
            return True
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            owner = _name_in(node.value.id, module_name)
            if isinstance(owner, types.ModuleType) and _names_any(node.attr, owner.__name__, seen):
                return True
            if owner is not None and _holds_any(_attribute(owner, node.attr), set()):
                return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                quoted = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                continue
            if _expression_says_any(quoted, module_name, seen):
                return True
    return False


def _says_any(annotation: object, module_name: str) -> bool:
    """Whether an annotation (a string under `from __future__ import annotations`) names typing.Any, by any alias:
    a name bound to it, or a type alias holding it (`Rows = list[dict[str, Any]]`, a TypeAlias, one imported from
    another module, aliases of aliases), however deep in the annotation."""
    if not isinstance(annotation, str):
        return _holds_any(annotation, set())
    try:
        tree = ast.parse(annotation, mode="eval")
    except SyntaxError:
        return False
    return _expression_says_any(tree.body, module_name, set())


def _signatures(value: object, where: str) -> Iterator[tuple[str, object, str]]:
    """(where, annotation, module) for what crosses with `value`: a function's parameters and result; a class's
    public fields and its public methods' (and properties') parameters and results, down its package bases."""
    if isinstance(value, type):
        for cls in value.__mro__:
            if not cls.__module__.startswith("persona_service"):
                continue
            for name, annotation in vars(cls).get("__annotations__", {}).items():
                if not name.startswith("_"):
                    yield f"{where}.{name}", annotation, cls.__module__
            for name, member in vars(cls).items():
                function = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
                if (not name.startswith("_") or name == "__init__") and isinstance(function, types.FunctionType):
                    yield from _signatures(function, f"{where}.{name}")
    elif isinstance(value, types.FunctionType) and value.__module__.startswith("persona_service"):
        for name, annotation in value.__annotations__.items():
            if name not in ("self", "cls"):
                yield f"{where}({name})", annotation, value.__module__


def _exported(module: types.ModuleType) -> list[str]:
    """What another module can import from `module`: its `__all__` and every other public name it binds (Python
    does not hold an importer to `__all__`)."""
    return list(dict.fromkeys([*getattr(module, "__all__", ()), *(name for name in vars(module)
                                                                  if not name.startswith("_"))]))


def any_across_apis(root: pathlib.Path) -> Iterator[str]:
    """Typed data across layers (issue 47): what a domain's `api.py` exports (its functions, and its classes' public
    fields, methods and properties, wherever they are defined) names no `typing.Any`, by any alias, in any position
    (`-> Any`, `dict[str, Any]`, `**values: Any`). By the objects the module exports, not by reading api.py: a
    re-exported service's methods count. (mypy's disallow_any_explicit would read only api.py's own lines.)"""
    for path in sorted(root.glob("*/api.py")):
        if path.parent.name in ("kernel", "process", "providers"):
            continue
        module = importlib.import_module(_module_name(root, path))
        for name in _exported(module):
            for where, annotation, home in _signatures(getattr(module, name, None), f"{path.parent.name}.api.{name}"):
                if _says_any(annotation, home):
                    yield f"{where}: {annotation} ({home})"
            yield from _unannotated(getattr(module, name, None), f"{path.parent.name}.api.{name}")


def _unannotated(value: object, where: str) -> Iterator[str]:
    """What crosses with `value` with no annotation at all, an implicit Any (mypy holds a `def` to its annotations,
    not a lambda nor a namedtuple's fields): a function's parameter or result (a lambda's), a class's public fields
    that no annotation types (`collections.namedtuple`'s), and its public methods', down its package bases."""
    if isinstance(value, type):
        for cls in value.__mro__:
            if not cls.__module__.startswith("persona_service"):
                continue
            fields = vars(cls).get("_fields")
            if isinstance(fields, tuple):
                typed = vars(cls).get("__annotations__", {})
                yield from (f"{where}.{field}: no annotation, an implicit Any ({cls.__module__})" for field in fields
                            if isinstance(field, str) and not field.startswith("_") and field not in typed)
            for name, member in vars(cls).items():
                function = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
                if not name.startswith("_") and isinstance(function, types.FunctionType):
                    yield from _unannotated(function, f"{where}.{name}")
    elif isinstance(value, types.FunctionType) and value.__module__.startswith("persona_service"):
        code = value.__code__
        count = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & inspect.CO_VARARGS) \
            + bool(code.co_flags & inspect.CO_VARKEYWORDS)
        for name in code.co_varnames[:count]:
            if name not in value.__annotations__ and name not in ("self", "cls"):
                yield f"{where}({name}): no annotation, an implicit Any ({value.__module__})"
        if "return" not in value.__annotations__ and value.__name__ != "__init__":
            yield f"{where}(return): no annotation, an implicit Any ({value.__module__})"


def any_across_the_door(root: pathlib.Path) -> Iterator[tuple[str, str]]:
    """`any_across_apis` for the kernel's door: what `kernel/api.py` names (`__all__`), by the objects themselves, in
    any position. What a domain is handed with an `Any` in it is unchecked data mypy's disallow_any_explicit, which
    reads only the domain's own lines, cannot see."""
    door = importlib.import_module(_module_name(root, root / "kernel" / "api.py"))
    for name in door.__all__:
        for where, annotation, home in _signatures(getattr(door, name, None), f"kernel.api.{name}"):
            importlib.import_module(home)
            if _says_any(annotation, home):
                yield where, home


def _checked(folder: pathlib.Path) -> dict[str, object]:
    """In the child forked for `folder`: its offenders, and the libraries its check loaded (for the next ones)."""
    os.chdir(folder.parent)
    sys.path.insert(0, str(folder.parent))
    lines = list(offenders(folder))
    domains = {p.parent.name for p in folder.glob("*/__init__.py")} - {"kernel", "process", "providers"}
    paths = sorted(p for d in sorted(domains) for p in (folder / d).rglob("*.py") if "migrations" not in p.parts)
    past = list(past_the_door(folder, paths))
    reads = [list(read) for read in settings_reads(folder, paths)]
    untyped = list(any_across_apis(folder))
    door_any = [list(found) for found in dict.fromkeys(any_across_the_door(folder))]
    network = [list(read) for read in network_reads(folder, paths)]
    exports = [list(export) for export in api_exports(folder)]
    sql = [list(read) for read in sql_reads(folder, paths)]
    connections = [list(read) for read in connection_reads(folder, paths)]
    module_state = [*module_state_writes(folder, paths), *memoized_call_state(folder, paths),
                    *closure_state(folder, paths)]
    schema = [list(read) for read in schema_reads(folder, paths)]
    handed = [list(found) for found in api_hands_out(folder)]
    api_reached = [list(found) for found in api_reaches(folder, paths)]
    by_classes = [list(found) for found in dict.fromkeys(handed_out_by_classes(folder, paths))]
    libraries = [name for name, module in list(sys.modules.items()) if name.partition(".")[0] != "persona_service"
                 and name != "__main__" and not str(getattr(module, "__file__", "") or "").startswith(str(folder))]
    return {"lines": lines, "past_the_door": past, "settings_reads": reads, "any_across_apis": untyped, "network": network, "api_exports": exports, "sql": sql, "connections": connections, "any_across_the_door": door_any,
            "module_state": module_state, "schema": schema, "api_hands_out": handed, "api_reaches": api_reached,
            "handed_out_by_classes": by_classes,
            "libraries": libraries}


def _preload(names: list[str]) -> None:
    """Import what a check loaded besides the package, so every later child starts with it. A library that
    fails to import on its own (or out of its order) is left to the children, as before."""
    for name in names:
        try:
            importlib.import_module(name)
        except BaseException:  # noqa: BLE001, S112 - the child imports it itself
            continue


def _warm(folder: pathlib.Path) -> None:
    """Compile and decode every file of `folder` here, so each child forked later finds them (`_compiled` is keyed
    by the source: a planted copy's other files are the same)."""
    for path in folder.rglob("*.py"):
        for code in _codes(_compiled(path.read_bytes(), str(path))):
            _instructions(code)


def serve() -> None:
    """One folder a line on stdin, one JSON line on stdout for each; each folder's check runs in a child forked
    from this process, which has imported none of the package (so no copy's module or metric is left behind)."""
    preloaded, warmed = "--no-preload" in sys.argv, False
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
        if not warmed and "error" not in result:
            warmed = True
            _warm(folder)


if __name__ == "__main__":
    _loader.source_to_code = _package_source_to_code  # the package's imports share `_compiled`'s code
    if sys.argv[1] == "--serve":
        serve()
        sys.exit(0)
    folder = pathlib.Path(sys.argv[1]).resolve()
    sys.path.insert(0, str(folder.parent))
    for line in offenders(folder):
        print(line)
