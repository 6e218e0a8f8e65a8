# -*- coding: utf-8 -*-
"""awx/project/: the usual layout of an AWX project that uses the installed collection, as
awx/job_templates.yml points AWX at it: collections/requirements.yml asks Galaxy for nothing (the
EE's image holds the collection), each playbook a job template runs is a thin import of a playbook of the
collection, and the inventory source is a file of the project that lists no placeholder host.
With only the built collection installed (as the EE's image holds it), the
playbooks pass ansible-playbook --syntax-check and the inventory parses."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
import yaml

import built_collection  # pylint: disable=import-error

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PROJECT = os.path.join(REPO, "awx", "project")
# RFC 5737 documentation ranges (TEST-NET-1/2/3) and RFC 3849's IPv6 one: never a real host.
DOCUMENTATION_ADDRESSES = re.compile(r"\b(192\.0\.2|198\.51\.100|203\.0\.113)\.\d+|\b2001:db8:", re.IGNORECASE)


def load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


@pytest.fixture(scope="module")
def play():
    [only] = load(os.path.join(REPO, "awx", "job_templates.yml"))
    return only


def project_playbooks():
    return sorted(name for name in os.listdir(PROJECT) if name.endswith(".yml"))


def test_project_sync_asks_galaxy_for_nothing(tmp_path):
    """gpuvirt.tenancy is not published on Galaxy: the project's requirements install nothing (the EE's
    image holds the collection), and AWX's sync step, ansible-galaxy collection install -r, succeeds
    with no server to ask."""
    assert load(os.path.join(PROJECT, "collections", "requirements.yml"))["collections"] == []
    (tmp_path / "ansible.cfg").write_text("[galaxy]\nserver = http://127.0.0.1:9/\n")
    proc = subprocess.run([os.path.join(built_collection.bindir(), "ansible-galaxy"), "collection", "install", "-r",
                           os.path.join(PROJECT, "collections", "requirements.yml"), "-p", str(tmp_path / "collections")],
                          env=dict(built_collection.clean_env(tmp_path), ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg")),
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("name", project_playbooks())
def test_each_playbook_imports_a_playbook_of_the_collection(name):
    [play] = load(os.path.join(PROJECT, name))
    assert set(play) == {"name", "ansible.builtin.import_playbook"}, play
    target = play["ansible.builtin.import_playbook"]
    assert target == "gpuvirt.tenancy." + name[:-4]
    assert os.path.isfile(os.path.join(REPO, "playbooks", name)), target


def test_job_templates_run_playbooks_and_inventory_of_the_project(play):
    assert set(t["playbook"] for t in play["vars"]["gpuvirt_awx_templates"]) <= set(project_playbooks())
    assert os.path.isdir(os.path.join(PROJECT, play["vars"]["gpuvirt_awx_inventory_path"]))


def test_no_documentation_address_is_a_default():
    """The first job must not go to an address that cannot exist (the example inventory's TEST-NET)."""
    for folder, _dirs, files in os.walk(PROJECT):
        for name in files:
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                assert not DOCUMENTATION_ADDRESSES.search(handle.read()), os.path.join(folder, name)
    with open(os.path.join(REPO, "awx", "job_templates.yml"), encoding="utf-8") as handle:
        assert not DOCUMENTATION_ADDRESSES.search(handle.read())


@pytest.fixture(scope="module")
def checked_out(tmp_path_factory):
    """A copy of the project, as AWX checks it out, and a collections path holding only the built
    collection (what the EE's image holds)."""
    where = tmp_path_factory.mktemp("project")
    shutil.copytree(PROJECT, str(where / "project"))
    return where / "project", built_collection.installed()


@pytest.mark.parametrize("name", project_playbooks())
def test_playbook_passes_syntax_check_with_the_installed_collection(checked_out, name):
    project, collections = checked_out
    proc = subprocess.run([os.path.join(built_collection.bindir(), "ansible-playbook"), "--syntax-check", "-i", "inventory/hosts.yml", name],
                          cwd=str(project), env=built_collection.clean_env(collections), capture_output=True, text=True,
                          check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("source", ["inventory/hosts.yml", "inventory/"])
def test_inventory_parses_with_the_fleet_groups(checked_out, source):
    """The file, and the directory AWX's inventory source names: its last file is the collection's
    inventory plugin, which, with no GPU host listed yet, lists no guest and fails nothing."""
    project, collections = checked_out
    proc = subprocess.run([os.path.join(built_collection.bindir(), "ansible-inventory"), "-i", source, "--list"],
                          cwd=str(project), env=dict(built_collection.clean_env(collections), ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED="true"),
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "[WARNING]" not in proc.stderr, proc.stderr
    groups = yaml.safe_load(proc.stdout)["all"]["children"]
    assert {"gpuvirt_hosts", "gpuvirt_guests"} <= set(groups)


@pytest.mark.parametrize("name", project_playbooks())
@pytest.mark.parametrize("case", ["empty inventory", "mistyped host limit"])
def test_a_job_that_matches_no_host_fails_saying_so(checked_out, tmp_path, name, case):
    """A job on the project's inventory as it ships (no host yet), or with a survey's host limit that
    names no host of it, fails with a message naming the pattern: not a green job that did nothing."""
    project, collections = checked_out
    inventory = "inventory/hosts.yml"
    extra = []
    if case == "mistyped host limit":
        (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"gpuvirt_hosts": {"hosts": {
            "node07": {"ansible_host": "node07.invalid", "ansible_connection": "ssh"}}}}}}))
        inventory, extra = str(tmp_path / "hosts.yml"), ["-e", "gpuvirt_hosts_limit=node7"]
    proc = subprocess.run([os.path.join(built_collection.bindir(), "ansible-playbook"), "-i", inventory, name] + extra,
                          cwd=str(project), env=dict(built_collection.clean_env(collections), ANSIBLE_NOCOLOR="1"),
                          capture_output=True, text=True, check=False, timeout=300)
    said = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, said[-3000:]
    pattern = "node7" if extra else "gpuvirt_hosts"
    assert "matches no host: the pattern %s names none in this inventory" % pattern in said, said[-3000:]
    assert "failed=1" in said and "node07" not in said.split("PLAY RECAP", 1)[1]
