"""The TypeScript SDK as its users get it: `npm pack` builds the artifact (the
package's `prepack` runs tsc), a clean project outside the repository installs
the tarball offline (no runtime dependencies), and the README's quick start, as
a user would paste it, compiles under `tsc --strict` (with no `!` non-null
assertions) and runs with node against the real stack through Envoy; the same
package loads with `require()` from CommonJS. docs/sdks.md shows the
same quick start. TypeScript and @types/node are the repository's (root
package.json)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk" / "typescript"
TSC = ROOT / "node_modules" / ".bin" / "tsc"
NODE = shutil.which("node") or "node"
NPM = shutil.which("npm") or "npm"
# A `!` that asserts non-null: after a name, `)` or `]`, before `.`, `)`, `]`, `,`, `;` or a space.
NON_NULL = re.compile(r"[\w)\]]!(?=[.)\],;\s])")


def readme_tsconfig() -> dict:
    """The quick start's tsconfig.json, as the SDK README shows it (strict TypeScript for current Node, ES modules)."""
    text = (SDK / "README.md").read_text(encoding="utf-8").split("\n## Quick start\n", 1)[1]
    match = re.search(r"^```json\n(.*?)^```", text, re.M | re.S)
    assert match, "the SDK README's quick start shows no tsconfig.json"
    return json.loads(match.group(1))


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 120) -> str:
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert result.returncode == 0, f"{' '.join(args)}: exit {result.returncode}\n{result.stdout[-5000:]}\n{result.stderr[-5000:]}"
    return result.stdout


def quick_start(readme: Path) -> str:
    """The first ```ts block after the heading `## Quick start` (or `### TypeScript` in docs/sdks.md)."""
    text = readme.read_text(encoding="utf-8")
    match = re.search(r"^#+ (?:Quick start|TypeScript)\b.*?^```ts\n(.*?)^```", text, re.M | re.S)
    assert match, f"{readme} has no TypeScript quick start"
    return match.group(1)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A clean project with the packed SDK installed from its tarball, offline."""
    packs = tmp_path_factory.mktemp("sdk-ts-pack")
    out = run([NPM, "pack", "--pack-destination", str(packs), "--json"], cwd=SDK, timeout=180)
    (tarball,) = (packs / entry["filename"] for entry in json.loads(out[out.index("["):]))
    files = {f["path"] for f in json.loads(out[out.index("["):])[0]["files"]}
    assert {"dist/index.js", "dist/index.d.ts", "dist/webhooks.js", "package.json"} <= files, files
    assert not any(f.startswith(("src/", "test")) for f in files), files
    home = tmp_path_factory.mktemp("sdk-ts-user")
    (home / "package.json").write_text(json.dumps({"name": "user", "private": True, "type": "module"}))
    run([NPM, "install", "--offline", "--no-audit", "--no-fund", str(tarball)], cwd=home)
    installed = json.loads((home / "node_modules" / "@persona-service" / "sdk" / "package.json").read_text())
    assert not installed.get("dependencies"), "the SDK has no runtime dependencies"
    config = readme_tsconfig()
    assert config["compilerOptions"]["strict"] is True
    # Offline, @types/node is the repository's (a user's project installs its own, as the README says).
    config["compilerOptions"]["typeRoots"] = [str(ROOT / "node_modules" / "@types")]
    (home / "tsconfig.json").write_text(json.dumps(config))
    return home


def test_the_readmes_show_one_quick_start_a_strict_user_compiles_and_runs(project, stack, tenants):
    code = quick_start(SDK / "README.md")
    assert code == quick_start(ROOT / "docs" / "sdks.md"), "docs/sdks.md shows the SDK README's quick start"
    assert not NON_NULL.search(code), f"a non-null assertion: {NON_NULL.search(code)}"
    (project / "quickstart.ts").write_text(code)
    run([str(TSC), "-p", "."], cwd=project)
    env = {**os.environ, "PERSONA_API_KEY": tenants().api_key, "PERSONA_BASE_URL": stack.http_url}
    out = run([NODE, "out/quickstart.js"], cwd=project, env=env)
    assert "persona.created" in out and "validation_failed" in out, out


def test_commonjs_code_requires_the_package(project):
    (project / "load.cjs").write_text(
        'const sdk = require("@persona-service/sdk");\n'
        'const { verifyWebhook } = require("@persona-service/sdk/webhooks");\n'
        'console.log(typeof sdk.PersonaClient, typeof verifyWebhook, new sdk.PersonaClient({}).baseUrl);\n')
    assert run([NODE, "load.cjs"], cwd=project).split() == ["function", "function", "http://127.0.0.1:8080"]
