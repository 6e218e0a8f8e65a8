# -*- coding: utf-8 -*-
"""The SR-IOV/VFIO stage (role host_stages, tasks_from sriov_vfio: host_vfio's one vfio_bind call,
then host_sriov's publication) run by ansible-runner (as AWX runs it) on this machine in check
mode, as site.yml runs it after the preflight gate: host_vfio tasks_from options builds the
stage's call from the inventory's inputs before the gate, the gate (preflight_info stage_checks)
checks it in its own call, and the stage takes the gate's result only for exactly that call and
only while the boot stage changed nothing. The host is a tree of the lab layout converged by an
earlier vfio_bind run (fakes.kernel.lab_host: the VFs of the NVMe PF and the edu GPU on vfio-pci).

Converged, the stage makes no module call of its own; a gate that checked other options, or a
boot stage that changed the host, leaves the stage its own call."""

from __future__ import annotations

import sys

import pytest

from conftest import run_module  # pylint: disable=import-error
from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.kernel import lab_host  # pylint: disable=import-error
from fakes.playbook_run import host_calls, run_with_runner, sent_as_built  # pylint: disable=import-error

pytest.importorskip("ansible_runner", reason="ansible-runner is in requirements.txt; run scripts/bootstrap.sh")
PF, GPU = "0000:81:00.0", "0000:82:00.0"
# the inventory's desired state of the stage
INVENTORY = {"gpuvirt_sriov_pfs": [{"pf": PF, "num_vfs": 4}], "gpuvirt_gpus": [GPU], "gpuvirt_gpu_pci_ids": ["1234:11e8"],
             "gpuvirt_tenants": [{"name": "tenant-a", "gpus": 1, "vfs": 1, "vcpus": 1, "memory_mb": 64}]}

PLAY = """
- name: The SR-IOV/VFIO stage after the preflight gate
  hosts: localhost
  gather_facts: false
  module_defaults:
    group/gpuvirt.tenancy.all: {root: "%(root)s"}
  tasks:
    - name: Test | The SR-IOV/VFIO stage's call, for the gate (as site.yml builds it)
      ansible.builtin.import_role:
        name: gpuvirt.tenancy.host_vfio
        tasks_from: options

    - name: Test | The gate's read, checking that call (or another)
      gpuvirt.tenancy.preflight_info:
        gpu_ids: "{{ gpuvirt_gpu_pci_ids }}"
        firmware_tool: none
        stage_checks: {sriov_vfio: "{{ host_vfio_call | combine(gate_change) }}"}
      register: test_gate

    - name: Test | Hand on the read as the preflight role does, and what the boot stage did (whether it changed the host)
      ansible.builtin.set_fact:
        preflight_stage_checks_read: "{{ test_gate.stage_checks }}"
        host_boot_host_changed: "{{ boot_changed }}"

    - name: Test | The SR-IOV/VFIO stage
      ansible.builtin.import_role:
        name: gpuvirt.tenancy.host_stages
        tasks_from: sriov_vfio

    - name: Test | What the stage published
      ansible.builtin.debug:
        msg: "{{ {'vfs': host_sriov_vfs, 'bound': host_vfio_bound | map(attribute='address') | list, 'changed': host_vfio_changed} }}"
"""


