"""The Python SDK as a user gets it: the wheel built from sdk/python, installed into a clean
virtual environment, and every ```python example of sdk/python/README.md run there against
the real stack through Envoy, and type-checked with `mypy --strict` against the installed
package (its py.typed).

The environment is made with `venv` (no system site-packages) and the wheel is installed into
it offline with `--no-deps`. Its dependencies are the project's own copies: a .pth line adds
.venv's site-packages after the environment's own (that folder's .pth files, the editable
install of sdk/python among them, are not read from there), and the test proves that
`persona_sdk` is imported from the wheel and that importing it loads nothing outside the
closure of the wheel's declared requirements."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk" / "python"
README = SDK / "README.md"

# Run inside the clean environment: where persona_sdk comes from, the wheel's requirements, and
# the distributions whose modules importing it loaded from outside the environment.
PROBE = """
import json, sys, importlib.metadata as md, re
before = set(sys.modules)
import persona_sdk, persona_sdk.types, persona_sdk.resources
def closure(name, seen):
    key = re.sub(r"[-_.]+", "-", name).lower()
    if key in seen:
        return seen
    seen.add(key)
    try:
        requirements = md.requires(name) or []
    except md.PackageNotFoundError:  # a requirement for other Pythons (its marker): not installed, never used
        return seen
    for requirement in requirements:  # extras too: httpx imports its CLI's packages when they are there
        closure(re.split(r"[ ;<>=!~\\[(]", requirement, maxsplit=1)[0], seen)
    return seen
owners = md.packages_distributions()
loaded = {m.split(".")[0] for m in set(sys.modules) - before}
used = {re.sub(r"[-_.]+", "-", d).lower() for m in loaded for d in owners.get(m, [])
        if getattr(sys.modules.get(m), "__file__", None) and not sys.modules[m].__file__.startswith(sys.prefix)}
print(json.dumps({"file": persona_sdk.__file__, "prefix": sys.prefix, "version": persona_sdk.__version__,
                  "requires": md.requires("persona-sdk"), "allowed": sorted(closure("persona-sdk", set())),
                  "used": sorted(used)}))
"""


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 120,
        ) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert result.returncode == 0, f"{' '.join(args)}\n{result.stdout[-5000:]}\n{result.stderr[-5000:]}"
    return result


def readme_examples() -> list[str]:
    """Every ```python block but the webhook receiver's, which serves until stopped
    (tests/examples runs it, as examples/python/webhook_receiver.py, the same text)."""
    text = README.read_text(encoding="utf-8")
    receiver = text.index("\n### A webhook receiver\n")
    text = text[:receiver] + text[text.index("\n## ", receiver):]
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


@pytest.fixture(scope="module")
def environment(tmp_path_factory) -> Path:
    """A clean virtual environment with the SDK's wheel installed; its python."""
    work = tmp_path_factory.mktemp("persona-sdk-wheel")
    # Built from a copy: the build writes build/ and egg-info next to its sources.
    source = work / "source"
    shutil.copytree(SDK, source, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"))
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--wheel-dir", str(work / "dist"), str(source)], cwd=work, env=clean_env())
    wheels = list((work / "dist").glob("persona_sdk-*.whl"))
    assert len(wheels) == 1, wheels
    venv = work / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=work)
    python = venv / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index",
         str(wheels[0])], cwd=work, env=clean_env())
    site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=work).stdout.strip()
    Path(site, "project-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return python


def clean_env(**extra: str) -> dict[str, str]:
    # Coverage's variables too: these processes run the SDK, mypy and pip, not the service (`make test` measures).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PERSONA_", "VIRTUAL_ENV", "COVERAGE_"))}
    return {**env, **extra}


def test_the_wheel_installs_self_contained(environment, tmp_path):
    probe = json.loads(run([str(environment), "-c", PROBE], cwd=tmp_path, env=clean_env()).stdout)
    venv = str(environment.parent.parent)
    assert probe["prefix"] == venv and probe["file"].startswith(venv), probe  # the wheel's copy, not the checkout's
    assert any(r.startswith("httpx") for r in probe["requires"]) and any(r.startswith("pydantic") for r in
                                                                          probe["requires"])
    assert set(probe["used"]) <= set(probe["allowed"]), probe  # nothing it imports is undeclared
    assert {"httpx", "pydantic"} <= set(probe["used"])
    installed = Path(probe["file"]).parent
    assert (installed / "py.typed").exists() and (installed / "types" / "personas.py").exists()
    assert not (installed / "_generated.py").exists()


def test_readme_examples_run_against_the_stack_and_pass_mypy_strict(environment, stack, tenants, tmp_path):
    examples = readme_examples()
    assert len(examples) >= 5 and "PersonaClient()" in examples[0] and "AsyncPersonaClient" in examples[1]
    # docs/sdks.md's Python quick start is the SDK's, so it is run here too.
    top = (ROOT / "docs" / "sdks.md").read_text(encoding="utf-8").split("### Python quick start", 1)[1]
    assert re.findall(r"^```python\n(.*?)^```", top, flags=re.S | re.M)[0] == examples[0]
    for n, code in enumerate(examples):
        (tmp_path / f"example_{n}.py").write_text(code, encoding="utf-8")
    # mypy runs beside the examples: the user's view, the installed package's types only.
    (tmp_path / "mypy.ini").write_text("[mypy]\nstrict = True\n")
    mypy = subprocess.Popen([str(ROOT / ".venv" / "bin" / "mypy"), "--python-executable", str(environment),
                             "--cache-dir", str(tmp_path / ".mypy_cache"), "--config-file", "mypy.ini",
                             *[f"example_{n}.py" for n in range(len(examples))]],
                            cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        tenant = tenants(plan="pro")
        env = clean_env(PERSONA_API_KEY=tenant.api_key, PERSONA_BASE_URL=stack.http_url)
        for n in range(len(examples)):
            ran = run([str(environment), f"example_{n}.py"], cwd=tmp_path, env=env, timeout=90)
            assert ran.stdout.strip() or "Client(" not in examples[n], f"example {n} printed nothing"
        checked, _ = mypy.communicate(timeout=180)
    finally:
        if mypy.poll() is None:
            mypy.kill()
            mypy.communicate()
    assert mypy.returncode == 0, checked
    assert "Success: no issues found" in checked
