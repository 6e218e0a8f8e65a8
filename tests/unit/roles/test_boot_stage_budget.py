# -*- coding: utf-8 -*-
"""The boot stage's reboot budget (gpuvirt_reboot_budget, role host_stages tasks_from boot:
boot_budget.yml) in a real run with gpuvirt_reboot_ok true, run by ansible-runner on this machine
against two copies of the DGX A100-class tree (tests/tools/dgx_tree.py) as two hosts' roots. With
a budget of 0 neither host may reboot: each makes its GRUB edit, is deferred (the fact and the
DEFERRED line), leaves the run before the next stage, and the controller's play names both. No
reboot is attempted (a reboot here would be this machine's), so a budget above 0 is left to the
reboot_share filter's tests and the lab. Without a budget the budget's tasks are one skipped include."""

from __future__ import annotations

import sys

import pytest

from fakes.captured_trees import load_dgx_tree  # pylint: disable=import-error
from fakes.playbook_run import run_with_runner  # pylint: disable=import-error

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
    """-> (rc, output, the task records, each host's root)."""
    roots, gpus = {}, None
    for host in ("h1", "h2"):
        roots[host] = tmp_path / host
        _host, gpus, _nics = load_dgx_tree().write_tree(str(roots[host]))
    (tmp_path / "play.yml").write_text(PLAY)
    inventory = "\n".join("%s ansible_connection=local host_root=%s" % (host, root) for host, root in sorted(roots.items()))
    extra = dict({"gpuvirt_reboot_ok": True, "gpuvirt_gpus": sorted(gpus.values()), "gpuvirt_gpu_pci_ids": ["10de:20b0"],
                  "host_boot_bootloader_update": "none", "host_boot_firmware_install": False,
                  "ansible_python_interpreter": sys.executable}, **extra_vars)
    rc, out, records = run_with_runner(tmp_path / "runner", tmp_path / "play.yml", inventory + "\nlocalhost ansible_connection=local\n",
                                       extra)
    return rc, out, records, roots


def records_of(records, status, task):
    return [r for r in records if r["status"] == status and r["task"] == task]


def test_a_budget_of_zero_defers_every_host_that_needs_a_reboot(tmp_path):
    rc, out, records, roots = run(tmp_path, gpuvirt_reboot_budget=0)
    assert rc == 0, out[-6000:]
    for root in roots.values():
        assert "iommu=pt" in (root / "etc" / "default" / "grub").read_text(encoding="utf-8")
    shares = records_of(records, "ok", "Boot | Share the batch's reboot budget among its hosts that need a reboot")
    assert sorted(r["host"] for r in shares) == ["h1", "h2"]
    assert not records_of(records, "ok", "Boot | Reboot the hosts the budget lets (the boot stage again, with its reboot)")
    said = sorted(r["result"]["msg"] for r in records_of(records, "ok", "Boot | Say why the host stops here"))
    assert [line.split(" needs a reboot")[0] for line in said] == ["DEFERRED: h1", "DEFERRED: h2"], said
    assert "this batch may reboot only 0 host(s)" in said[0]
    assert not records_of(records, "ok", "Test | After the boot stage (the SR-IOV/VFIO stage would run here)")
    [deferred] = records_of(records, "ok", "Test | The deferred hosts")
    assert deferred["result"]["msg"] == ["h1", "h2"]


def test_without_a_budget_its_tasks_are_one_skipped_include(tmp_path):
    rc, out, records, _roots = run(tmp_path, gpuvirt_reboot_ok=False)
    assert rc == 0, out[-6000:]
    skipped = records_of(records, "skipped", "Boot | Reboot within the batch's reboot budget")
    assert sorted(r["host"] for r in skipped) == ["h1", "h2"]
    assert not records_of(records, "ok", "Boot | Share the batch's reboot budget among its hosts that need a reboot")
    # no budget, no reboot allowed: each host stops with its pending reboot instead
    assert len(records_of(records, "ok", "Boot | Say what is pending and how to continue")) == 2
