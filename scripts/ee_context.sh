#!/usr/bin/env bash
# Builds the execution environment's build context, with no container engine:
#   1. the collection tarball, `ansible-galaxy collection build` of the files git would commit
#      (galaxy.yml's build_ignore leaves the tests, lab, Molecule, benchmarks and scripts out),
#      into .build/ee/gpuvirt-tenancy.tar.gz;
#   2. `ansible-builder create` from execution-environment.yml into the context directory.
# Then `docker build`/`podman build` that directory, or run `ansible-builder build` instead.
#   scripts/ee_context.sh [CONTEXT_DIR]      (default .build/ee/context)
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONTEXT="${1:-$REPO_ROOT/.build/ee/context}"
command -v ansible-builder >/dev/null || { echo "ee_context: ansible-builder not found: source scripts/env.sh (requirements.txt pins it)" >&2; exit 2; }

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
# Only the files git would commit (tracked plus untracked-not-ignored), as a release would hold.
(cd "$REPO_ROOT" && git ls-files -co --exclude-standard) >"$stage/files"
rsync -a --files-from="$stage/files" "$REPO_ROOT/" "$stage/src/"
ansible-galaxy collection build "$stage/src" --output-path "$stage/out" >/dev/null
mkdir -p "$REPO_ROOT/.build/ee"
cp "$stage"/out/gpuvirt-tenancy-*.tar.gz "$REPO_ROOT/.build/ee/gpuvirt-tenancy.tar.gz"
ansible-builder create -f "$REPO_ROOT/execution-environment.yml" -c "$CONTEXT"
