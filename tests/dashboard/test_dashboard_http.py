"""The console's files through Envoy (mirrors DashboardServicer): the page
is HTML with a same-origin Content-Security-Policy and revalidated caching;
every asset it loads, and every module those import, is served by its
content-hashed name with its content type and immutable caching; ETags
answer 304; the page and /docs link the console's icon (no /favicon.ico
404); unknown assets are 404 in the envelope; no credential is needed
and nothing is fetched from elsewhere."""

from __future__ import annotations

import re

from persona_service.dashboard.assets import Bundle
from support import assert_envelope

HASHED = re.compile(r"/dashboard/assets/([\w-]+)\.([0-9a-f]{16})\.(js|css|svg)")
IMPORT = re.compile(r"""from\s*["']\./([^"']+)["']""")
# The href of a page's <link rel=icon>.
ICON = re.compile(r"""<link rel=["']?icon["']?[^>]*?\shref=["']?([^"'\s>]+)""")
# An import, a dynamic import, a stylesheet url() or a fetch of another origin.
ELSEWHERE = re.compile(r"""(from\s*|import\(\s*|url\(\s*|fetch\(\s*)["']?(https?:)?//""")


def test_the_page_is_html_under_a_same_origin_policy(http):
    r = http.get("/dashboard")  # no credential
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    csp = r.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "'unsafe-inline'" not in csp and "'unsafe-eval'" not in csp
    assert r.headers["cache-control"] == "no-cache" and re.fullmatch(r'"[0-9a-f]{16}"', r.headers["etag"])
    assert r.headers["x-content-type-options"] == "nosniff"
    assert "set-cookie" not in r.headers and "x-request-id" in r.headers
    page = r.text
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page), "the page loads nothing from elsewhere"
    assert "<script>" not in page and "style=" not in page, "no inline script or style (the CSP forbids them)"
    assert {m.group(3) for m in HASHED.finditer(page)} == {"js", "css", "svg"}

    head = http.head("/dashboard")
    assert head.status_code == 200 and head.content == b"" and head.headers["etag"] == r.headers["etag"]
    again = http.get("/dashboard", headers={"If-None-Match": r.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == r.headers["etag"] and again.headers["cache-control"] == "no-cache"


def _fetch_modules(http) -> dict[str, str]:
    """Every asset reachable from the page: its stylesheet, its icon and the module graph."""
    page = http.get("/dashboard").text
    todo = [m.group(0) for m in HASHED.finditer(page)]
    seen: dict[str, str] = {}
    while todo:
        url = todo.pop()
        if url in seen:
            continue
        r = http.get(url)
        assert r.status_code == 200, (url, r.text)
        seen[url] = r.text
        todo += [f"/dashboard/assets/{name}" for name in IMPORT.findall(r.text)]
    return seen


def test_assets_are_named_by_content_hash_and_cached_for_good(http):
    assets = _fetch_modules(http)
    on_disk = Bundle().assets
    # Every file of static/ (static/sdk/ too, as `sdk-<name>`) is reachable, and only by hashed names.
    assert {HASHED.search(url).group(1) for url in assets} == {a.name.rsplit(".", 1)[0] for a in on_disk.values()}
    # The console calls the API through the TypeScript SDK's build, not code of its own.
    (api,) = (body for url, body in assets.items() if "/api." in url)
    assert re.search(r'from "\./sdk-index\.[0-9a-f]{16}\.js"', api) and "getReader(" not in api and "randomUUID" not in api
    for url, body in assets.items():
        r = http.get(url)
        kind = HASHED.search(url).group(3)
        assert r.headers["content-type"] == {"js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8",
                                             "svg": "image/svg+xml"}[kind]
        assert r.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert r.headers["etag"] == f'"{HASHED.search(url).group(2)}"'
        assert not ELSEWHERE.search(body), f"{url} loads something from elsewhere"
        # The plain name serves the same bytes, revalidated on every use.
        plain = http.get(url.replace(f".{HASHED.search(url).group(2)}", ""))
        assert plain.status_code == 200 and plain.content == r.content
        assert plain.headers["cache-control"] == "no-cache" and plain.headers["etag"] == r.headers["etag"]
        cached = http.get(url, headers={"If-None-Match": r.headers["etag"]})
        assert cached.status_code == 304 and cached.content == b""


def test_the_page_and_the_api_reference_link_an_icon_that_is_served(http):
    """Without a <link rel=icon> a browser asks for /favicon.ico, which is a 404."""
    for path in ("/dashboard", "/docs"):
        links = ICON.findall(http.get(path).text)
        assert len(links) == 1, (path, links)
        icon = http.get(links[0])
        assert icon.status_code == 200, (path, links[0])
        assert icon.headers["content-type"] == "image/svg+xml" and icon.content.startswith(b"<svg ")
        assert icon.headers["x-content-type-options"] == "nosniff"


def test_a_changed_import_changes_every_hash_up_to_the_page(tmp_path):
    for name, text in {"index.html": "<script src='{{asset:a.js}}'></script>", "a.js": 'import { b } from "./b.js";\n',
                       "b.js": "export const b = 1;\n"}.items():
        (tmp_path / name).write_text(text)
    before = Bundle(tmp_path)
    (tmp_path / "b.js").write_text("export const b = 2;\n")
    after = Bundle(tmp_path)
    assert before.assets["a.js"].data.decode().startswith('import { b } from "./b.')
    assert all(before.assets[n].hashed != after.assets[n].hashed for n in ("a.js", "b.js"))
    assert before.page.data != after.page.data and after.assets["a.js"].hashed in after.page.data.decode()


def test_unknown_assets_are_not_found(http):
    for name in ("nope.js", "app.0000000000000000.js", "index.html", "..%2Fservicer.py", "style.css.map"):
        assert_envelope(http.get(f"/dashboard/assets/{name}"), 404, "not_found")
    assert http.get("/dashboard/assets/").status_code in (400, 404)
