# -*- coding: utf-8 -*-
"""The boot stage (role host_stages, tasks_from boot) in a real run (not check mode) with
gpuvirt_reboot_ok false, run by ansible-runner on this machine against the DGX A100-class tree
(tests/tools/dgx_tree.py) as the host's root: the stage writes its GRUB edit under the tree, its
reboot is pending, and the host stops there with one line that says what is pending and how to
continue; the next task of the play (standing for the SR-IOV/VFIO stage) does not run.

Under a tree as root the boot stage asks no program of this machine (the firmware and the
initramfs are said not read) and the boot menu is not regenerated (bootloader_update none)."""

from __future__ import annotations

import sys

import pytest

from fakes.captured_trees import load_dgx_tree  # pylint: disable=import-error
from fakes.playbook_run import run_with_runner, sent_as_built  # pylint: disable=import-error

pytest.importorskip("ansible_runner", reason="ansible-runner is in requirements.txt; run scripts/bootstrap.sh")

PLAY = """
- name: The boot stage in a real run whose reboot is not allowed
  hosts: localhost
  gather_facts: false
  module_defaults:
    group/gpuvirt.tenancy.all: {root: "%(root)s"}
  tasks:
    - name: Test | The boot stage
      ansible.builtin.import_role:
        name: gpuvirt.tenancy.host_stages
        tasks_from: boot

    - name: Test | After the boot stage (the SR-IOV/VFIO stage would run here)
      ansible.builtin.debug:
        msg: the later stages ran
"""


def test_a_pending_reboot_stops_the_host_after_the_boot_stage_said_once(tmp_path):
    root = tmp_path / "dgx"
    _host, gpus, _nics = load_dgx_tree().write_tree(str(root))
    grub_before = (root / "etc" / "default" / "grub").read_text(encoding="utf-8")
    (tmp_path / "play.yml").write_text(PLAY % {"root": root})
    extra = {"gpuvirt_reboot_ok": False, "gpuvirt_gpus": sorted(gpus.values()), "gpuvirt_gpu_pci_ids": ["10de:20b0"],
             "host_boot_bootloader_update": "none", "host_boot_firmware_install": False,
             "ansible_python_interpreter": sys.executable}
    rc, out, records = run_with_runner(tmp_path / "runner", tmp_path / "play.yml", "localhost ansible_connection=local", extra)
    assert rc == 0, out[-6000:]
    ran = [r["task"] for r in records if r["status"] == "ok"]
    assert "Test | After the boot stage (the SR-IOV/VFIO stage would run here)" not in ran, ran
    # the stage's call (action stage_call: iommu_grub) sent exactly the options gate_check built from the role's
    # inputs, none left out, and the play's module_defaults gave it the tree as root
    [built] = [r["result"]["options"] for r in records if r["task"] == "Boot | Build the call and take the gate's check of it"]
    [call] = [r["result"] for r in records if r["action"] == "gpuvirt.tenancy.stage_call" and r["status"] != "skipped"]
    sent = call["invocation"]["module_args"]
    assert sent_as_built(built, sent) and sent["root"] == str(root), (built, sent)
    # the edit was made under the tree, its reboot is pending
    assert (root / "etc" / "default" / "grub").read_text(encoding="utf-8") != grub_before
    pending = [r["result"]["msg"] for r in records
               if r["status"] == "ok" and r["task"] == "Boot | Say what is pending and how to continue"]
    assert len(pending) == 1, pending
    line = pending[0]
    assert line.startswith("REBOOT PENDING on localhost: ") and "kernel command line" in line
    assert "run again with -e gpuvirt_reboot_ok=true, or reboot it and run again" in line
    assert " ".join(out.split()).count("REBOOT PENDING on localhost") == 1
