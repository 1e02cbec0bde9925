"""Generate the Python SDK's typed layer from the OpenAPI document.

Run: python scripts/gen_sdk_python.py           (writes sdk/python/src/persona_sdk/_generated.py)
     python scripts/gen_sdk_python.py --check   (exit 1 when that file differs from gen/openapi.json)

What it writes, from gen/openapi.json alone (deterministic: no clock, no
environment): a TypedDict per component schema (JSON member names, every
member optional since proto3 JSON leaves defaults out), one resource class
per OpenAPI tag with one method per operation (named by scripts/sdk_names.py,
shared with the TypeScript SDK: `client.api_keys.create`, `client.chat.stream_message`;
path parameters positional, query parameters and the top-level members of a JSON
body keyword-only in snake_case; an `Idempotency-Key` option on writes), a
`<method>_iter` for every paginated list, and the client class holding one
resource per tag. Operations without a JSON answer (raw bodies, redirects,
SCIM, probes' metrics, /docs) return the httpx.Response; streams return the
SDK's event stream classes (persona_sdk/_streaming.py).
"""

from __future__ import annotations

import argparse
import ast
import json
import keyword
import pathlib
import re
import sys
import textwrap
from dataclasses import dataclass, field
from typing import Any

from sdk_names import check_names, pascal_case, resource_name, snake_case, write_or_check

ROOT = pathlib.Path(__file__).resolve().parent.parent
OPENAPI = ROOT / "gen" / "openapi.json"
OUT = ROOT / "sdk" / "python" / "src" / "persona_sdk" / "_generated.py"
# The client's hand-written core: a resource may not shadow the members of its ClientCore.
CORE = ROOT / "sdk" / "python" / "src" / "persona_sdk" / "_core.py"
# The stream class for a streaming operation's message (named in its 200 description).
STREAM_CLASSES = {"PipelineEvent": "PersonaStream", "ChatMessageEvent": "ChatStream"}
GENERIC_STREAM = "EventStream"
WRITES = {"post", "put", "patch", "delete"}
METHODS = ("get", "post", "put", "patch", "delete")
# Names the generated method bodies use: no parameter may take them.
RESERVED = {"self", "cast", "compact", "path_param", "idempotency_key", "extra_headers", "last_event_id"}
# Builtins the annotations use: a method of that name (`list`) shadows it in its class's annotations,
# where they are written `builtins.list` instead.
BUILTIN_TYPES = {"bool", "bytes", "dict", "float", "int", "list", "str"}
WIDTH = 116
# Marks prose lines (docstrings, comments) while rendering: names there are not imports' uses.
PROSE = "\x00"


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def identifier(name: str) -> str:
    """A snake_case name as a Python attribute: a keyword gets a trailing underscore (`import_`)."""
    return name + "_" if keyword.iskeyword(name) else name


def qualify_builtins(lines: list[str], shadowed: set[str]) -> list[str]:
    """The lines of a class with the annotations of its methods' signatures naming `shadowed`
    builtins as `builtins.<name>` (parameter names, defaults and bodies are left alone)."""
    if not shadowed:
        return lines
    name = re.compile(rf"(?<![\w.\"'])({'|'.join(sorted(shadowed))})(?!\w)")

    def qualified(annotation: str) -> str:
        return name.sub(r"builtins.\1", annotation)

    out, signature = [], False
    for line in lines:
        if line.startswith("    def "):
            signature = True
        elif signature and line.startswith("    ) -> "):
            line = "    ) -> " + qualified(line.removeprefix("    ) -> "))
            signature = False
        elif signature and ": " in line:
            param, _, annotation = line.partition(": ")
            line = f"{param}: {qualified(annotation)}"
        out.append(line)
    return out


def client_members(core: pathlib.Path = CORE) -> set[str]:
    """The public methods and attributes of ClientCore (`close`, `request`, `base_url`, …)."""
    tree = ast.parse(core.read_text())
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ClientCore":
            found |= {f.name for f in node.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}
            found |= {a.attr for a in ast.walk(node)
                      if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name) and a.value.id == "self"}
    return {name for name in found if not name.startswith("_")}


def ref_name(schema: dict[str, Any]) -> str | None:
    ref = schema.get("$ref")
    return ref.rsplit("/", 1)[-1] if ref else None


