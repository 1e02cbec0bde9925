#!/usr/bin/env bash
# Lint the protos with buf (rules in buf.yaml), fully offline, and optionally
# check them for breaking changes against an earlier version.
#
# Usage: scripts/lint_proto.sh                              # buf lint
#        scripts/lint_proto.sh --breaking '.git#branch=main' # lint + buf breaking
#
# buf comes from package.json (`npm ci` first). The google protos we import
# are copied from the installed Python packages (googleapis-common-protos for
# google/api and google/rpc, grpcio-tools for google/protobuf) into the
# gitignored .build/third_party/, the second module of buf.yaml: no BSR, no
# network.
#
# --breaking takes a buf input. A git input (`.git#branch=X`, `#tag=X` or
# `#ref=X`) is exported here with `git archive` and built together with
# .build/third_party/ (which a git checkout lacks, being gitignored); any
# other input (e.g. the directory of another checkout that has run this
# script, so it holds .build/third_party/) is passed to buf as is.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

against=""
while [ $# -gt 0 ]; do
  case "$1" in
    --breaking)
      [ $# -ge 2 ] || { echo "usage: $0 [--breaking AGAINST]" >&2; exit 2; }
      against="$2"
      shift 2
      ;;
    --breaking=*)
      against="${1#--breaking=}"
      shift
      ;;
    -h | --help)
      sed -n '2,18p' "$0"
      exit 0
      ;;
    *)
      echo "usage: $0 [--breaking AGAINST]" >&2
      exit 2
      ;;
  esac
done

if [ ! -x "$ROOT/node_modules/.bin/buf" ]; then
  echo "buf is not installed: run 'npm ci' in $ROOT first" >&2
  exit 1
fi
# The pinned buf from node_modules (what `npx --no -- buf` runs), called
# directly so it also works from the temporary directory below and can
# never fall back to downloading a package.
buf() { "$ROOT/node_modules/.bin/buf" "$@"; }

PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3

# Copy the google protos that proto/ imports (transitively) into
# .build/third_party/, from the same packages scripts/gen_proto.py uses.
THIRD_PARTY="$ROOT/.build/third_party"
rm -rf "$THIRD_PARTY"
mkdir -p "$THIRD_PARTY"
"$PYTHON" - "$ROOT/proto" "$THIRD_PARTY" <<'PY'
import pathlib, re, shutil, sys

from google.api import annotations_pb2
from grpc_tools import protoc

proto, out = map(pathlib.Path, sys.argv[1:])
roots = [
    pathlib.Path(annotations_pb2.__file__).resolve().parent.parent.parent,
    pathlib.Path(protoc.__file__).resolve().parent / "_proto",
]
imports = re.compile(r'^\s*import\s+(?:public\s+|weak\s+)?"([^"]+)"\s*;', re.M)

def deps(path):
    return imports.findall(path.read_text(encoding="utf-8"))

todo = [d for p in sorted(proto.rglob("*.proto")) for d in deps(p)]
done = set()
while todo:
    name = todo.pop()
    if name in done or (proto / name).is_file():
        continue
    done.add(name)
    src = next((r / name for r in roots if (r / name).is_file()), None)
    if src is None:
        sys.exit(f"lint_proto: import {name!r} not found in {[str(r) for r in roots]}")
    dst = out / name
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    todo.extend(deps(src))
PY

buf lint
echo "buf lint: ok"

if [ -n "$against" ]; then
  case "$against" in
    *.git#* | .git)
      repo="${against%%#*}"
      ref=""
      if [ "$against" != "$repo" ]; then
        IFS=',' read -r -a opts <<<"${against#*#}"
        for opt in "${opts[@]}"; do
          case "$opt" in
            branch=* | tag=* | ref=*) ref="${opt#*=}" ;;
            *) echo "lint_proto: unsupported git input option '$opt'" >&2; exit 2 ;;
          esac
        done
      fi
      ref="${ref:-HEAD}"
      tmp="$(mktemp -d)"
      trap 'rm -rf "$tmp"' EXIT
      git --git-dir="$repo" archive --format=tar "$ref" -- proto | tar -x -C "$tmp"
      # The old protos, with today's module layout (buf.yaml) and imports.
      cp buf.yaml "$tmp/buf.yaml"
      mkdir -p "$tmp/.build"
      cp -R "$THIRD_PARTY" "$tmp/.build/third_party"
      buf breaking --against "$tmp"
      ;;
    *)
      buf breaking --against "$against"
      ;;
  esac
  echo "buf breaking against $against: ok"
fi
