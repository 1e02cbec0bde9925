"""The API spec (`../shared/spec/persona-service-api.md`) read as data: its
resource field tables, its endpoint table (and the operations it names
elsewhere), its error catalogue and the headers every answer carries. Used by
test_spec_conformance.py; nothing here knows the implementation."""

from __future__ import annotations

import pathlib
import re
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parents[1]
SPEC = ROOT.parent / "shared" / "spec" / "persona-service-api.md"

JSON_TYPES = ("string", "number", "boolean", "object", "string[]", "number[]", "boolean[]", "object[]")
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
_OPERATION = re.compile(rf"\b({'|'.join(METHODS)}) (/v1/[^\s`),;]*[^\s`),;.])")
TICKED = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class Field:
    name: str
    type: str  # as written: `string`, `object[]`, or prose (`IP ranges`) for a descriptive row
    notes: str
    required: bool | None  # None: the spec does not say
    listed: tuple[str, ...] = ()  # allowed values the spec lists elsewhere ("One of the event types in Events")

    @property
    def choices(self) -> tuple[str, ...]:
        """The allowed values when the notes are just a list of them (`active`, `ended`, `archived`)."""
        if self.listed:
            return self.listed
        notes = re.sub(r"^(Required;|Allowed values:)\s*", "", self.notes.strip())
        rest = TICKED.sub("", notes)
        if len(TICKED.findall(notes)) < 2 or re.sub(r"[\s,]|\bor\b", "", rest):
            return ()
        return tuple(TICKED.findall(notes))

    @property
    def id_prefix(self) -> str | None:
        """`evt_` for notes saying "form `evt_*`"."""
        found = re.search(r"\bform `(\w+_)\*`", self.notes, re.IGNORECASE)
        return found.group(1) if found else None


@dataclass(frozen=True)
class Resource:
    name: str  # the heading up to its first `(` or `;`: "Chat session"
    heading: str
    fields: tuple[Field, ...]

    @property
    def id_prefix(self) -> str | None:
        """`chs_` for "Chat session (id form `chs_*`)": the form of its id, its first field."""
        found = re.search(r"\bform `(\w+_)\*`", self.heading)
        return found.group(1) if found else None


@dataclass(frozen=True)
class Param:
    name: str
    location: str  # path, query, body
    type: str
    required: bool
    minimum: int | None = None
    maximum: int | None = None
    max_length: int | None = None


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    request: str  # the cell as written ("" for operations named elsewhere)
    response: str
    params: tuple[Param, ...] = ()
    statuses: tuple[int, ...] = ()
    inline_fields: tuple[Field, ...] = ()  # a body written in place: `{items: object[], nextCursor: string}`
    resource: str | None = None  # the resource table its success answer is

    @property
    def key(self) -> str:
        return f"{self.method} {template(self.path)}"

    @property
    def success(self) -> tuple[int, ...]:
        return tuple(s for s in self.statuses if s < 400)

    @property
    def errors(self) -> tuple[int, ...]:
        return tuple(s for s in self.statuses if s >= 400)

    @property
    def portrait_errors(self) -> bool:
        return "portrait error shape" in self.response


@dataclass(frozen=True)
class Spec:
    resources: dict[str, Resource]  # the field tables, and the portrait error shape as "Portrait error"
    endpoints: dict[str, Endpoint]  # by key: `GET /v1/orgs/{}`
    codes: dict[str, int]  # the error catalogue: code -> HTTP status
    envelope: tuple[str, ...]  # the error object's keys
    every_answer_headers: tuple[str, ...]


def template(path: str) -> str:
    """A path with its parameters unnamed (`/v1/personas/{}/portrait/{}/edit`): the
    names are documentation, only the shape is on the wire."""
    return re.sub(r"\{[^}]*\}", "{}", path)


def tables(text: str) -> list[tuple[str, list[str], list[list[str]]]]:
    """(nearest heading, header cells, rows) of every markdown table."""
    found: list[tuple[str, list[str], list[list[str]]]] = []
    heading, block = "", []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append(_cells(line))
            continue
        if block:
            if len(block) >= 2 and all(re.fullmatch(r":?-+:?", c) for c in block[1]):
                found.append((heading, block[0], block[2:]))
            block = []
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
    return found


