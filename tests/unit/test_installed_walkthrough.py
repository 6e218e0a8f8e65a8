# -*- coding: utf-8 -*-
"""The shipped docs' commands, from the installed collection alone (its tarball installed into an
empty collections path, tests/unit/built_collection.py; no checkout on any path), in a fresh
working directory holding a copy of the installed example inventory as ``mine``, as the docs say:

- every ``ansible-playbook -i mine|INVENTORY gpuvirt.tenancy.<playbook> ...`` command the installed
  docs hold resolves in the installed collection (``--syntax-check`` with the copied inventory);
- the walkthrough runs as written: the capture of ``dgx01`` (here a local host standing on the
  DGX A100-class tree: ``gpuvirt_capture_root``), then the preflight and the preview on
  ``$PWD/captures/dgx01`` through the inventory's preview alias; each exits 0 and prints no
  warning but the tenants module's own about the previewed tenants, and the collection gains no
  file."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile

import pytest
import yaml

import built_collection  # pylint: disable=import-error
from fakes.captured_trees import load_dgx_tree  # pylint: disable=import-error

COMMAND = re.compile(r"ansible-playbook -i (?:mine|INVENTORY) gpuvirt\.tenancy\.[a-z_]+[^`#\\\n]*")
# The commands run for real, in this order (the others need a real GPU host: syntax-checked).
WALKTHROUGH = (
    "ansible-playbook -i mine gpuvirt.tenancy.capture --limit dgx01",
    "ansible-playbook -i mine gpuvirt.tenancy.preflight -e gpuvirt_host_root=DIR",
    "ansible-playbook -i mine gpuvirt.tenancy.site --check --diff -e gpuvirt_host_root=$PWD/captures/dgx01",
)


def collection_dir():
    return os.path.join(built_collection.installed(), "ansible_collections", "gpuvirt", "tenancy")


def doc_commands():
    """Each distinct command of the installed collection's docs (Markdown, RST, the example inventory's comments)."""
    found = set()
    top = collection_dir()
    for folder, _dirs, files in os.walk(top):
        for name in files:
            if name.endswith((".md", ".rst")) or folder.startswith(os.path.join(top, "inventories")):
                with open(os.path.join(folder, name), encoding="utf-8") as handle:
                    found.update(" ".join(match.split()) for match in COMMAND.findall(handle.read()))
    return sorted(found)


def listing(top):
    """Every file and folder under ``top``, but Python's bytecode caches (``__pycache__``: Python's own
    writes where it may, as for any installed package, not the collection's)."""
    found = []
    for folder, dirs, files in os.walk(top):
        dirs[:] = [name for name in dirs if name != "__pycache__"]
        found.extend(os.path.relpath(os.path.join(folder, name), top) for name in dirs + files)
    return sorted(found)


def make_workdir(where, collections):
    """``where`` as a user's working directory: ``mine``, the example inventory of the collection
    installed in ``collections``, whose server dgx01 is reached here: a local host whose capture root
    is the DGX A100-class tree."""
    collection = os.path.join(collections, "ansible_collections", "gpuvirt", "tenancy")
    # a user's own copy: writable, whatever the modes of the installed files
    shutil.copytree(os.path.join(collection, "inventories", "example"), str(where / "mine"), copy_function=shutil.copyfile)
    for folder, _dirs, _files in os.walk(str(where / "mine")):
        os.chmod(folder, 0o755)
    load_dgx_tree().write_tree(str(where / "dgx-host"))
    (where / "mine" / "host_vars").mkdir()
    (where / "mine" / "host_vars" / "dgx01.yml").write_text(yaml.safe_dump({
        "ansible_connection": "local", "ansible_become": False, "ansible_python_interpreter": os.path.join(built_collection.bindir(), "python"),
        "gpuvirt_capture_root": str(where / "dgx-host")}))
    return where


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return make_workdir(tmp_path_factory.mktemp("walkthrough"), built_collection.installed())


def run(workdir, command, *extra, collections=None, user=(), env=None):
    """``command`` in ``workdir`` with the installed collection's environment (``collections``: another
    install), as ``user`` (a command prefix) with ``env`` added; -> (rc, stdout + stderr)."""
    env = built_collection.user_env(collections, ANSIBLE_DEPRECATION_WARNINGS="true", **(env or {}))
    done = subprocess.run(list(user) + ["bash", "-c", command + "".join(" " + arg for arg in extra)], cwd=str(workdir), env=env,
                          capture_output=True, text=True, check=False, timeout=900)
    return done.returncode, done.stdout + done.stderr


def walkthrough(workdir, **how):
    """The docs' walkthrough in ``workdir`` (``how``: run()'s collections, user, env), each command
    checked as the docs promise."""
    for command in WALKTHROUGH:
        rc, out = run(workdir, command.replace("=DIR", "=$PWD/captures/dgx01"), **how)
        assert rc == 0, "%s:\n%s" % (command, out[-4000:])
        # any warning but the tenants module's own about the previewed tenants fails
        warnings = built_collection.other_warnings(out)
        assert warnings == [], "%s:\n%s" % (command, "\n".join(warnings))
        if "gpuvirt.tenancy.capture" in command:
            assert (workdir / "captures" / "dgx01" / ".source.txt").is_file()
            assert "-e gpuvirt_host_root=%s" % (workdir / "captures" / "dgx01") in " ".join(out.split())
        elif "gpuvirt.tenancy.preflight" in command:
            assert (workdir / "preflight-reports" / "dgx01-preview.json").is_file(), out[-3000:]
        else:
            assert re.search(r"['\"]plan +PASS +fits: tenant-a on node", out), out[-3000:]
            assert "+GRUB_CMDLINE_LINUX=\"iommu=pt" in out