def converged(tmp_path):
    """The lab tree after a vfio_bind run with the stage's inputs (the VFs made and bound, the GPU bound)."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuvirt.tenancy.plugins.modules import vfio_bind  # pylint: disable=import-outside-toplevel
    tree, kernel = lab_host(tmp_path / "root")
    args = {"sriov_pfs": INVENTORY["gpuvirt_sriov_pfs"], "gpus": INVENTORY["gpuvirt_gpus"], "gpu_ids": INVENTORY["gpuvirt_gpu_pci_ids"],
            "devices": []}
    result = run_module(vfio_bind.main, args, host=Host(tree.root, commands=RecordedCommands(), kernel=kernel))
    assert result["changed"] and not result.get("failed"), result
    return tree


def run_stage(tmp_path, gate_change, boot_changed, **inventory):
    """The play above through ansible-runner; -> (rc, stdout, records: fakes.playbook_run)."""
    tree = converged(tmp_path)
    (tmp_path / "play.yml").write_text(PLAY % {"root": tree.root})
    extra = dict(INVENTORY, gate_change=gate_change, boot_changed=boot_changed, ansible_python_interpreter=sys.executable,
                 **inventory)
    return run_with_runner(tmp_path / "runner", tmp_path / "play.yml", "localhost ansible_connection=local", extra, "--check --diff")


def round_trips(records):
    """The stage's module calls on the host (the test's own tasks, the gate's read among them, left out)."""
    return [action for _task, action in host_calls(records)]


@pytest.mark.parametrize("gate_change, boot_changed, expected", [
    # the gate checked exactly this call, nothing changed since: the stage is no call of its own
    ({}, False, []),
    # the gate checked other inputs: the stage's own call
    ({"force": True}, False, ["gpuvirt.tenancy.stage_call"]),
    # the boot stage changed the host after the gate read it: the stage's own call
    ({}, True, ["gpuvirt.tenancy.stage_call"]),
])
def test_converged_stage_takes_the_gates_check_of_exactly_its_call(tmp_path, gate_change, boot_changed, expected):
    rc, out, records = run_stage(tmp_path, gate_change, boot_changed)
    assert rc == 0, out[-6000:]
    assert round_trips(records) == expected, (round_trips(records), out[-4000:])
    [gate] = [r["result"] for r in records if r["task"].startswith("Test | The gate's read")]
    assert gate["stage_checks"]["sriov_vfio"]["error"] is None
    assert gate["stage_checks"]["sriov_vfio"]["changed"] is False
    # the stage's own call (action stage_call: vfio_bind) sends exactly the options gate_check built from the role's
    # inputs, and the play's module_defaults give it the tree as root
    [built] = [r["result"]["options"] for r in records if r["task"] == "SR-IOV/VFIO | Take the gate's check of exactly this call"]
    for call in [r["result"] for r in records if r["action"] == "gpuvirt.tenancy.stage_call" and r["status"] != "skipped"]:
        sent = call["invocation"]["module_args"]
        assert sent_as_built(built, sent) and sent["root"] != "/", (built, sent)
    # published either way: the 4 VFs of the PF, and the GPU and VFs held by vfio-pci
    [published] = [r["result"]["msg"] for r in records if r["task"] == "Test | What the stage published"]
    assert [vf["address"] for vf in published["vfs"][PF]] == ["0000:81:00.%d" % i for i in range(1, 5)]
    assert sorted(published["bound"]) == ["0000:81:00.%d" % i for i in range(1, 5)] + [GPU]
    assert published["changed"] is False


def test_an_inventory_that_still_sets_host_vfio_tenants_is_refused_before_the_gate(tmp_path):
    """host_vfio_tenants is no longer an input (the tenants stage gives the tenants' VFs their settings): still set, the
    call built for the gate (tasks_from options) fails naming it and the fix, and nothing reads or changes the host."""
    tenants = [{"name": "tenant-a", "vfs": [{"address": "0000:81:00.1", "mac": "52:54:00:a0:00:01", "vlan": 101}]}]
    rc, out, records = run_stage(tmp_path, {}, False, host_vfio_tenants=tenants)
    assert rc != 0, out[-4000:]
    [failed] = [r for r in records if r["status"] == "failed"]
    assert failed["action"] == "gpuvirt.tenancy.stage_options", failed
    assert "tenants (host_vfio_tenants) is no longer an input" in failed["result"]["msg"], failed["result"]
    assert "Remove host_vfio_tenants; give each tenant's vfs as a count in gpuvirt_tenants" in failed["result"]["msg"]
    # the play stopped there: neither the gate's read nor the stage ran
    assert not [r for r in records if r["task"].startswith("Test | The gate's read")] and round_trips(records) == []