def literal(values: list[Any]) -> str:
    return "Literal[" + ", ".join(json.dumps(v) for v in values) + "]"


def py_type(schema: dict[str, Any], *, top_input: bool = False) -> str:
    """The Python type of a JSON schema; `top_input` for a keyword argument
    (arrays accept any sequence there)."""
    name = ref_name(schema)
    if name:
        return name
    if "enum" in schema:
        return literal(schema["enum"])
    if "const" in schema:
        return literal([schema["const"]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(py_type({**schema, "type": k}) for k in kind)
    if kind == "string":
        return "str"
    if kind == "integer":
        return "int"
    if kind == "number":
        return "float"
    if kind == "boolean":
        return "bool"
    if kind == "null":
        return "None"
    if kind == "array":
        item = py_type(schema.get("items", {}))
        return f"Sequence[{item}]" if top_input else f"list[{item}]"
    if kind == "object":
        extra = schema.get("additionalProperties")
        return f"dict[str, {py_type(extra)}]" if isinstance(extra, dict) and extra else "dict[str, Any]"
    return "Any"


def comment_lines(text: str, indent: str) -> list[str]:
    return [PROSE + line for line in textwrap.wrap(text, WIDTH - len(indent) - 2, initial_indent=f"{indent}# ",
                                                   subsequent_indent=f"{indent}# ", break_on_hyphens=False)]


def docstring(paragraphs: list[str], indent: str) -> list[str]:
    """A docstring of wrapped paragraphs; a paragraph's lines starting with two
    spaces are list items (wrapped with a hanging indent)."""
    out: list[str] = []
    for paragraph in paragraphs:
        if out:
            out.append("")
        for line in paragraph.split("\n"):
            item = indent + "  " if line.startswith("  ") else indent
            out.extend(textwrap.wrap(line.strip(), WIDTH - len(indent), initial_indent=item,
                                     subsequent_indent=item + ("    " if item != indent else ""),
                                     break_on_hyphens=False) or [indent])
    text = "\n".join(line.rstrip() for line in out).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    text = text[len(indent):]
    if "\n" not in text:
        return [f'{PROSE}{indent}"""{text}"""']
    return [PROSE + line for line in f'{indent}"""{text}\n{indent}"""'.split("\n")]


def call_args(values: list[tuple[str, str]], indent: str) -> str:
    """`{"wire": name, ...}` on one line, or one member a line when that is too long."""
    one = "{" + ", ".join(f'"{wire}": {name}' for wire, name in values) + "}"
    if len(indent) + len(one) + 20 <= WIDTH:
        return one
    return "{\n" + "".join(f'{indent}    "{wire}": {name},\n' for wire, name in values) + indent + "}"


def sentence(text: str) -> str:
    text = text.strip()
    return text if not text or text.endswith((".", "!", "?")) else text + "."


@dataclass
class Param:
    name: str  # the Python name
    wire: str  # the JSON / query name
    type: str
    required: bool
    description: str = ""

    def signature(self) -> str:
        return f"{self.name}: {self.type}" if self.required else f"{self.name}: {self.type} | None = None"


@dataclass
class Operation:
    op_id: str
    method: str
    path: str
    tag: str
    summary: str
    description: str
    path_params: list[Param] = field(default_factory=list)
    query: list[Param] = field(default_factory=list)
    body: list[Param] = field(default_factory=list)
    body_kind: str = ""  # "" none, "json" members as kwargs, "any" a JSON value, "raw" bytes
    result: str = "raw"  # "json", "raw" or "stream"
    result_type: str = "httpx.Response"
    stream_class: str = ""
    page: str | None = None  # a list's item type (README, Contract decisions: one list style)
    resource: str = ""  # the client's attribute (scripts/sdk_names.py): `api_keys`
    name: str = ""  # the method (scripts/sdk_names.py): `create`, `stream_message`


class Generator:
    def __init__(self, document: dict[str, Any]):
        self.doc = document
        self.schemas: dict[str, dict[str, Any]] = document["components"]["schemas"]

    # --- reading the document ---------------------------------------------------------

    def operations(self) -> list[Operation]:
        found = []
        for path, item in self.doc["paths"].items():
            for method in METHODS:
                if method in item:
                    found.append(self.operation(path, method, item[method]))
        # The names shared with the TypeScript SDK, in snake_case; two operations (or tags) with one name stop here.
        names = check_names(((op.tag, op.op_id) for op in found), "gen_sdk_python")
        for op in found:
            resource, method = names[op.op_id]
            op.resource, op.name = identifier(snake_case(resource)), identifier(snake_case(method))
        methods = {(op.resource, op.name) for op in found}
        for op in found:
            if op.page is not None and (op.resource, f"{op.name}_iter") in methods:
                raise SystemExit(f"gen_sdk_python: {op.resource}.{op.name}_iter is both an operation and the "
                                 f"iterator of {op.op_id}")
        return found

    def operation(self, path: str, method: str, spec: dict[str, Any]) -> Operation:
        op = Operation(spec["operationId"], method, path, spec["tags"][0], spec.get("summary", ""),
                       spec.get("description", ""))
        for p in spec.get("parameters", []):
            param = Param(snake(p["name"]), p["name"], py_type(p["schema"]), p["in"] == "path",
                          p.get("description") or p["schema"].get("description", ""))
            (op.path_params if p["in"] == "path" else op.query).append(param)
        body = spec.get("requestBody", {}).get("content", {})
        body_ref = ref_name(body.get("application/json", {}).get("schema", {}))
        if body_ref:
            op.body_kind = "json"
            schema = self.schemas[body_ref]
            required = set(schema.get("required", []))
            for wire, prop in schema.get("properties", {}).items():
                if not prop.get("readOnly"):
                    op.body.append(Param(snake(wire), wire, py_type(prop, top_input=True), wire in required,
                                         prop.get("description", "")))
            op.body.sort(key=lambda p: not p.required)
        elif "application/json" in body:
            op.body_kind = "any"
        elif body:
            op.body_kind = "raw"
        answer = next(r for s, r in spec["responses"].items() if s.startswith(("2", "3")))
        content = answer.get("content", {})
        if "text/event-stream" in content:
            op.result = "stream"
            named = re.search(r"one event per message of `(\w+)`", answer.get("description", ""))
            op.stream_class = STREAM_CLASSES.get(named.group(1) if named else "", GENERIC_STREAM)
            op.result_type = op.stream_class if op.stream_class != GENERIC_STREAM else f"{GENERIC_STREAM}[dict[str, Any]]"
        elif "application/json" in content:
            op.result = "json"
            op.result_type = py_type(content["application/json"]["schema"])
            op.page = self.pagination(op, content["application/json"]["schema"])
        names = [p.name for p in op.path_params + op.query + op.body]
        reserved = RESERVED | {"any": {"body"}, "raw": {"content", "content_type"}}.get(op.body_kind, set())
        clash = (set(names) & reserved) | {n for n in names if names.count(n) > 1 or keyword.iskeyword(n)}
        if clash:
            raise SystemExit(f"{op.op_id}: parameter names {sorted(clash)} clash; extend the generator")
        return op

    def pagination(self, op: Operation, schema: dict[str, Any]) -> str | None:
        """The item type of a list (`cursor` → `items` + `nextCursor`), else None."""
        name = ref_name(schema)
        props = self.schemas[name].get("properties", {}) if name else {}
        if "cursor" in {p.wire for p in op.query} and "nextCursor" in props and "items" in props:
            return py_type(props["items"]["items"])
        return None

    # --- writing ----------------------------------------------------------------------

    def typed_dict(self, name: str, schema: dict[str, Any]) -> list[str]:
        lines = [f"class {name}(TypedDict, total=False):"]
        lines += docstring([sentence(schema.get("description", "") or f"The `{name}` schema.")], "    ")
        props = schema.get("properties", {})
        if props:
            lines.append("")
        for wire, prop in props.items():
            note = prop.get("description", "")
            if prop.get("readOnly"):
                note = f"{note} (Output only.)".strip()
            lines += comment_lines(note, "    ")
            lines.append(f"    {wire}: {py_type(prop)}")
        return lines

    def method(self, op: Operation) -> list[str]:
        write = op.method in WRITES and op.result != "stream"
        args = [p.signature() for p in op.path_params]
        keyword_args = [p.signature() for p in op.query + op.body]
        if op.body_kind == "any":
            keyword_args.append("body: Any")
        elif op.body_kind == "raw":
            keyword_args += ["content: bytes", 'content_type: str = "application/json"']
        if op.result == "stream":
            keyword_args.append("last_event_id: str | None = None")
        if write:
            keyword_args.append("idempotency_key: str | Literal[False] | None = None")
        keyword_args.append("extra_headers: Mapping[str, str] | None = None")
        lines = [f"    def {op.name}(", "        self,"]
        lines += [f"        {a}," for a in args]
        lines += ["        *,"] + [f"        {a}," for a in keyword_args]
        lines.append(f"    ) -> {op.result_type}:")
        lines += docstring(self.method_doc(op), "        ")
        lines += self.method_body(op, write)
        if op.page is not None:
            lines += [""] + self.iterator(op)
        return lines

    def method_doc(self, op: Operation) -> list[str]:
        # The description's first sentence heads the docstring (the summary is that, cut at 120 characters).
        text = op.description.strip() or op.summary
        first, _, rest = text.partition(". ")
        paragraphs = [sentence(first) or f"`{op.op_id}`.", f"`{op.method.upper()} {op.path}` (operation `{op.op_id}`)."]
        # Paragraph breaks of the proto comment come through as two spaces after a sentence.
        paragraphs += [p for p in re.split(r"(?<=[.:])  +(?=\S)", rest.strip()) if p]
        documented = [p for p in op.path_params + op.query + op.body if p.description]
        if documented:
            paragraphs.append("Args:\n" + "\n".join(f"  {p.name}: {p.description}" for p in documented))
        if op.result == "raw":
            paragraphs.append("Returns the raw httpx.Response (not a JSON answer); errors are raised as usual.")
        if op.result == "stream":
            paragraphs.append("Returns the event stream (resumed by itself after a drop); pass `last_event_id` "
                              "to resume a stream read earlier.")
        return paragraphs

    def method_body(self, op: Operation, write: bool) -> list[str]:
        path = op.path
        for p in op.path_params:
            path = path.replace("{" + p.wire + "}", "{path_param(" + p.name + ")}")
        path = f'f"{path}"' if op.path_params else json.dumps(path)
        indent = "                " if op.result == "json" else "            "
        call: list[str] = []
        if op.query:
            call.append(f"params=compact({call_args([(p.wire, p.name) for p in op.query], indent)}),")
        body = ""
        if op.body_kind == "json":
            body = f"compact({call_args([(p.wire, p.name) for p in op.body], indent)})" if op.body else "{}"
        elif op.body_kind == "any":
            body = "body"
        if op.result == "stream":
            call += [f"body={body or 'None'},", "last_event_id=last_event_id,"]
        elif body:
            call.append(f"json={body},")
        if op.body_kind == "raw":
            call += ["content=content,", "content_type=content_type,"]
        if write:
            call.append("idempotency_key=idempotency_key,")
        call.append("extra_headers=extra_headers,")
        if op.result == "stream":
            head = f"        return self._client._stream(\n{indent}{op.stream_class},\n{indent}\"{op.method.upper()}\","
            tail = "        )"
        elif op.result == "json":
            head = f"        return cast(\n            \"{op.result_type}\",\n            self._client._json(\n" \
                   f"                \"{op.method.upper()}\","
            tail = "            ),\n        )"
        else:
            head = f"        return self._client.request(\n{indent}\"{op.method.upper()}\","
            tail = "        )"
        return [head, f"{indent}{path},"] + [f"{indent}{c}" for c in call] + [tail]

    def iterator(self, op: Operation) -> list[str]:
        assert op.page is not None
        params = [p for p in op.query if p.wire != "cursor"]
        lines = [f"    def {op.name}_iter(", "        self,"]
        lines += [f"        {a}," for a in [p.signature() for p in op.path_params]]
        lines += ["        *,"] + [f"        {p.signature()}," for p in params]
        lines += ["        extra_headers: Mapping[str, str] | None = None,", f"    ) -> Iterator[{op.page}]:"]
        lines += docstring([f"Every item of `{op.name}`, fetching page after page."], "        ")
        passed = [f"self.{op.name}"] + [p.name for p in op.path_params] + [f"{p.name}={p.name}" for p in params]
        lines += ["        return self._client.paginate("] + [f"            {a}," for a in passed]
        lines += ["            extra_headers=extra_headers,", "        )"]
        return lines

    def render(self) -> str:
        ops = self.operations()
        by_tag: dict[str, list[Operation]] = {}
        for op in ops:
            by_tag.setdefault(op.tag, []).append(op)
        # (attribute, class, tag) of each resource: `api_keys`, `ApiKeysResource` (the TypeScript SDK's class names).
        resources = sorted((group[0].resource, pascal_case(resource_name(tag)) + "Resource", tag)
                           for tag, group in by_tag.items())
        clash = set(self.schemas) & {cls for _, cls, _ in resources}
        if clash:
            raise SystemExit(f"schema names {sorted(clash)} clash with resource classes")
        shadowed = client_members() & {attr for attr, _, _ in resources}
        if shadowed:
            raise SystemExit(f"resources {sorted(shadowed)} would shadow members of the client; rename them in "
                             "scripts/sdk_names.py RESOURCES")

        body: list[str] = ["# --- schemas (components/schemas) " + "-" * 84]
        for name, schema in self.schemas.items():
            body += ["", ""] + self.typed_dict(name, schema)
        body += ["", "", "# --- resources (one per tag) " + "-" * 89]
        for attr, cls, tag in resources:
            body += ["", "", f"class {cls}(Resource):"]
            body += docstring([f"The `{tag}` operations: `client.{attr}`."], "    ")
            methods: list[str] = []
            for op in by_tag[tag]:
                methods += [""] + self.method(op)
            names = {op.name for op in by_tag[tag]} | {f"{op.name}_iter" for op in by_tag[tag] if op.page}
            body += qualify_builtins(methods, names & BUILTIN_TYPES)
        body += ["", "", "class GeneratedClient(ClientCore):"]
        body += docstring(["The client with one resource per tag (PersonaClient adds nothing but its documentation)."],
                          "    ")
        body += [""] + [f"    {attr}: {cls}" for attr, cls, _ in resources]
        body += ["", "    def _init_resources(self) -> None:"]
        body += [f"        self.{attr} = {cls}(self)" for attr, cls, _ in resources]
        code = "\n".join(line for line in body if not line.startswith(PROSE))
        text = "\n".join(line.removeprefix(PROSE) for line in body) + "\n"
        return self.header(code) + text

    def header(self, code: str) -> str:
        def used(name: str) -> bool:
            return re.search(rf"\b{re.escape(name)}\b", code) is not None

        abc = [n for n in ("Iterator", "Mapping", "Sequence") if used(n)]
        typing = [n for n in ("Any", "Literal", "TypedDict", "cast") if used(n)]
        core = [n for n in ("ClientCore", "Resource", "compact", "path_param") if used(n)]
        streams = sorted(n for n in {*STREAM_CLASSES.values(), GENERIC_STREAM} if used(n))
        version = self.doc["info"]["version"]
        lines = [
            "# Generated by scripts/gen_sdk_python.py from gen/openapi.json: do not edit, run the script.",
            f'"""The Persona Service API {version}, typed: schemas and resources (generated)."""',
            "",
            "from __future__ import annotations",
            "",
        ]
        if used("builtins."):
            lines.append("import builtins")
        if abc:
            lines.append(f"from collections.abc import {', '.join(abc)}")
        lines.append(f"from typing import {', '.join(typing)}")
        lines += ["", "import httpx", ""] if used("httpx.") else [""]
        lines.append(f"from ._core import {', '.join(core)}")
        if streams:
            lines.append(f"from ._streaming import {', '.join(streams)}")
        lines += ["", f'API_VERSION = "{version}"', ""]
        lines += ["# The schemas (persona_sdk.types re-exports them).", "__all__ = ["]
        lines += [f'    "{name}",' for name in self.schemas] + ["]", "", ""]
        return "\n".join(lines)


def generate(source: pathlib.Path = OPENAPI) -> str:
    return Generator(json.loads(source.read_text())).render()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file on disk is not what would be written")
    args = parser.parse_args()
    sys.exit(write_or_check(OUT, generate(), "scripts/gen_sdk_python.py", args.check))


if __name__ == "__main__":
    main()
