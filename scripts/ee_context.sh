#!/usr/bin/env bash
# Builds the execution environment's build context from a checkout, with no container engine, the
# way a user does from the installed collection:
#   1. the collection tarball, `ansible-galaxy collection build` of the files git would commit
#      (galaxy.yml's build_ignore leaves the tests, lab, Molecule, benchmarks and scripts out);
#   2. that tarball installed into an empty collections path;
#   3. `ansible-builder create` from the installed collection's execution-environment.yml.
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
printf '[defaults]\n' >"$stage/ansible.cfg"
# Only that path: the checkout itself is on the configured collections path and PYTHONPATH (.build/collections).
env -u PYTHONPATH ANSIBLE_CONFIG="$stage/ansible.cfg" ANSIBLE_COLLECTIONS_PATH="$stage/collections" ansible-galaxy collection install "$stage"/out/gpuvirt-tenancy-*.tar.gz \
  -p "$stage/collections" >/dev/null
ansible-builder create -f "$stage/collections/ansible_collections/gpuvirt/tenancy/execution-environment.yml" -c "$CONTEXT"
