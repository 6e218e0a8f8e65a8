# -*- coding: utf-8 -*-
"""playbooks/capture.yml (gpuvirt.tenancy.capture) from the installed collection alone: it runs
the shipped playbooks/files/capture_host.py on each host of gpuvirt_hosts and fetches the capture into
<gpuvirt_capture_dir>/<host>/ on the controller. Two hosts through local connections, each
standing on a tree of its own (the bare lab capture and the DGX A100-class tree): each host's
capture reads as that host (the same host model), in check mode too, and nothing is left on the
hosts but what was there."""

from __future__ import annotations

import importlib.util
import os
import subprocess

import pytest
import yaml

import built_collection  # pylint: disable=import-error
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import read_topology
from fakes.captured_trees import lab_capture  # pylint: disable=import-error

REPO = built_collection.REPO
LAB_BARE = lab_capture("bare")


def without_root(model):
    return dict((key, value) for key, value in model.items() if key != "root")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    """An inventory of two hosts, lab-bare and dgx01, each captured from its own root."""
    where = tmp_path_factory.mktemp("capture")
    spec = importlib.util.spec_from_file_location("dgx_tree", os.path.join(REPO, "tests", "tools", "dgx_tree.py"))
    dgx_tree = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dgx_tree)
    dgx_tree.write_tree(str(where / "dgx"))
    roots = {"lab-bare": LAB_BARE, "dgx01": str(where / "dgx")}
    inventory = {"all": {"children": {"gpuvirt_hosts": {"hosts": dict(
        (name, {"ansible_connection": "local", "ansible_python_interpreter": os.path.join(built_collection.bindir(), "python"), "gpuvirt_capture_root": root})
        for name, root in roots.items())}}}}
    (where / "hosts.yml").write_text(yaml.safe_dump(inventory))
    return where, roots


def capture(where, out, *extra, cwd=None):
    """Run gpuvirt.tenancy.capture from the installed collection in ``cwd`` (default ``where``);
    ``out`` None: without gpuvirt_capture_dir (its default)."""
    collections = built_collection.installed()
    argv = [os.path.join(built_collection.bindir(), "ansible-playbook"), "-i", str(where / "hosts.yml"), "gpuvirt.tenancy.capture",
            "-e", "ansible_become=false"] + (["-e", "gpuvirt_capture_dir=%s" % out] if out is not None else []) + list(extra)
    env = dict(built_collection.clean_env(collections), ANSIBLE_NOCOLOR="1")
    done = subprocess.run(argv, cwd=str(cwd or where), env=env, capture_output=True, text=True, check=False, timeout=600)
    return done.returncode, done.stdout + done.stderr


def tree_listing(top):
    return sorted(os.path.relpath(os.path.join(dirpath, name), top)
                  for dirpath, dirnames, filenames in os.walk(top) for name in dirnames + filenames)


@pytest.mark.parametrize("check", [False, True])
def test_each_host_is_captured_to_the_controller(hosts, check):
    where, roots = hosts
    out = where / ("out-check" if check else "out")
    host_tmp = where / ("host-tmp-check" if check else "host-tmp")
    host_tmp.mkdir()
    rc, log = capture(where, out, *(["--check"] if check else []), "-e", "gpuvirt_capture_tmp_dir=%s" % host_tmp)
    assert rc == 0, log[-4000:]
    assert "%s/" % host_tmp in log and os.listdir(str(host_tmp)) == []  # the hosts' temporary files, used and removed
    for name, root in roots.items():
        assert (out / (name + ".tar.gz")).is_file()
        assert without_root(read_topology(str(out / name))) == without_root(read_topology(root)), name
        assert "Inventory host %s." % name in (out / name / ".source.txt").read_text(encoding="utf-8")
        assert "gpuvirt_host_root=%s" % (out / name) in " ".join(log.split())
    assert "failed=0" in log


def test_a_second_run_replaces_the_capture(hosts):
    where, _roots = hosts
    out = where / "again"
    assert capture(where, out)[0] == 0
    (out / "lab-bare" / "stale").write_text("from an earlier capture")
    rc, log = capture(where, out, "--limit", "lab-bare")
    assert rc == 0, log[-4000:]
    assert not (out / "lab-bare" / "stale").exists()


@pytest.mark.parametrize("out", [None, "site-a/caps"])
def test_a_relative_capture_dir_is_where_ansible_playbook_runs(hosts, out):
    """The default (captures) and a relative gpuvirt_capture_dir are taken from the working directory
    of ansible-playbook: the capture lands there, the message names it, and the installed collection
    (which may be read only) gains no file."""
    where, roots = hosts
    cwd = where / ("run-default" if out is None else "run-relative")
    cwd.mkdir()
    collection = os.path.join(built_collection.installed(), "ansible_collections", "gpuvirt", "tenancy")
    before = tree_listing(collection)
    rc, log = capture(where, out, "--limit", "lab-bare", cwd=cwd)
    assert rc == 0, log[-4000:]
    assert tree_listing(collection) == before
    landed = cwd / ("captures" if out is None else out) / "lab-bare"
    assert without_root(read_topology(str(landed))) == without_root(read_topology(roots["lab-bare"]))
    assert (landed.parent / "lab-bare.tar.gz").is_file()
    said = " ".join(log.split())
    assert "unpacked in %s: preview it with -e gpuvirt_host_root=%s " % (landed, landed) in said
