# -*- coding: utf-8 -*-
"""The libvirt_service action as the libvirt host role calls it: the play's read taken where it
answers the role's question (no module runs), else one tenant_domain_info read on the host with
exactly that question; then what is due, a host without dpkg or rpm refused; in a preview, the
lines said and nothing read. (tests/unit/roles/test_tenants_stage.py runs the role with it.)"""

from __future__ import annotations

from unittest import mock

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.action import libvirt_service
from fakes.actions import run_action  # pylint: disable=import-error

URI = "qemu:///system"
QUESTION = {"name": "libvirtd", "uefi": True}
RUNNING = {"family": "Debian", "packages": ["libvirt-daemon-system", "ovmf"], "missing": [], "enabled": "enabled",
           "active": "active", "answers": True, "message": None}
ARGS = {"name": "libvirtd", "uefi": True, "packages": None, "uri": URI, "mounts": []}


def run(args, reply=None):
    """The action with tenant_domain_info's run replaced by ``reply`` (the module's result); -> (result, module calls)."""
    calls = []

    def execute(self, module_name=None, module_args=None, task_vars=None, **_kwargs):
        calls.append((module_name, module_args))
        return dict(reply or {})
    with mock.patch.object(libvirt_service.ActionModule, "_execute_module", execute), \
            mock.patch.object(libvirt_service.ActionModule, "_remove_tmp_path"), \
            mock.patch.object(libvirt_service, "with_module_defaults", lambda task, templar, module, options: options):
        return run_action(libvirt_service, "libvirt_service", args), calls


def test_the_plays_read_of_the_same_question_is_taken_and_nothing_runs():
    read = {"query": {"service": QUESTION, "uri": URI}, "service": RUNNING, "domains": {}}
    result, calls = run(dict(ARGS, read=read))
    assert calls == [] and not result.get("failed") and result["read_here"] is False
    assert (result["service"], result["query"]) == (RUNNING, QUESTION)
    assert {key: result[key] for key in ("install", "start", "check", "apply")} == {
        "install": False, "start": False, "check": False, "apply": False}


@pytest.mark.parametrize("read", [
    {},
    # made for another question (OVMF not asked), or on another libvirt
    {"query": {"service": dict(QUESTION, uefi=False), "uri": URI}, "service": RUNNING},
    {"query": {"service": QUESTION, "uri": "qemu:///session"}, "service": RUNNING},
])
def test_else_one_read_on_the_host_asks_exactly_the_roles_question(read):
    missing = dict(RUNNING, missing=["ovmf"], active="inactive", answers=False)
    result, calls = run(dict(ARGS, read=read, mounts=[{"size": "1G", "path": "/dev/hugepages1G"}]),
                        {"changed": False, "service": missing, "query": {"service": QUESTION, "uri": URI}})
    assert calls == [("gpuvirt.tenancy.tenant_domain_info", {"names": [], "foreign": False, "uri": URI, "service": QUESTION})]
    assert result["read_here"] is True and result["service"] == missing and result["changed"] is False
    assert {key: result[key] for key in ("install", "start", "check", "apply")} == {
        "install": True, "start": True, "check": True, "apply": True}


def test_a_failed_read_fails_the_task_with_the_modules_message():
    result, _calls = run(dict(ARGS, read={}), {"failed": True, "msg": "uri: cannot open qemu:///system"})
    assert result["failed"] and result["msg"] == "uri: cannot open qemu:///system"


def test_a_host_without_dpkg_or_rpm_is_refused_naming_the_fix():
    result, _calls = run(dict(ARGS, read={}), {"service": dict(RUNNING, family=None)})
    assert result["failed"] and result["msg"].startswith("the host has neither dpkg nor rpm: install libvirt, QEMU")


@pytest.mark.parametrize("args, words", [
    (dict(ARGS, name=""), "libvirt_service: expected the service name (libvirt_host_service), got ''"),
    (dict(ARGS, uefi="maybe"), "libvirt_service: uefi (libvirt_host_uefi) is 'maybe', not true or false"),
    (dict(ARGS, preview="sometimes"), "preview (libvirt_host_preview): give true or false, got 'sometimes'"),
])
def test_a_bad_input_is_named_and_nothing_is_read(args, words):
    result, calls = run(args)
    assert result["failed"] and result["msg"] == words and calls == []


def test_a_preview_says_the_roles_changes_and_reads_nothing():
    result, calls = run({"preview": True, "name": "libvirtd", "uefi": True, "mounts": [{"size": "1G", "path": "/dev/hugepages1G"}]})
    assert calls == [] and not result.get("failed") and result["_ansible_verbose_always"] is True and result["read_here"] is False
    assert result["msg"][0].startswith("hugetlbfs /dev/hugepages1G (pagesize=1G): the libvirt host role")
    assert result["msg"][-1] == "OVMF: the libvirt host role installs it where it is missing (a tenant boots with UEFI)"
