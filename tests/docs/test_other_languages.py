"""The other-language recipe (docs/sdks.md: Clients in other languages): proto/ with the vendored
google protos generates a TypeScript client with buf and protoc-gen-es, which type-checks."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = ROOT / "node_modules" / ".bin"

TEMPLATE = """version: v2
inputs:
  - directory: proto
plugins:
  - local: {plugin}
    out: {out}
    opt: target=ts
    include_imports: true
"""


def test_buf_generates_typescript_that_type_checks():
    # Under the repository (gitignored .build/) so that tsc finds @bufbuild/protobuf in node_modules.
    work = ROOT / ".build" / f"other-languages-{uuid.uuid4().hex[:8]}"
    out = work / "ts"
    work.mkdir(parents=True)
    try:
        template = work / "buf.gen.yaml"
        template.write_text(TEMPLATE.format(plugin=BIN / "protoc-gen-es", out=out))
        made = subprocess.run([str(BIN / "buf"), "generate", "--template", str(template)], cwd=ROOT,
                              capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
        generated = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.ts"))
        ours = [p.relative_to(ROOT / "proto").with_name(p.stem + "_pb.ts").as_posix()
                for p in (ROOT / "proto").rglob("*.proto")]
        assert set(ours) <= set(generated), set(ours) - set(generated)
        assert "google/api/annotations_pb.ts" in generated  # the vendored imports, generated beside ours

        checked = subprocess.run(
            [str(BIN / "tsc"), "--noEmit", "--strict", "--target", "es2022", "--module", "nodenext",
             "--moduleResolution", "nodenext", "--skipLibCheck", *[str(out / g) for g in generated]],
            cwd=ROOT, capture_output=True, text=True,
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
    finally:
        shutil.rmtree(work, ignore_errors=True)