def _cells(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
    return [c.strip().replace("\\|", "|") for c in cells]


def section(text: str, title: str) -> str:
    """The text under a heading (any level) up to the next heading of the same or a higher level."""
    match = re.search(rf"^(#+) {re.escape(title)}\b.*$", text, re.MULTILINE)
    assert match, f"the spec has no section {title!r}"
    level = len(match.group(1))
    end = re.compile(rf"^#{{1,{level}}} ", re.MULTILINE).search(text, match.end())
    return text[match.end():end.start() if end else len(text)]


def _event_types(text: str) -> tuple[str, ...]:
    (rows,) = [rows for _, header, rows in tables(section(text, "Events")) if header[0].lower() == "type"]
    return tuple(row[0].strip("`") for row in rows)


def _resources(text: str) -> dict[str, Resource]:
    event_types = _event_types(text)
    resources = {}
    for heading, header, rows in tables(section(text, "Resources and their fields")):
        assert [h.lower() for h in header] == ["field", "type", "notes"], (heading, header)
        name = re.split(r"\s*[(;]", heading, maxsplit=1)[0].strip()
        all_required = "all fields required" in heading.lower()
        fields = tuple(
            Field(field, kind, notes, True if all_required or re.match(r"Required\b", notes) else None,
                  event_types if re.search(r"\bevent types in Events\b", notes) else ())
            for field, kind, notes in rows
        )
        resources[name] = Resource(name, heading, fields)
    return resources


def _params(request: str) -> tuple[Param, ...]:
    """`Path: `id` string (...). Body: `instruction` string, required, at most 500 characters`."""
    params = []
    for location, clause in re.findall(r"\b(Path|Query|Body): (.*?)(?=\s(?:Path|Query|Body): |$)", request):
        for name, kind, rest in re.findall(r"`(\w+)` (\w+(?:\[\])?)((?:(?!`\w+` \w).)*)", clause):
            bounds = re.search(r"\((\d+) to (\d+)", rest)
            longest = re.search(r"at most (\d+) characters", rest)
            params.append(Param(
                name, location.lower(), kind, location == "Path" or bool(re.search(r"\brequired\b", rest)),
                int(bounds.group(1)) if bounds else None, int(bounds.group(2)) if bounds else None,
                int(longest.group(1)) if longest else None,
            ))
    return tuple(params)


def _inline_fields(response: str) -> tuple[Field, ...]:
    shape = re.search(r"`\{([^}`]*)\}`", response)
    if not shape:
        return ()
    pairs = [part.split(":") for part in shape.group(1).split(",")]
    return tuple(Field(name.strip(), kind.strip(), "", True) for name, kind in pairs)


def _resource_of(response: str, resources: dict[str, Resource]) -> str | None:
    """The resource table a success answer names ("200 chat session", "see Portrait edit result"),
    or whose fields it writes in place (`{items: object[], nextCursor: string}`)."""
    success = re.split(r";", response)[0].lower()
    named = [name for name in resources if re.search(rf"\b{re.escape(name.lower())}\b", success)]
    if named:
        return max(named, key=len)
    inline = [(f.name, f.type) for f in _inline_fields(response)]
    same = [r.name for r in resources.values() if inline and [(f.name, f.type) for f in r.fields] == inline]
    return same[0] if same else None


def _endpoints(text: str, resources: dict[str, Resource]) -> dict[str, Endpoint]:
    endpoints: dict[str, Endpoint] = {}
    body = section(text, "Endpoints")
    for _, header, rows in tables(body):
        assert [h.lower() for h in header] == ["method", "path", "request", "response"], header
        for method, path, request, response in rows:
            endpoint = Endpoint(
                method, path, request, response, _params(request),
                tuple(sorted({int(s) for s in re.findall(r"(?<![\w.])([1-5]\d\d)(?![\w.])", response)})),
                _inline_fields(response), _resource_of(response, resources),
            )
            endpoints[endpoint.key] = endpoint
    # Operations named anywhere else (the "other operations" list, states, rules).
    for method, path in _OPERATION.findall(text):
        named = Endpoint(method, path, "", "")
        endpoints.setdefault(named.key, named)
    return endpoints


def _codes(text: str) -> dict[str, int]:
    errors = section(text, "Errors")
    (catalogue,) = [rows for heading, header, rows in tables(errors) if heading.lower().startswith("code catalog")]
    codes = {code.strip("`"): int(status) for code, status, _ in catalogue}
    declared = re.search(r"Code catalog \((\d+) codes\)", errors)
    assert declared is None or int(declared.group(1)) == len(codes), "the catalogue's count and its rows differ"
    return codes


def _envelope(text: str) -> tuple[str, ...]:
    shape = re.search(r'`\{ "error": \{ ([^`]*) \} \}`', section(text, "Envelope"))
    assert shape, "the spec's error envelope was not found"
    return tuple(re.findall(r'"(\w+)":', shape.group(1)))


def _portrait_error(text: str) -> Resource:
    """"... bodies have `error` as a required string, plus optional `message` string, `used` number, ..."."""
    sentence = re.search(r"^Exception: the portrait edit endpoint.*$", section(text, "Envelope"), re.MULTILINE)
    assert sentence, "the spec's portrait error shape was not found"
    fields = tuple(
        Field(name, kind, "", True if re.match(r"\s*as a required\b|,\s*required\b", between) else None)
        for name, between, kind in re.findall(r"`(\w+)`( as a required)? (\w+(?:\[\])?)", sentence.group(0))
    )
    return Resource("Portrait error", sentence.group(0), fields)


def _every_answer_headers(text: str) -> tuple[str, ...]:
    rule = re.search(r"^\d+\. Every response carries .*$", section(text, "Limits"), re.MULTILINE)
    assert rule, "the spec's rule on headers every answer carries was not found"
    return tuple(h for h in TICKED.findall(rule.group(0)) if re.fullmatch(r"X-[\w-]+", h))


def load(path: pathlib.Path = SPEC) -> Spec:
    assert path.is_file(), f"the spec is not at {path} (CI clones shared/ beside the repository)"
    text = path.read_text()
    resources = _resources(text)
    resources["Portrait error"] = _portrait_error(text)
    return Spec(resources, _endpoints(text, resources), _codes(text), _envelope(text), _every_answer_headers(text))
