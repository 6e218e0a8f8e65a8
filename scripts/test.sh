#!/usr/bin/env bash
# Runs every test of the collection: the unit tests, ansible-test sanity, ansible-lint
# (production profile), the Galaxy package's docs and changelog lint, Galaxy's importer, the oldest
# and the newest ansible-core the collection claims, the tenant bench (tenants booted by this
# machine's own libvirt, the tenants and guest stages run for real, checked from inside the guests)
# and Molecule's lab scenario (a real kernel under QEMU).
# Installs what it needs first (as root on a fresh Debian 12 machine).
#
#   scripts/test.sh                 everything
#   scripts/test.sh sanity lint     only the named stages (unit, sanity, lint, docs, galaxy, oldest, newest, installed, bench, lab,
#                                   nested)
#
# unit      pytest tests/unit; fails when nothing is collected and when a test is skipped (a
#           missing dependency such as libvirt-python must not pass green)
# docs      the docsite's stage pages match docs/*.md (scripts/docsite.py), antsibull-docs
#           lint-collection-docs (modules, roles, docsite) and antsibull-changelog lint
# galaxy    Galaxy's importer (galaxy-importer from PyPI, ansible-test off: it needs containers) on
#           the built tarball: no error, no warning, docs for every plugin it lists, a README per role
# oldest    on ansible-core of requirements-oldest.txt, in its own virtualenv: every file of
#           plugins/modules and plugins/module_utils, and playbooks/files/capture_host.py, parses for Python 3.6 (that version's oldest
#           target Python), then the unit tests and ansible-test sanity
# bench     lab/tenant_bench.py run --down-after (docs/lab.md, "The tenant bench"): libvirtd in a
#           network namespace of its own, the tenant image (cached by its recipe), the tenants
#           stage and the guest stages of inventories/bench, the checks inside the guests, a second
#           run that changes nothing, a restart, a removal and an isolated tenant; about 10 minutes
# nested    (only when named: at most 40 minutes) lab/nested.py run (docs/lab.md, "VF passthrough seen from
#           inside"): the lab converged with three tenants of lab/nested-tenants.yml, each given an igb VF
#           and booted from a busybox guest disk through the collection's image path; from inside: the
#           VF's MAC, RDMA between two tenants on one VLAN with the GID index the collection's code
#           chooses, a tenant on another VLAN that reaches neither, spoof check read back
# newest    on ansible-core of requirements-newest.txt (the newest line, which needs Python 3.12: pyenv's,
#           in its own virtualenv): the unit tests (tests/unit/test_preview.py among them: the preview
#           playbook of the example inventory on the DGX A100-class capture) and ansible-test sanity
# installed the collection as a user has it, on the newest ansible-core (the oldest stage runs the same
#           tests on the oldest): its tarball installed into an empty collections path, run by a fresh
#           virtualenv made for the run outside the checkout (ansible-core and libvirt-python only, from
#           the wheels bootstrap keeps beside the line's virtualenv), no checkout on any path; the
#           shipped docs' commands, the capture, preflight and preview by FQCN as the docs say,
#           failing on any warning (tests/unit/test_installed_walkthrough.py), the AWX project
#           (tests/unit/awx/test_project.py) and the inventory plugin (tests/unit/plugins/inventory)
set -uo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

