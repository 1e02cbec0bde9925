"""The console's files, read once from static/ and named by content hash:
relative module imports (`from "./api.js"`, `from "./sdk/index.js"`) are
rewritten to the hashed names, so a module's hash covers what it imports and a
changed file gets new URLs all the way up to the page, which is never cached
without revalidation. favicon.svg is the icon of the page and of /docs (which
links it by its plain name). static/sdk/ is the TypeScript SDK's build
(scripts/gen_dashboard_sdk.py); every asset is served flat under PREFIX, a
file of a folder as `<folder>-<name>` (`sdk-index.<hash>.js`)."""

from __future__ import annotations

import hashlib
import pathlib
import posixpath
import re
from dataclasses import dataclass
from functools import cache

STATIC = pathlib.Path(__file__).resolve().parent / "static"
PAGE = "index.html"
TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
PREFIX = "/dashboard/assets/"
# `from "./x.js"`, `import "./x.js"`, `import("./x.js")`, `./sdk/x.js`: the only imports the modules use.
_IMPORT = re.compile(r"""(\bfrom\s*|\bimport\s*\(?\s*)(["'])\./([\w./-]+)\2""")
# `{{asset:app.js}}` in the page.
_PLACEHOLDER = re.compile(r"\{\{asset:([\w.-]+)\}\}")


@dataclass(frozen=True)
class Asset:
    name: str
    hashed: str
    content_type: str
    data: bytes
    etag: str


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


class Bundle:
    def __init__(self, root: pathlib.Path = STATIC):
        self.sources = {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*"))
                        if p.suffix in TYPES}
        self.assets: dict[str, Asset] = {}
        for name in self.sources:
            self._build(name, ())
        self.by_name = {**{a.hashed: a for a in self.assets.values()}, **{a.name: a for a in self.assets.values()}}
        if len(self.by_name) != 2 * len(self.assets):
            raise RuntimeError(f"two dashboard files are served under one name: {sorted(self.assets)}")
        page = _PLACEHOLDER.sub(lambda m: PREFIX + self.assets[m.group(1)].hashed, (root / PAGE).read_text()).encode()
        self.page = Asset(PAGE, PAGE, "text/html; charset=utf-8", page, f'"{_digest(page)}"')

    def _build(self, name: str, chain: tuple[str, ...]) -> Asset:
        if name in self.assets:
            return self.assets[name]
        if name in chain:
            raise RuntimeError(f"dashboard modules import each other in a cycle: {' -> '.join((*chain, name))}")
        if name not in self.sources:
            raise RuntimeError(f"dashboard module {chain[-1]} imports {name}, which is not in {STATIC}")

        def hashed_import(match: re.Match[str]) -> str:
            target = self._build(posixpath.normpath(posixpath.join(posixpath.dirname(name), match.group(3))),
                                 (*chain, name))
            return f"{match.group(1)}{match.group(2)}./{target.hashed}{match.group(2)}"

        data = _IMPORT.sub(hashed_import, self.sources[name]).encode()
        digest = _digest(data)
        stem, suffix = name.replace("/", "-").rsplit(".", 1)
        asset = Asset(stem + "." + suffix, f"{stem}.{digest}.{suffix}", TYPES["." + suffix], data, f'"{digest}"')
        self.assets[name] = asset
        return asset

    def find(self, name: str) -> Asset | None:
        return self.by_name.get(name)


@cache
def bundle() -> Bundle:
    return Bundle()
