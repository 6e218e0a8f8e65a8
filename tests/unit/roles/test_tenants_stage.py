# -*- coding: utf-8 -*-
"""The tenants stage (role host_stages, tasks_from tenants: libvirt_host, then tenant_vms) run by
ansible-runner (as AWX runs it) on this machine in check mode, as site.yml runs it after the
preflight gate: the libvirt read and the stage checks of that gate given (preflight_libvirt_read,
preflight_stage_checks_read, as the preflight role hands them on). The domains are libvirt's test driver's (test:///default); the host is the
real capture of the bare lab VM (tests/fixtures/lab/bare.tar). The service part of the read says
libvirt is installed, enabled and running (a converged host), as tenant_domain_info reports it.

The stage is one module round trip, the tenant_domain call that reads the host model and the
domains, plans and acts on the host; with the gate's check of exactly that call (site.yml's
preflight_stage_checks, the call built before the gate by tenant_vms tasks_from options) a
converged host's stage makes no call of its own."""

from __future__ import annotations

import sys

import pytest

from conftest import LIBVIRT_TEST_URI as URI  # pylint: disable=import-error
from fakes.playbook_run import host_calls, run_with_runner, sent_as_built  # pylint: disable=import-error
from fakes.captured_trees import lab_capture  # pylint: disable=import-error

BARE = lab_capture("bare")
pytest.importorskip("ansible_runner", reason="ansible-runner is in requirements.txt; run scripts/bootstrap.sh")
TENANTS = [{"name": "stage-a", "vcpus": 1, "memory_mb": 64, "hugepage_size": "none", "state": "running"},
           {"name": "stage-b", "vcpus": 1, "memory_mb": 64, "hugepage_size": "none"}]

PLAY = """
- name: The tenants stage after the preflight gate
  hosts: localhost
  gather_facts: false
  module_defaults:
    group/gpuvirt.tenancy.all: {root: "%(root)s"}
    group/gpuvirt.tenancy.libvirt: {uri: "%(uri)s"}
  tasks:
    - name: Test | The tenants stage's call, for the gate
      ansible.builtin.import_role:
        name: gpuvirt.tenancy.tenant_vms
        tasks_from: options
      tags: [always]

    - name: Test | The gate's read of the host model and libvirt (the domains of the test driver), and its stage checks
      gpuvirt.tenancy.preflight_info:
        gpu_ids: ["1234:11e8"]
        nic_ids: ["1b36:0010"]
        firmware_tool: none
        libvirt: {names: "{{ gpuvirt_tenants | map(attribute='name') | list }}", foreign: true, uri: "%(uri)s"}
        stage_checks: "{{ {'tenants': tenant_vms_call | combine(gate_changes)} if gate_checks else {} }}"
      register: test_gate
      tags: [always]

    - name: Test | Hand it on as the preflight role does; the service as a converged host's
      ansible.builtin.set_fact:
        preflight_stage_checks_read: "{{ test_gate.stage_checks }}"
        preflight_libvirt_read: >-
          {{ test_gate.libvirt | combine({'service': converged | combine(service_changes | default({})),
                                          'query': test_gate.libvirt.query | combine({'service': asked})}) }}
      vars:
        asked: {name: libvirtd, packages: [], uefi: true}
        converged: {family: Debian, packages: [libvirt-daemon-system], missing: [], enabled: enabled, active: active,
                    answers: true, message: null}
      tags: [always]

    - name: Test | The tenants stage
      ansible.builtin.import_role:
        name: gpuvirt.tenancy.host_stages
        tasks_from: tenants
      tags: [tenants]
"""


def run_stage(tmp_path, gate_checks=False, gate_changes=None, name="runner", tenants=None, service_changes=None):
    """The play above through ansible-runner (as AWX runs it); -> (rc, stdout, records: fakes.playbook_run)."""
    (tmp_path / "play.yml").write_text(PLAY % {"root": BARE, "uri": URI})
    # libvirt_host_packages []: should the role read this machine itself, it finds nothing to install
    extra = {"gpuvirt_tenants": TENANTS if tenants is None else tenants, "gate_checks": gate_checks, "gate_changes": gate_changes or {},
             "gpuvirt_tenant_domain_type": "test", "gpuvirt_gpu_pci_ids": ["1234:11e8"], "gpuvirt_nic_pci_ids": ["1b36:0010"],
             "libvirt_host_uri": URI, "libvirt_host_packages": [], "libvirt_host_uefi": True, "gpuvirt_tenant_firmware": "efi",
             "gpuvirt_tenant_policy": {"emulator": "vcpus"}, "ansible_python_interpreter": sys.executable,
             "service_changes": service_changes or {}}
    return run_with_runner(tmp_path / name, tmp_path / "play.yml", "localhost ansible_connection=local", extra, "--check --diff")