stages=("$@")
# newest (ansible-core 2.21 on Python 3.12) runs when named: it has run green whole, and its 20-40 minutes
# (two virtualenvs, the unit tests and sanity again) do not fit the default run within CI's time
((${#stages[@]})) || stages=(unit sanity lint docs galaxy oldest installed bench lab)

# The stages with virtualenvs of their own, made only when asked (installed: the newest core's).
bootstrap_args=()
for stage in oldest newest galaxy; do
  [[ " ${stages[*]} " == *" $stage "* ]] && bootstrap_args+=("$stage")
done
[[ " ${stages[*]} " == *" installed "* && " ${bootstrap_args[*]} " != *" newest "* ]] && bootstrap_args+=(newest)
bash scripts/bootstrap.sh "${bootstrap_args[@]}" || { echo "test: bootstrap failed" >&2; exit 2; }
source scripts/env.sh
OLDEST_VENV="${GPUVIRT_OLDEST_VENV:-$REPO_ROOT/.build/oldest-venv}"
OLDEST_SANITY_VENV="${GPUVIRT_OLDEST_SANITY_VENV:-$REPO_ROOT/.build/oldest-sanity-venv}"
NEWEST_VENV="${GPUVIRT_NEWEST_VENV:-$REPO_ROOT/.build/newest-venv}"
NEWEST_SANITY_VENV="${GPUVIRT_NEWEST_SANITY_VENV:-$REPO_ROOT/.build/newest-sanity-venv}"
GALAXY_VENV="${GPUVIRT_GALAXY_VENV:-$REPO_ROOT/.build/galaxy-venv}"
passed=0 failed=0 failed_names=()

run_stage() {
  local name=$1; shift
  echo "=== test stage: $name"
  local start=$SECONDS
  "$@"
  local rc=$?
  echo "=== test stage: $name: rc=$rc in $((SECONDS - start)) s"
  if [[ $rc -eq 0 ]]; then passed=$((passed + 1)); else failed=$((failed + 1)); failed_names+=("$name"); fi
}

# pytest with the given interpreter over tests/unit, failing on what pytest lets pass: exit 5
# (nothing collected) and skipped tests (pytest.importorskip of a missing dependency, a skip
# for a missing tool). Expected failures (xfail) are not skips.
strict_pytest() {
  local python=$1; shift
  local report rc skipped
  report="$(mktemp)"
  # -n auto: one worker per core (pytest-xdist); the suite is CPU-bound. The tests named after
  # the Python, else the whole of tests/unit.
  "$python" -m pytest "${@:-tests/unit}" -q -rfEs -n auto --junitxml="$report"
  rc=$?
  if [[ $rc -eq 5 ]]; then echo "unit: no tests collected" >&2; rm -f "$report"; return 1; fi
  skipped="$(python3 - "$report" <<'PY'
import sys
import xml.etree.ElementTree as ET

for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    for skip in case.findall("skipped"):
        if skip.get("type") != "pytest.xfail":
            print("%s::%s: %s" % (case.get("classname"), case.get("name"), skip.get("message")))
PY
)"
  rm -f "$report"
  if [[ -n "$skipped" ]]; then
    echo "unit: tests were skipped; a skip is a failure here (install what they need: scripts/bootstrap.sh):" >&2
    echo "$skipped" >&2
    return 1
  fi
  return $rc
}

# The installed-collection tests run the commands of a fresh virtualenv made from the wheels
# bootstrap keeps beside the virtualenv (tests/unit/built_collection.py); the other stages of an
# ansible-core line likewise.
unit_tests() {
  GPUVIRT_USER_WHEELHOUSE="$(python -c 'import sys; print(sys.prefix)')/wheelhouse" GPUVIRT_USER_REQUIREMENTS="$REPO_ROOT/requirements.txt" \
    strict_pytest python
}

# Molecule's prerun installs a copy of this collection into ~/.ansible/collections, which
# ansible-lint's syntax check then finds before the checkout: a copy left by an earlier lab run
# names roles and files as they were then. Lint the checkout only.
lint() {
  rm -rf "$HOME/.ansible/collections/ansible_collections/gpuvirt/tenancy"
  ansible-lint --profile production --offline
}

# The Galaxy package's docs (modules, roles, docs/docsite) and changelog, as antsibull renders them.
docs() {
  local rc=0
  python scripts/docsite.py --check || rc=1
  antsibull-docs lint-collection-docs --plugin-docs "$REPO_ROOT/.build/collections/ansible_collections/gpuvirt/tenancy" || rc=1
  antsibull-changelog lint || rc=1
  return $rc
}

# Every file of plugins/modules and plugins/module_utils, and the capture tool (gpuvirt.tenancy.capture),
# runs on the managed hosts, whose oldest
# Python that ansible-core (2.16) supports is 3.6: the parser at feature_version 3.6 catches new
# syntax (:=, positional-only parameters, f"{x=}", match); the rest are names the parser accepts and 3.6
# does not have.
py36_parse() {
  python3 - plugins/modules plugins/module_utils playbooks/files/capture_host.py <<'PY'
import ast
import os
import sys

NEW_METHODS = {"isascii": "3.7", "removeprefix": "3.9", "removesuffix": "3.9"}
NEW_MODULES = {"dataclasses": "3.7", "contextvars": "3.7", "importlib.resources": "3.7", "graphlib": "3.9",
               "zoneinfo": "3.9", "tomllib": "3.11"}
NEW_KEYWORDS = {"capture_output": "3.7", "text": "3.7"}  # of subprocess.run / Popen / check_output
SUBPROCESS = {"run", "Popen", "check_output", "check_call", "call"}
GENERIC_BUILTINS = {"list", "dict", "tuple", "set", "frozenset", "type"}


def problems(path):
    with open(path, "rb") as handle:
        source = handle.read()
    try:
        tree = ast.parse(source, path, feature_version=(3, 6))
    except SyntaxError as exc:
        yield exc.lineno, "not Python 3.6 syntax: %s" % exc.msg
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "__future__" \
                and any(alias.name == "annotations" for alias in node.names):
            yield node.lineno, "from __future__ import annotations (Python 3.7)"
        elif isinstance(node, ast.Attribute) and node.attr in NEW_METHODS:
            yield node.lineno, ".%s (Python %s)" % (node.attr, NEW_METHODS[node.attr])
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                if name in NEW_MODULES:
                    yield node.lineno, "import %s (Python %s)" % (name, NEW_MODULES[name])
        elif isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            for keyword in node.keywords:
                if func in SUBPROCESS and keyword.arg in NEW_KEYWORDS:
                    yield node.lineno, "%s(%s=...) (Python %s)" % (func, keyword.arg, NEW_KEYWORDS[keyword.arg])
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.AnnAssign, ast.arg)):
            annotations = [node.returns] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else [node.annotation]
            for annotation in filter(None, annotations):
                for sub in ast.walk(annotation):
                    if isinstance(sub, ast.Subscript) and getattr(sub.value, "id", None) in GENERIC_BUILTINS:
                        yield sub.lineno, "%s[...] in an annotation (Python 3.9)" % sub.value.id

found = 0
count = 0
for top in sys.argv[1:]:
    walk = [(os.path.dirname(top), [], [os.path.basename(top)])] if os.path.isfile(top) else sorted(os.walk(top))
    for folder, _dirs, files in walk:
        for name in sorted(files):
            if name.endswith(".py"):
                count += 1
                for line, text in problems(os.path.join(folder, name)):
                    found += 1
                    print("%s:%s: %s" % (os.path.join(folder, name), line, text))
print("py36: %d files, %d problems" % (count, found))
sys.exit(1 if found or not count else 0)
PY
}

