"""The API reference page, rendered from the OpenAPI document: one
self-contained HTML page (inline styles, no script, nothing fetched)."""

from __future__ import annotations

import html
import json

_STYLE = """body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1a1a1a}
h2{margin-top:2.5rem;border-bottom:1px solid #ddd}code{background:#f4f4f4;padding:0 .2rem;border-radius:3px}
.op{margin:1.2rem 0;padding:.6rem .9rem;border-left:4px solid #6a5acd;background:#fafafa}
.verb{font-weight:700;text-transform:uppercase;margin-right:.5rem}table{border-collapse:collapse;margin:.4rem 0}
td,th{border:1px solid #e2e2e2;padding:.2rem .5rem;text-align:left;font-size:14px}.muted{color:#666}
.example pre{background:#f4f4f4;padding:.5rem;overflow-x:auto;font-size:13px}.example summary{cursor:pointer}"""


# The OpenAPI document (this checkout's gen/openapi.json) as JSON: an object's values stay `object` until read
# through the readers below, which find what OpenAPI says is there or nothing (an empty object, list, text).
JSONObject = dict[str, object]


def _object(value: object) -> JSONObject:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _esc(text: object) -> str:
    return html.escape(str(text))


def _prose(text: str) -> str:
    """A description as paragraphs (the proto comment's blank lines reach OpenAPI as two spaces)."""
    return "".join(f"<p>{_esc(paragraph)}</p>" for paragraph in text.split("  ") if paragraph.strip())


def _type(schema: JSONObject) -> str:
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type(_object(schema.get('items', {})))}"
    if isinstance(kind, list):
        kind = " or ".join(map(str, kind))
    if "enum" in schema:
        enum = _list(schema["enum"])
        return f"{kind}: " + ", ".join(map(str, enum[:12])) + ("…" if len(enum) > 12 else "")
    return str(kind)


def _shared(document: JSONObject, item: JSONObject, section: str) -> JSONObject:
    """A component an operation references (components/<section>), or the item itself."""
    if "$ref" in item:
        return _object(_object(_object(document["components"])[section])[str(item["$ref"]).rsplit("/", 1)[-1]])
    return item


def _headers(document: JSONObject) -> list[str]:
    """The headers every operation shares, described once."""
    components = _object(document["components"])
    parameters = map(_object, _object(components.get("parameters", {})).values())
    rows = [(p["name"], "request", p) for p in parameters if p["in"] == "header"]
    rows += [(name, "response", _object(header)) for name, header in _object(components.get("headers", {})).items()]
    if not rows:
        return []
    return ["<h2 id=headers>Headers</h2><table><tr><th>header</th><th>in</th><th>type</th><th></th></tr>",
            *(f"<tr><td><code>{_esc(name)}</code></td><td>{where}</td><td>{_esc(_type(_object(spec['schema'])))}</td>"
              f"<td>{_esc(spec.get('description', ''))}</td></tr>" for name, where, spec in rows),
            "</table>"]


def _example(title: str, media: JSONObject) -> list[str]:
    if "example" not in media:
        return []
    return [f"<details class=example><summary>{_esc(title)}</summary>"
            f"<pre>{_esc(json.dumps(media['example'], indent=2, ensure_ascii=False))}</pre></details>"]


def render(document: JSONObject) -> str:
    by_tag: dict[str, list[tuple[str, str, JSONObject]]] = {}
    for path, item in _object(document["paths"]).items():
        for verb, found in _object(item).items():
            operation = _object(found)
            by_tag.setdefault(str(_list(operation.get("tags", ["Other"]))[0]), []).append((verb, path, operation))
    # The dashboard's icon, by its plain name (served by the dashboard's assets, revalidated): without one the
    # browser asks for /favicon.ico, which is a 404.
    info = _object(document["info"])
    parts = [f"<!doctype html><html lang=en><meta charset=utf-8><title>{_esc(info['title'])} API"
             "</title><link rel=icon type=image/svg+xml href=/dashboard/assets/favicon.svg>"
             f"<style>{_STYLE}</style><h1>{_esc(info['title'])} API "
             f"<span class=muted>{_esc(info['version'])}</span></h1>",
             "<p>The machine-readable contract: <a href=/v1/openapi.json><code>/v1/openapi.json</code></a> "
             "(OpenAPI 3.1). Authenticate with <code>Authorization: Bearer &lt;API key&gt;</code>. Errors answer "
             "<code>{\"error\": {\"code\", \"message\", \"details\"}}</code>.</p><nav><ul>"]
    parts += [f"<li><a href='#{_esc(tag)}'>{_esc(tag)}</a></li>" for tag in sorted(by_tag)]
    parts.append("</ul></nav>")
    parts += _headers(document)
    # What a resource's operations share (states, limits, events): the tag's description.
    about = {tag["name"]: _text(tag.get("description", "")) for tag in map(_object, _list(document.get("tags", [])))}
    for tag in sorted(by_tag):
        parts.append(f"<h2 id='{_esc(tag)}'>{_esc(tag)}</h2>")
        parts.append(_prose(about.get(tag, "")))
        for verb, path, operation in by_tag[tag]:
            parts.append(f"<div class=op><div><span class=verb>{_esc(verb)}</span><code>{_esc(path)}</code></div>"
                         f"{_prose(_text(operation.get('description', '')))}")
            parameters = [_shared(document, _object(p), "parameters") for p in _list(operation.get("parameters", []))]
            if parameters:
                parts.append("<table><tr><th>parameter</th><th>in</th><th>type</th></tr>")
                parts += [f"<tr><td><code>{_esc(p['name'])}</code></td><td>{_esc(p['in'])}</td>"
                          f"<td>{_esc(_type(_object(p['schema'])))}</td></tr>" for p in parameters]
                parts.append("</table>")
            body = _object(_object(operation.get("requestBody", {})).get("content", {}))
            for media, spec in ((media, _object(spec)) for media, spec in body.items()):
                parts.append(f"<div>body <code>{_esc(media)}</code>: {_esc(_type(_object(spec.get('schema', {}))))}"
                             "</div>")
                parts += _example("example request", spec)
            responses = _object(operation["responses"])
            answers = [status for status in responses if status < "400"]
            for status in answers:
                for spec in map(_object, _object(_object(responses[status]).get("content", {})).values()):
                    parts += _example(f"example answer ({status})", spec)
            parts.append(f"<div class=muted>answers {_esc(', '.join(answers))}; errors in the catalogue</div></div>")
    parts.append(f"<h2>Schemas</h2><pre>{_esc(json.dumps(_object(document['components'])['schemas'], indent=1))[:400000]}"
                 "</pre></html>")
    return "".join(parts)