@pytest.mark.usefixtures("libvirt_conn")
def test_tenants_stage_is_one_round_trip_and_none_after_the_gates_check(tmp_path):
    # no check by the gate: the stage is the tenant_domain call alone (it reads, plans and defines on the host)
    rc, out, records = run_stage(tmp_path)
    assert rc == 0, out[-6000:]
    assert [action for _task, action in host_calls(records)] == ["gpuvirt.tenancy.stage_call"], (host_calls(records), out[-4000:])
    [call] = [r["result"] for r in records if r["action"] == "gpuvirt.tenancy.stage_call" and r["status"] != "skipped"]
    assert sorted(call["domains"]) == ["stage-a", "stage-b"] and call["powered_on"] == ["stage-a"]
    # tenant_domain ran (action stage_call) with the play's module_defaults of its groups: the capture and libvirt's test driver
    assert call["invocation"]["module_args"]["root"] == BARE and call["invocation"]["module_args"]["uri"] == URI, call["invocation"]
    assert call["invocation"]["module_args"]["tenants"] == TENANTS
    # exactly the options gate_check built from the role's inputs, none left out
    [built] = [r["result"]["options"] for r in records if r["task"] == "Build the call and take the gate's check of it"]
    assert sent_as_built(built, call["invocation"]["module_args"]), (built, call["invocation"])
    assert sorted(call["placements"]) == ["stage-a", "stage-b"] and call["unplaced"] == {}
    # libvirt_host decided from the gate's read: nothing to install, start or check, so its service tasks are not even included
    [include] = [r for r in records if r["task"] == "Install, mount, enable and start what libvirt lacks"]
    assert include["status"] == "skipped", include
    assert not any(r["task"].startswith(("Install libvirt", "Start libvirtd", "Check libvirt answers")) for r in records)
    # the gate checked exactly this call and it would change nothing (no tenant listed, the test driver's own
    # domain kept as foreign): the stage takes the gate's result and makes no call of its own
    rc, out, records = run_stage(tmp_path, gate_checks=True, name="converged", tenants=[])
    assert rc == 0, out[-6000:]
    [gate] = [r["result"] for r in records if r["task"].startswith("Test | The gate's read")]
    assert gate["stage_checks"]["tenants"]["error"] is None and gate["stage_checks"]["tenants"]["changed"] is False, gate
    assert host_calls(records) == [], out[-4000:]
    # the gate checked other options (another setting): the stage makes its own call
    rc, out, records = run_stage(tmp_path, gate_checks=True, gate_changes={"live": False}, name="other", tenants=[])
    assert rc == 0, out[-6000:]
    assert [action for _task, action in host_calls(records)] == ["gpuvirt.tenancy.stage_call"]
    # a check that would change something (the tenants are not defined yet): in check mode the stage's own call
    # would be that very check, so the stage takes it too, shown as its own result (changed, the domains to define)
    rc, out, records = run_stage(tmp_path, gate_checks=True, name="changing")
    assert rc == 0, out[-6000:]
    [gate] = [r["result"] for r in records if r["task"].startswith("Test | The gate's read")]
    assert gate["stage_checks"]["tenants"]["error"] is None, gate["stage_checks"]
    assert gate["stage_checks"]["tenants"]["changed"] is True
    assert host_calls(records) == [], out[-4000:]
    [taken] = [r for r in records if r["task"] == "Build the call and take the gate's check of it"]
    assert taken["result"]["answered"] is True and taken["result"]["changed"] is True
    assert taken["result"]["result"] == gate["stage_checks"]["tenants"]["result"]
    # the same check with another option is not this call: the stage makes its own
    rc, out, records = run_stage(tmp_path, gate_checks=True, gate_changes={"live": False}, name="changing-other")
    assert rc == 0, out[-6000:]
    assert [action for _task, action in host_calls(records)] == ["gpuvirt.tenancy.stage_call"]


@pytest.mark.usefixtures("libvirt_conn")
def test_libvirt_host_takes_its_service_tasks_only_when_the_service_needs_them(tmp_path):
    # running and enabled, but not answering: nothing to start; the check that names the failure is reached
    # (and skipped, as it is in check mode)
    rc, out, records = run_stage(tmp_path, service_changes={"answers": False}, name="not-answering")
    assert rc == 0, out[-6000:]
    [start] = [r["status"] for r in records if r["task"] == "Start libvirtd and enable it at boot"]
    [check] = [r["status"] for r in records if r["task"].startswith("Check libvirt answers on")]
    assert start == check == "skipped", [(r["task"], r["status"]) for r in records]


@pytest.mark.usefixtures("libvirt_conn")
def test_the_stages_call_runs_async_with_a_status_line_and_its_result_comes_back(tmp_path):
    # Outside check mode the call runs as an async task (a status line every tenant_vms_poll_interval
    # seconds); its result must read as finished to async_status: a top-level ``started`` (the domains it
    # started) made async_status poll until the bound, so the domains it started are ``powered_on``.
    (tmp_path / "play.yml").write_text(PLAY % {"root": BARE, "uri": URI})
    extra = {"gpuvirt_tenants": TENANTS, "gate_checks": False, "gate_changes": {}, "gpuvirt_tenant_domain_type": "test",
             "gpuvirt_gpu_pci_ids": ["1234:11e8"], "gpuvirt_nic_pci_ids": ["1b36:0010"], "libvirt_host_uri": URI,
             "libvirt_host_packages": [], "libvirt_host_uefi": True, "gpuvirt_tenant_firmware": "efi",
             "gpuvirt_tenant_policy": {"emulator": "vcpus"}, "ansible_python_interpreter": sys.executable,
             "tenant_vms_poll_interval": 1, "tenant_vms_call_timeout": 120}
    rc, out, records = run_with_runner(tmp_path / "real", tmp_path / "play.yml", "localhost ansible_connection=local", extra)
    assert rc == 0, out[-6000:]
    [call] = [r["result"] for r in records if r["action"] == "gpuvirt.tenancy.stage_call" and r["status"] != "skipped"]
    assert call.get("ansible_job_id") and call.get("finished") == 1, call
    assert call["powered_on"] == ["stage-a"] and sorted(call["created"]) == ["stage-a", "stage-b"], call
    assert "a status line every 1 s, stopped after 120 s" in out, out[-4000:]