# The oldest ansible-core the collection claims: its own virtualenv first on PATH (ansible-playbook,
# ansible-galaxy of that version for the tests that run them), its own sanity virtualenv.
oldest() {
  local rc=0
  "$OLDEST_VENV/bin/ansible" --version | sed -n 1p
  py36_parse || rc=1
  PATH="$OLDEST_VENV/bin:$PATH" GPUVIRT_USER_WHEELHOUSE="$OLDEST_VENV/wheelhouse" GPUVIRT_USER_REQUIREMENTS="$REPO_ROOT/requirements-oldest.txt" \
    strict_pytest "$OLDEST_VENV/bin/python" || rc=1
  GPUVIRT_SANITY_VENV="$OLDEST_SANITY_VENV" SANITY_BUILD_DIR="${TMPDIR:-/tmp}/gpuvirt-sanity-oldest-$(echo "$REPO_ROOT" | sha256sum | cut -c1-12)" \
    bash scripts/sanity.sh || rc=1
  return $rc
}

# The newest ansible-core the collection claims, on its Python (3.12): its own virtualenv first on
# PATH (the ansible-playbook of the preview test and the ansible-galaxy of the install tests), its
# own sanity virtualenv.
newest() {
  local rc=0 python_version
  "$NEWEST_VENV/bin/ansible" --version | sed -n 1p
  python_version="$("$NEWEST_VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  PATH="$NEWEST_VENV/bin:$PATH" strict_pytest "$NEWEST_VENV/bin/python" || rc=1
  GPUVIRT_SANITY_VENV="$NEWEST_SANITY_VENV" SANITY_PYTHON="$python_version" \
    SANITY_BUILD_DIR="${TMPDIR:-/tmp}/gpuvirt-sanity-newest-$(echo "$REPO_ROOT" | sha256sum | cut -c1-12)" \
    bash scripts/sanity.sh || rc=1
  return $rc
}

# The collection as a user installs it, on the newest ansible-core (the oldest stage runs these
# tests among the others on the oldest): its own virtualenv first on PATH.
installed() {
  "$NEWEST_VENV/bin/ansible" --version | sed -n 1p
  PATH="$NEWEST_VENV/bin:$PATH" GPUVIRT_USER_WHEELHOUSE="$NEWEST_VENV/wheelhouse" GPUVIRT_USER_REQUIREMENTS="$REPO_ROOT/requirements-newest.txt" \
    strict_pytest "$NEWEST_VENV/bin/python" tests/unit/test_installed_walkthrough.py \
    tests/unit/awx/test_project.py tests/unit/plugins/inventory
}

