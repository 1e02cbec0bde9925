"""Generate gen/ from proto/: Python messages, stubs and type hints (mypy-protobuf's,
for messages and services), the
descriptor set Envoy's transcoder and the server's policy lookup read, and
the OpenAPI document of the HTTP/JSON edge (scripts/gen_openapi.py).

Run: python scripts/gen_proto.py           (writes gen/)
     python scripts/gen_proto.py --check   (fails if gen/ differs from proto/)

The output depends only on proto/, the vendored google protos in
third_party/googleapis/, the pinned grpcio-tools (which ships the
well-known types) and the pinned mypy-protobuf, never on the network.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

from grpc_tools import protoc

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTO = ROOT / "proto"
GEN = ROOT / "gen"
# google/api and google/rpc, vendored (third_party/googleapis/README.md).
GOOGLEAPIS = ROOT / "third_party" / "googleapis"
WELL_KNOWN = pathlib.Path(protoc.__file__).resolve().parent / "_proto"
# mypy-protobuf's protoc plugins, installed beside this interpreter (the dev extras).
PLUGINS = pathlib.Path(sys.executable).parent


def generate(out: pathlib.Path) -> None:
    py_out = out / "python"
    py_out.mkdir(parents=True, exist_ok=True)
    sources = sorted(str(p.relative_to(PROTO)) for p in PROTO.rglob("*.proto"))
    args = [
        "protoc",
        f"-I{PROTO}",
        f"-I{GOOGLEAPIS}",
        f"-I{WELL_KNOWN}",
        f"--python_out={py_out}",
        f"--grpc_python_out={py_out}",
        f"--plugin=protoc-gen-mypy={PLUGINS / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={PLUGINS / 'protoc-gen-mypy_grpc'}",
        f"--mypy_out=quiet:{py_out}",
        f"--mypy_grpc_out=quiet:{py_out}",
        "--include_imports",
        f"--descriptor_set_out={out / 'descriptor.binpb'}",
        *sources,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    openapi(sources, out)


def openapi(sources: list[str], out: pathlib.Path) -> None:
    """gen/openapi.json, from a descriptor set with the comments (scripts/gen_openapi.py),
    read by the Python code just generated."""
    with tempfile.TemporaryDirectory() as tmp:
        described = pathlib.Path(tmp) / "described.binpb"
        args = ["protoc", f"-I{PROTO}", f"-I{GOOGLEAPIS}", f"-I{WELL_KNOWN}", "--include_imports",
                "--include_source_info", f"--descriptor_set_out={described}", *sources]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(out / "python"), os.environ.get("PYTHONPATH", "")])}
        subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_openapi.py"), str(described),
                        str(out / "openapi.json")], check=True, env=env)


def differences(a: pathlib.Path, b: pathlib.Path) -> list[str]:
    files_a = {p.relative_to(a) for p in a.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    files_b = {p.relative_to(b) for p in b.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    diff = [f"only in one: {p}" for p in sorted(files_a ^ files_b)]
    for rel in sorted(files_a & files_b):
        if not filecmp.cmp(a / rel, b / rel, shallow=False):
            diff.append(f"differs: {rel}")
    return diff


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if gen/ is stale")
    check = parser.parse_args().check
    with tempfile.TemporaryDirectory() as tmp:
        fresh = pathlib.Path(tmp) / "gen"
        generate(fresh)
        if check:
            diff = differences(fresh, GEN)
            if diff:
                print("gen/ is stale; run: python scripts/gen_proto.py", *diff, sep="\n  ", file=sys.stderr)
                raise SystemExit(1)
            print("gen/ matches proto/")
            return
        shutil.rmtree(GEN, ignore_errors=True)
        shutil.copytree(fresh, GEN)
        print(f"wrote {GEN.relative_to(ROOT)}/")


if __name__ == "__main__":
    main()
