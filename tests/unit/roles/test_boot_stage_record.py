# -*- coding: utf-8 -*-
"""The boot stage's record, through site.yml's wiring: the preflight gate (preflight_info with
stage_checks) and playbooks/stages/boot.yml, run by ansible-runner (as AWX runs it) on this
machine against a copy of the real capture of the bare lab VM (tests/fixtures/lab/bare) with a
GRUB defaults file from a real Ubuntu template, with the lab inventory's values and no reboot.

The first run edits the copy's GRUB file and hugepages, and iommu_grub keeps its options as the
boot stage's record; on the second the gate's check of that record answers the stage, which then
makes no module call of its own and still says that a reboot is due (the capture's running
command line lacks the args); with other kernel args the stage calls iommu_grub again."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest
import yaml

from conftest import COLLECTIONS, REPO_ROOT  # pylint: disable=import-error

pytest.importorskip("ansible_runner", reason="ansible-runner is in requirements.txt; run scripts/bootstrap.sh")

BARE = os.path.join(REPO_ROOT, "tests", "fixtures", "lab", "bare")
UBUNTU_TEMPLATE = os.path.join(REPO_ROOT, "tests", "fixtures", "boot",
                               "etc-default-grub_TEMPLATE_ubuntu-22.04-jammy_grub2-2.06-2ubuntu7.2.txt")
RECORDS = "var/lib/gpuvirt-tenancy/stage-records.json"

PLAY = """
- name: The preflight gate and the boot stage, as site.yml wires them
  hosts: localhost
  gather_facts: false
  module_defaults:
    group/gpuvirt.tenancy.all: {root: "%(root)s"}
  tasks:
    - name: Test | The gate's read, with the boot stage's record checked
      gpuvirt.tenancy.preflight_info:
        gpu_ids: "{{ gpuvirt_gpu_pci_ids }}"
        nic_ids: "{{ gpuvirt_nic_pci_ids }}"
        firmware_tool: none
        stage_checks: {boot: {}}
      register: test_gate

    - name: Test | Share it as site.yml does
      ansible.builtin.set_fact:
        __stage_host_model: "{{ test_gate.topology }}"
        __stage_checks: "{{ test_gate.stage_checks }}"

    - name: Test | The boot stage
      ansible.builtin.import_tasks: "%(stage)s"

    - name: Test | What the stage decided
      ansible.builtin.debug:
        msg: "reboot_required={{ host_boot_reboot_required }}"
"""


@pytest.fixture
def root(tmp_path):
    tree = tmp_path / "root"
    shutil.copytree(BARE, tree, symlinks=True)
    with open(UBUNTU_TEMPLATE, encoding="utf-8") as handle:
        text = handle.read().replace("@DEFAULT_CMDLINE@", "quiet").replace("@DEFAULT_TIMEOUT@", "5")
    # the directories a Debian host has, where the stage writes its units and module files
    for directory in ("etc/default", "etc/systemd/system", "etc/modules-load.d", "etc/modprobe.d"):
        (tree / directory).mkdir(parents=True)
    (tree / "etc" / "default" / "grub").write_text(text, encoding="utf-8")
    return tree


def run_stage(tmp_path, root, extra=None):
    """The play through ansible-runner; -> (rc, stdout, [(task, action, status, result)])."""
    import ansible_runner  # pylint: disable=import-outside-toplevel
    run_dir = tmp_path / ("runner-%d" % len(list(tmp_path.glob("runner-*"))))
    run_dir.mkdir()
    (tmp_path / "play.yml").write_text(PLAY % {"root": root, "stage": os.path.join(REPO_ROOT, "playbooks", "stages", "boot.yml")})
    with open(os.path.join(REPO_ROOT, "inventories", "lab", "group_vars", "all", "gpuvirt.yml"), encoding="utf-8") as handle:
        inventory = yaml.safe_load(handle)
    # the capture has no boot menu to rebuild (bootloader_update none, as a preview runs it)
    extravars = dict(inventory, gpuvirt_reboot_ok=False, host_boot_early_driver_initramfs=False, host_boot_bootloader_update="none",
                     ansible_python_interpreter=sys.executable)
    extravars.update(extra or {})
    done = ansible_runner.run(
        private_data_dir=str(run_dir), playbook=str(tmp_path / "play.yml"), inventory="localhost ansible_connection=local",
        extravars=extravars, quiet=True, timeout=300,
        envvars={"ANSIBLE_COLLECTIONS_PATH": COLLECTIONS, "ANSIBLE_CONFIG": os.path.join(REPO_ROOT, "ansible.cfg")})
    outcomes = {"runner_on_ok": "ok", "runner_on_failed": "failed", "runner_on_skipped": "skipped"}
    records = [(e["event_data"].get("task"), e["event_data"].get("task_action"), outcomes[e["event"]],
                e["event_data"].get("res") or {}) for e in done.events if e.get("event") in outcomes]
    return done.rc, done.stdout.read(), records


def grub_calls(records):
    """The stage's one iommu_grub call (not the check after a reboot, which has none here)."""
    return [status for task, action, status, _res in records
            if action == "gpuvirt.tenancy.iommu_grub" and "in one GRUB edit" in task]


def decided(records):
    [message] = [res["msg"] for task, _action, _status, res in records if task == "Test | What the stage decided"]
    return message


def test_converged_boot_stage_takes_the_gates_check(tmp_path, root):
    rc, out, records = run_stage(tmp_path, root)
    assert rc == 0, out[-6000:]
    assert grub_calls(records) == ["ok"] and decided(records) == "reboot_required=True"
    with open(root / RECORDS, encoding="utf-8") as handle:
        record = json.load(handle)["stages"]["boot"]
    [sent] = [res["invocation"]["module_args"] for task, action, _s, res in records
              if action == "gpuvirt.tenancy.iommu_grub" and "in one GRUB edit" in task]
    assert record["module"] == "iommu_grub" and record["digest"] == sent["record"]["digest"]
    assert record["params"]["pre_bind_ids"] == sent["pre_bind_ids"] and "root" not in record["params"]
    grub_after_first = (root / "etc" / "default" / "grub").read_text(encoding="utf-8")
    assert "intel_iommu=on" in grub_after_first

    rc, out, records = run_stage(tmp_path, root)
    assert rc == 0, out[-6000:]
    [gate] = [res for task, _a, _s, res in records if task == "Test | The gate's read, with the boot stage's record checked"]
    assert gate["stage_checks"]["boot"]["changed"] is False and gate["stage_checks"]["boot"]["error"] is None
    # no call of its own, and the same decision (the capture still runs the old command line)
    assert grub_calls(records) == ["skipped"] and decided(records) == "reboot_required=True"
    assert (root / "etc" / "default" / "grub").read_text(encoding="utf-8") == grub_after_first

    # other options than the record's: the stage calls its module
    rc, out, records = run_stage(tmp_path, root, {"host_boot_args": [{"name": "nosmt"}]})
    assert rc == 0, out[-6000:]
    assert grub_calls(records) == ["ok"]
    assert "nosmt" in (root / "etc" / "default" / "grub").read_text(encoding="utf-8")
