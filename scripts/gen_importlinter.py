"""Write the generated lists of .importlinter's contracts, so that adding a domain takes its folder
and one registry line, and a new kernel module is behind the door at once (`make gen`;
tests/test_architecture.py checks it): the domains (from the registry) in the layers, independence
and kernel-door contracts, and the kernel's modules but its door (from its folder) in the kernel-door
contract.

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
# The kernel-door contract: the domains may import, of the kernel, only its door (kernel/api.py).
DOOR_SOURCES = re.compile(r"^(source_modules =\n    # domains \(generated\)\n)(?:    persona_service\.\w+\n)+", re.M)
BEHIND_DOOR = re.compile(r"^(forbidden_modules =\n    # the kernel but its door \(generated\)\n)"
                         r"(?:    persona_service\.kernel\.\w+\n)+", re.M)
DOOR = "api"


def domains() -> list[str]:
    """The registry's domains (modules PERSONA_EXTRA_MODULES adds live outside the package)."""
    return sorted(m.name for m in MODULES.all if (PACKAGE / m.name / "__init__.py").exists())


def behind_the_door() -> list[str]:
    """The kernel's modules and packages (a package stands for everything in it), its door excepted."""
    kernel = PACKAGE / "kernel"
    return sorted(p.stem for p in kernel.iterdir() if p.suffix == ".py" and p.stem not in ("__init__", DOOR)) \
        + sorted(p.name for p in kernel.iterdir() if (p / "__init__.py").exists())


def generate(text: str) -> str:
    names = [f"persona_service.{name}" for name in domains()]
    listed = "".join(f"    {n}\n" for n in names)
    text, layers = LAYER.subn(lambda m: m.group(1) + "    " + " : ".join(names), text)
    text, independent = INDEPENDENT.subn(lambda m: m.group(1) + listed, text)
    text, sources = DOOR_SOURCES.subn(lambda m: m.group(1) + listed, text)
    kernel = "".join(f"    persona_service.kernel.{name}\n" for name in behind_the_door())
    text, behind = BEHIND_DOOR.subn(lambda m: m.group(1) + kernel, text)
    if (layers, independent, sources, behind) != (1, 1, 1, 1):
        raise SystemExit("gen_importlinter: .importlinter lost a `# ... (generated)` marker")
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = CONTRACTS.read_text()
    wanted = generate(text)
    if args.check:
        if wanted != text:
            print(".importlinter's generated lists differ from the registry or the kernel's modules: run `make gen`",
                  file=sys.stderr)
            return 1
        return 0
    CONTRACTS.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
