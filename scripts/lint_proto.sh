#!/usr/bin/env bash
# Lint the protos with buf (rules in buf.yaml), fully offline, and optionally
# check them for breaking changes against an earlier version.
#
# Usage: scripts/lint_proto.sh                              # buf lint
#        scripts/lint_proto.sh --breaking '.git#branch=main' # lint + buf breaking
#
# buf comes from package.json (`npm ci` first). The google protos we import
# are vendored in third_party/googleapis/, the second module of buf.yaml (the
# well-known types are built into buf): no BSR, no network.
#
# --breaking takes a buf input. A git input (`.git#branch=X`, `#tag=X` or
# `#ref=X`) is exported here with `git archive` and built with today's
# module layout and vendored protos (an older commit may predate them); any
# other input (e.g. the directory of another checkout) is passed to buf as is.
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
      sed -n '2,15p' "$0"
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
      cp -R third_party "$tmp/third_party"
      buf breaking --against "$tmp"
      ;;
    *)
      buf breaking --against "$against"
      ;;
  esac
  echo "buf breaking against $against: ok"
fi