def test_the_users_python_sees_nothing_of_the_checkout(tmp_path):
    """The ansible-* commands and the Python the walkthrough runs are a fresh virtualenv's, made for
    this run outside the checkout (scripts/test.sh installed and oldest): neither its prefix nor any
    folder of its sys.path is inside the checkout, and it imports no gpuvirt code."""
    if not os.environ.get("GPUVIRT_USER_WHEELHOUSE"):
        pytest.skip("GPUVIRT_USER_WHEELHOUSE is unset: the commands are the test's own Python's (the installed and oldest stages set it)")
    python = os.path.join(built_collection.bindir(), "python")
    # run where a user runs it (sys.path's '' is the working directory), not in the checkout
    done = subprocess.run([python, "-c", "import json, sys; print(json.dumps([sys.prefix] + sys.path))"], capture_output=True, text=True,
                          env=built_collection.clean_env(built_collection.installed()), cwd=str(tmp_path), check=True, timeout=60)
    paths = json.loads(done.stdout)
    resolved = [os.path.realpath(os.path.join(str(tmp_path), p)) for p in paths]
    inside = [p for p in resolved if p == built_collection.REPO or p.startswith(built_collection.REPO + os.sep)]
    assert inside == [], inside
    assert subprocess.run([python, "-c", "import ansible_collections.gpuvirt"], capture_output=True, check=False, cwd=str(tmp_path),
                          env=built_collection.clean_env(built_collection.installed())).returncode != 0


def test_the_docs_hold_the_walkthrough_commands():
    commands = doc_commands()
    assert set(WALKTHROUGH) <= set(commands), commands
    assert not [c for c in commands if "playbooks/" in c]


def test_every_doc_command_resolves_in_the_installed_collection(workdir):
    failed = []
    for command in doc_commands():
        rc, out = run(workdir, command.replace("-i INVENTORY", "-i mine").replace("=DIR", "=$PWD/captures/dgx01"), "--syntax-check")
        if rc != 0:
            failed.append("%s: %s" % (command, out[-800:]))
    assert failed == [], "\n".join(failed)


def test_capture_preflight_and_preview_as_the_docs_say(workdir):
    before = listing(collection_dir())
    walkthrough(workdir)
    assert listing(collection_dir()) == before


def test_the_walkthrough_on_a_read_only_collections_path():
    """The same walkthrough where the collection is installed read-only (a shared collections path):
    the collection installed into a path of its own, its files 0444 and folders 0555; where the tests
    run as root (whom modes do not stop), the commands run in a mount namespace of their own where
    that path is a read-only bind mount, so that no user can write it. Each command passes as above,
    from a working directory of the user's, and nothing is written into the collection."""
    collections = tempfile.mkdtemp(prefix="gpuvirt-ro-collections.")
    where = pathlib.Path(tempfile.mkdtemp(prefix="gpuvirt-user."))
    try:
        assert built_collection.install(collections).returncode == 0
        before = listing(collections)
        for folder, _dirs, files in os.walk(collections):
            for name in files:
                os.chmod(os.path.join(folder, name), 0o444)
            os.chmod(folder, 0o555)
        make_workdir(where, collections)
        user = ()
        if os.geteuid() == 0:
            # root: a private mount namespace whose collections path is mounted read-only (the command
            # then runs as given: "$@" of the sh -c)
            user = ("unshare", "--mount", "sh", "-c", 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"',
                    collections)
            rc, out = run(where, "touch %s/written-as-root" % collections, collections=collections, user=user)
            assert rc != 0 and "Read-only file system" in out, out
        walkthrough(where, collections=collections, user=user)
        assert listing(collections) == before
    finally:
        for folder, _dirs, _files in os.walk(collections):
            os.chmod(folder, 0o755)
        shutil.rmtree(collections, ignore_errors=True)
        shutil.rmtree(str(where), ignore_errors=True)


def test_install_page_lists_every_module_the_installed_collection_has():
    """docs/docsite/rst/install.rst shows ``ansible-doc -l gpuvirt.tenancy`` after the install: the
    modules it lists are those the installed collection's ansible-doc lists, each with its short
    description's start."""
    with open(os.path.join(collection_dir(), "docs", "docsite", "rst", "install.rst"), encoding="utf-8") as handle:
        shown = dict(re.findall(r"^   (gpuvirt\.tenancy\.[a-z0-9_]+) +(.+?)(?:\.\.\.)?$", handle.read(), re.M))
    done = subprocess.run([os.path.join(built_collection.bindir(), "ansible-doc"), "-l", "-j", "gpuvirt.tenancy"], capture_output=True,
                          text=True, env=built_collection.clean_env(built_collection.installed()), check=True, timeout=300)
    listed = json.loads(done.stdout)
    assert sorted(shown) == sorted(listed), (sorted(shown), sorted(listed))
    assert [name for name in shown if not listed[name].startswith(shown[name])] == []
