#!/usr/bin/env bash
# ansible-test sanity on a copy of the collection (ansible-test needs the
# collection under a real ansible_collections/<ns>/<name> path, not a link).
# Usage: scripts/sanity.sh [ansible-test sanity args...]   (default: every test)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
# The copy lives outside the repository: inside it, ansible-test would find the enclosing git
# checkout, ask git for the files, and see none (the build directory is ignored).
COPY="${SANITY_BUILD_DIR:-${TMPDIR:-/tmp}/gpuvirt-sanity-$(echo "$REPO_ROOT" | sha256sum | cut -c1-12)}/ansible_collections/gpuvirt/tenancy"
mkdir -p "$COPY"
# Only the files git would commit: tracked plus untracked-not-ignored.
(cd "$REPO_ROOT" && git ls-files -co --exclude-standard) >"$COPY/../.filelist"
rsync -a --files-from="$COPY/../.filelist" "$REPO_ROOT/" "$COPY/"
# A copy kept from an earlier run still holds files and links since moved or deleted (rsync's --delete does not
# reach them through --files-from): remove what the list does not name, ansible-test's output aside.
(cd "$COPY" && find . \( -type f -o -type l \) ! -path './tests/output/*' | sed 's|^\./||' | sort) \
  | comm -23 - <(sort "$COPY/../.filelist") | (cd "$COPY" && xargs -r -d '\n' rm -f --)
find "$COPY" -mindepth 1 -type d -empty ! -path "$COPY/tests/output*" -delete
rm -f "$COPY/../.filelist"
cd "$COPY"
# Sanity runs on the files that will land; the copy has no .git, so ansible-test lists the tree.
SANITY_VENV="${GPUVIRT_SANITY_VENV:-$REPO_ROOT/.build/sanity-venv}"
# SANITY_PYTHON: the Python version of that virtualenv (3.11, Debian 12's; the newest stage's 3.12).
# Plain ansible-test sanity: no --exclude and no ignore file (the lab captures in tests/fixtures are
# tars: their sysfs names hold ':', which a collection's files may not).
exec "$SANITY_VENV/bin/ansible-test" sanity --local --python "${SANITY_PYTHON:-3.11}" "$@"
