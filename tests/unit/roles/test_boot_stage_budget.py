# -*- coding: utf-8 -*-
"""The boot stage's reboot budget (gpuvirt_reboot_budget, role host_stages tasks_from boot:
boot_budget.yml) in a real run with gpuvirt_reboot_ok true, run by ansible-runner on this machine
against two copies of the DGX A100-class tree (tests/tools/dgx_tree.py) as two hosts' roots. With
a budget of 0 neither host may reboot: each makes its GRUB edit, is deferred (the fact and the
DEFERRED line), leaves the run before the next stage, and the controller's play names both. No
reboot is attempted (a reboot here would be this machine's), so a budget above 0 is left to the
reboot_share filter's tests and the lab. Without a budget the budget's tasks are one skipped include."""

from __future__ import annotations

import os
import sys

import pytest

from conftest import COLLECTIONS, REPO_ROOT  # pylint: disable=import-error
from fakes.captured_trees import load_dgx_tree  # pylint: disable=import-error

pytest.importorskip("ansible_runner", reason="ansible-runner is in requirements.txt; run scripts/bootstrap.sh")

PLAY = """
- name: The boot stage with a reboot budget
  hosts: h1,h2
  gather_facts: false
  module_defaults:
    group/gpuvirt.tenancy.all: {root: "{{ host_root }}"}
  tasks:
    - name: Test | The boot stage
      ansible.builtin.import_role:
        name: gpuvirt.tenancy.host_stages
        tasks_from: boot

    - name: Test | After the boot stage (the SR-IOV/VFIO stage would run here)
      ansible.builtin.debug:
        msg: the later stages ran

- name: The controller's view
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Test | The deferred hosts
      ansible.builtin.debug:
        msg: "{{ hostvars | gpuvirt.tenancy.deferred_hosts(['h1', 'h2']) }}"
"""


def run(tmp_path, **extra_vars):
    import ansible_runner  # pylint: disable=import-outside-toplevel
    roots, gpus = {}, None
    for host in ("h1", "h2"):
        roots[host] = tmp_path / host
        _host, gpus, _nics = load_dgx_tree().write_tree(str(roots[host]))
    (tmp_path / "runner").mkdir()
    (tmp_path / "play.yml").write_text(PLAY)
    inventory = "\n".join("%s ansible_connection=local host_root=%s" % (host, root) for host, root in sorted(roots.items()))
    extra = dict({"gpuvirt_reboot_ok": True, "gpuvirt_gpus": sorted(gpus.values()), "gpuvirt_gpu_pci_ids": ["10de:20b0"],
                  "host_boot_bootloader_update": "none", "host_boot_firmware_install": False,
                  "ansible_python_interpreter": sys.executable}, **extra_vars)
    done = ansible_runner.run(
        private_data_dir=str(tmp_path / "runner"), playbook=str(tmp_path / "play.yml"),
        inventory=inventory + "\nlocalhost ansible_connection=local\n", extravars=extra, quiet=True, timeout=300,
        envvars={"ANSIBLE_COLLECTIONS_PATH": COLLECTIONS, "ANSIBLE_CONFIG": os.path.join(REPO_ROOT, "ansible.cfg")})
    return done, roots


def events(done, kind, task):
    return [e["event_data"] for e in done.events if e.get("event") == kind and e["event_data"].get("task") == task]


def test_a_budget_of_zero_defers_every_host_that_needs_a_reboot(tmp_path):
    done, roots = run(tmp_path, gpuvirt_reboot_budget=0)
    out = done.stdout.read()
    assert done.rc == 0, out[-6000:]
    for root in roots.values():
        assert "iommu=pt" in (root / "etc" / "default" / "grub").read_text(encoding="utf-8")
    shares = events(done, "runner_on_ok", "Boot | Share the batch's reboot budget among its hosts that need a reboot")
    assert sorted(e["host"] for e in shares) == ["h1", "h2"]
    assert not events(done, "runner_on_ok", "Boot | Reboot the hosts the budget lets (the boot stage again, with its reboot)")
    said = sorted(e["res"]["msg"] for e in events(done, "runner_on_ok", "Boot | Say why the host stops here"))
    assert [line.split(" needs a reboot")[0] for line in said] == ["DEFERRED: h1", "DEFERRED: h2"], said
    assert "this batch may reboot only 0 host(s)" in said[0]
    assert not events(done, "runner_on_ok", "Test | After the boot stage (the SR-IOV/VFIO stage would run here)")
    [deferred] = events(done, "runner_on_ok", "Test | The deferred hosts")
    assert deferred["res"]["msg"] == ["h1", "h2"]


def test_without_a_budget_its_tasks_are_one_skipped_include(tmp_path):
    done, _roots = run(tmp_path, gpuvirt_reboot_ok=False)
    out = done.stdout.read()
    assert done.rc == 0, out[-6000:]
    skipped = events(done, "runner_on_skipped", "Boot | Reboot within the batch's reboot budget")
    assert sorted(e["host"] for e in skipped) == ["h1", "h2"]
    assert not events(done, "runner_on_ok", "Boot | Share the batch's reboot budget among its hosts that need a reboot")
    # no budget, no reboot allowed: each host stops with its pending reboot instead
    assert len(events(done, "runner_on_ok", "Boot | Say what is pending and how to continue")) == 2