# Galaxy's importer on the tarball a release would upload: the files git would commit, built by
# ansible-galaxy. galaxy.yml names no repository (the publisher sets it before publishing, see the
# changelog); Galaxy requires one, so the copy checked here gets GPUVIRT_REPOSITORY_URL, else the
# checkout's origin remote, else a stand-in that says it is one. ansible-test is off (it needs a
# container engine); ansible-lint and ansible-doc run as on Galaxy.
galaxy() {
  local work rc repository
  work="$(mktemp -d)"
  (cd "$REPO_ROOT" && git ls-files -co --exclude-standard) >"$work/files"
  rsync -a --files-from="$work/files" "$REPO_ROOT/" "$work/src/"
  repository="${GPUVIRT_REPOSITORY_URL:-$(git -C "$REPO_ROOT" remote get-url origin 2>/dev/null || true)}"
  if ! grep -q '^repository:' "$work/src/galaxy.yml"; then
    repository="${repository:-https://repository.invalid/stand-in-for-the-publishers-url}"
    echo "galaxy: galaxy.yml names no repository; checking with repository: $repository"
    printf 'repository: %s\n' "$repository" >>"$work/src/galaxy.yml"
  fi
  ansible-galaxy collection build "$work/src" --output-path "$work/out" >/dev/null || { rm -rf "$work"; return 1; }
  (cd "$work" && PATH="$GALAXY_VENV/bin:$PATH" GALAXY_IMPORTER_RUN_ANSIBLE_TEST=false \
    GALAXY_IMPORTER_TMP_ROOT_DIR="$work" \
    "$GALAXY_VENV/bin/python" -m galaxy_importer.main --print-result "$work"/out/*.tar.gz) >"$work/importer.log" 2>&1
  rc=$?
  python3 - "$work/importer.log" "$rc" <<'PY' || rc=1
import json
import sys

text = open(sys.argv[1], encoding="utf-8").read()
problems = [line for line in text.splitlines() if line.startswith(("WARNING", "ERROR"))]
if sys.argv[2] != "0":
    problems.append("galaxy-importer exited %s" % sys.argv[2])
start = text.find("\n{")
result = json.loads(text[start:text.rindex("}") + 1]) if start >= 0 else {"docs_blob": {"contents": []}}
found = result["docs_blob"]["contents"]
for content in found:
    kind, name = content["content_type"], content["content_name"]
    if kind in ("module", "filter", "test", "lookup", "inventory", "callback", "connection") and not content.get("doc_strings"):
        problems.append("%s %s: listed by the importer without docs" % (kind, name))
    if kind == "role" and not content.get("readme_file"):
        problems.append("role %s: no README" % name)
print("galaxy: %d contents, %d problems" % (len(found), len(problems)))
for line in problems:
    print("galaxy: " + line)
sys.exit(1 if problems or not found else 0)
PY
  ((rc == 0)) || tail -40 "$work/importer.log"
  rm -rf "$work"
  return $rc
}

nested() {
  python3 lab/nested.py run --timeout 2400
}

bench() {
  python3 lab/tenant_bench.py run --down-after
}

lab() {
  if [[ -f molecule/default/molecule.yml ]]; then
    molecule test -s default
  else
    echo "lab: no Molecule scenario in this checkout" >&2
    return 1
  fi
}

for stage in "${stages[@]}"; do
  case "$stage" in
    unit) run_stage unit unit_tests ;;
    sanity) run_stage sanity bash scripts/sanity.sh ;;
    lint) run_stage lint lint ;;
    docs) run_stage docs docs ;;
    galaxy) run_stage galaxy galaxy ;;
    oldest) run_stage oldest oldest ;;
    installed) run_stage installed installed ;;
    newest) run_stage newest newest ;;
    bench) run_stage bench bench ;;
    nested) run_stage nested nested ;;
    lab) run_stage lab lab ;;
    *) echo "test: unknown stage '$stage' (unit, sanity, lint, docs, galaxy, oldest, newest, installed, bench, lab, nested)" >&2; exit 2 ;;
  esac
done

echo "stages: $passed passed, $failed failed"
((failed == 0)) || { echo "failed stages: ${failed_names[*]}" >&2; exit 1; }
