"""Write the domain lists of .importlinter's contracts from the registry, so that adding a
domain takes its folder and one registry line (`make gen`; tests/test_architecture.py checks it).

    python scripts/gen_importlinter.py           (rewrites the lists in .importlinter)
    python scripts/gen_importlinter.py --check   (exit 1 when they differ from the registry)
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys

from persona_service.registry import MODULES

REPO = pathlib.Path(__file__).resolve().parents[1]
CONTRACTS = REPO / ".importlinter"
PACKAGE = REPO / "server" / "persona_service"
# The layers contract's domain layer, and the independence contract's module list.
LAYER = re.compile(r"^(    # domains \(generated\)\n)    persona_service\.\w+(?: : persona_service\.\w+)+$", re.M)
INDEPENDENT = re.compile(r"^(modules =\n    # domains \(generated\)\n)(?:    persona_service\.\w+\n)+", re.M)


def domains() -> list[str]:
    """The registry's domains (modules PERSONA_EXTRA_MODULES adds live outside the package)."""
    return sorted(m.name for m in MODULES.all if (PACKAGE / m.name / "__init__.py").exists())


def generate(text: str) -> str:
    names = [f"persona_service.{name}" for name in domains()]
    text, layers = LAYER.subn(lambda m: m.group(1) + "    " + " : ".join(names), text)
    text, independent = INDEPENDENT.subn(lambda m: m.group(1) + "".join(f"    {n}\n" for n in names), text)
    if (layers, independent) != (1, 1):
        raise SystemExit("gen_importlinter: .importlinter lost its `# domains (generated)` markers")
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = CONTRACTS.read_text()
    wanted = generate(text)
    if args.check:
        if wanted != text:
            print(".importlinter's domain lists differ from the registry: run `make gen`", file=sys.stderr)
            return 1
        return 0
    CONTRACTS.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
