# -*- coding: utf-8 -*-
"""What the libvirt host role asks of libvirt's service and what it then does (plugin_utils
libvirt_service, the actions libvirt_service's and stage_result's logic): the service question,
whether a read answers it, what is due, and the lines a preview says."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.modules import tenant_domain_info
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.libvirt_service import (
    LibvirtServiceError, host_plan, host_preview, read_answers, service_due, service_query)

from conftest import LIBVIRT_TEST_URI, run_module  # pylint: disable=import-error
from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.packages import DEBIAN_LIBVIRT, debian_libvirt  # pylint: disable=import-error

URI = "qemu:///system"


@pytest.mark.parametrize("args, expected", [
    (("libvirtd", True), {"name": "libvirtd", "uefi": True}),
    (("libvirtd", "false", None), {"name": "libvirtd", "uefi": False}),
    (("virtqemud", False, ["libvirt-daemon-system"]), {"name": "virtqemud", "uefi": False, "packages": ["libvirt-daemon-system"]}),
    (("libvirtd", True, []), {"name": "libvirtd", "uefi": True, "packages": []}),
])
def test_the_service_question_leaves_unset_packages_out(args, expected):
    assert service_query(*args) == expected


@pytest.mark.parametrize("args, message", [
    ((None, True), r"expected the service name \(libvirt_host_service\), got None"),
    (("", True), "expected the service name"),
    (("libvirtd", "maybe"), r"uefi \(libvirt_host_uefi\) is 'maybe', not true or false"),
])
def test_a_bad_service_question_is_named(args, message):
    with pytest.raises(LibvirtServiceError, match=message):
        service_query(*args)


@pytest.mark.parametrize("uefi, packages, installed", [
    (True, None, None),  # the module's Debian list, with OVMF
    (False, ["libvirt-daemon-system", "qemu-system-x86"], ["libvirt-daemon-system", "qemu-system-x86"]),
])
def test_the_service_question_comes_back_as_asked(libvirt_conn, tmp_path, uefi, packages, installed):
    """tenant_domain_info answers the service question as service_query builds it: libvirt_host takes
    the gate's read only when its query equals that question. (Here, not among the module's tests: the
    question is controller code, which ansible-test units keeps out of a module's tests.)"""
    del libvirt_conn
    question = service_query("libvirtd", uefi, packages)
    if installed is None:
        installed = list(DEBIAN_LIBVIRT) + ["ovmf"]
    host = Host(str(tmp_path), commands=RecordedCommands(replies=debian_libvirt(packages=installed)))
    result = run_module(tenant_domain_info.main, {"names": [], "uri": LIBVIRT_TEST_URI, "service": question}, host=host)
    assert result["query"]["service"] == question


QUESTION = {"name": "libvirtd", "uefi": True}
READ = {"query": {"service": QUESTION, "uri": URI}, "service": {"active": "active"}, "domains": {}}


@pytest.mark.parametrize("read, answers", [
    (READ, True),
    (dict(READ, query={"service": dict(QUESTION, uefi=False), "uri": URI}), False),   # another question
    (dict(READ, query={"service": QUESTION, "uri": "qemu:///session"}), False),        # another libvirt
    (dict(READ, service=None), False),                                                  # the service not read
    ({}, False), (None, False),                                                         # no read
])
def test_a_read_answers_only_the_same_question(read, answers):
    assert read_answers(read, QUESTION, URI) is answers


# tenant_domain_info's service read of a host where libvirt runs (the shape of preflight_info's RETURN sample)
RUNNING = {"family": "Debian", "packages": ["libvirt-daemon-system"], "missing": [], "enabled": "enabled", "active": "active",
           "answers": True}
NEW_MOUNT = {"changed": True, "mounts": [{"size": "1G", "path": "/dev/hugepages1G", "mounted": False}],
             "mount_units": ["/etc/systemd/system/dev-hugepages1G.mount"]}
OLD_MOUNT = {"changed": False, "mounts": [{"size": "1G", "path": "/dev/hugepages1G", "mounted": True}],
             "mount_units": ["/etc/systemd/system/dev-hugepages1G.mount"]}
SKIPPED = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}
MOUNTS = [{"size": "1G", "path": "/dev/hugepages1G"}]


@pytest.mark.parametrize("service, mounts, start, restart, due", [
    # a converged host: the role has nothing to do for the service
    (RUNNING, None, False, False, False),
    (RUNNING, SKIPPED, False, False, False),
    (RUNNING, OLD_MOUNT, False, False, False),
    # running before the run mounted hugetlbfs: restarted so that it finds the mount
    (RUNNING, NEW_MOUNT, False, True, False),
    # running and enabled but not answering: nothing to start, the role's check names the failure
    (dict(RUNNING, answers=False), None, False, False, True),
    # a package missing, not enabled, not active: started (and enabled); a service started now finds the mount itself
    (dict(RUNNING, missing=["ovmf"]), None, True, False, True),
    (dict(RUNNING, enabled="disabled"), NEW_MOUNT, True, True, True),
    (dict(RUNNING, active="inactive"), NEW_MOUNT, True, False, True),
    (dict(RUNNING, missing=["libvirt-daemon-system"], enabled="not-found", active="unknown", answers=False), NEW_MOUNT,
     True, False, True),
    # no systemd runs (a container, the tenant bench's machine): a daemon that answers was started by something else
    (dict(RUNNING, enabled="", active=""), NEW_MOUNT, False, False, False),
    # ... one that does not answer, or a package missing there, is the role's to start (its service task says what fails)
    (dict(RUNNING, enabled="", active="", answers=False), None, True, False, True),
    (dict(RUNNING, enabled="", active="", missing=["ovmf"]), None, True, False, True),
])
def test_what_is_due_to_the_service(service, mounts, start, restart, due):
    assert service_due(service, mounts) == {"start": start, "restart": restart, "due": due}


@pytest.mark.parametrize("args, words", [
    ((None,), "expected the service read"),
    ((RUNNING, [NEW_MOUNT]), "mounts must be the hugepages result, got list"),
])
def test_what_is_due_names_a_bad_input(args, words):
    with pytest.raises(LibvirtServiceError, match=words):
        service_due(*args)


@pytest.mark.parametrize("service, mounts, plan", [
    # a converged host without a mount asked: apply.yml is not even included
    (RUNNING, [], {"install": False, "start": False, "check": False, "apply": False}),
    # a mount asked: the role mounts it (and restarts a running libvirtd where the mount is new)
    (RUNNING, MOUNTS, {"install": False, "start": False, "check": False, "apply": True}),
    (dict(RUNNING, missing=["ovmf"]), [], {"install": True, "start": True, "check": False, "apply": True}),
    (dict(RUNNING, answers=False), [], {"install": False, "start": False, "check": True, "apply": True}),
    (dict(RUNNING, family="RedHat", active="inactive"), [], {"install": False, "start": True, "check": False, "apply": True}),
])
def test_the_roles_plan_after_its_read(service, mounts, plan):
    assert host_plan(service, mounts, "gpu-07") == plan


@pytest.mark.parametrize("service, mounts, words", [
    (dict(RUNNING, family=None), [], "gpu-07 has neither dpkg nor rpm: install libvirt, QEMU and libvirt-python by hand, or set "
                                     "libvirt_host_packages and use a Debian- or RedHat-family host"),
    (RUNNING, {"size": "1G"}, r"mounts \(libvirt_host_hugetlbfs_mounts\) must be a list of \{size, path\}, got dict"),
])
def test_the_roles_plan_refuses_a_host_without_dpkg_or_rpm_and_bad_mounts(service, mounts, words):
    with pytest.raises(LibvirtServiceError, match=words):
        host_plan(service, mounts, "gpu-07")


def test_a_preview_says_the_roles_changes_on_the_host():
    """A preview under a capture skips the libvirt host role: its mount, the daemon's restart and OVMF are said
    as that role's changes, from what the role would do with its inputs."""
    assert host_preview(True, MOUNTS) == [
        "hugetlbfs /dev/hugepages1G (pagesize=1G): the libvirt host role (tenants stage) mounts it with a systemd mount unit "
        "it enables, before libvirtd starts, where the host has no such mount",
        "libvirtd: the libvirt host role restarts it after mounting a hugetlbfs it did not have (running domains keep "
        "running), or installs and starts it where libvirt is missing or stopped",
        "OVMF: the libvirt host role installs it where it is missing (a tenant boots with UEFI)"]
    assert host_preview("false", [], "virtqemud") == [
        "virtqemud: the libvirt host role installs and starts it where libvirt is missing or stopped"]
    with pytest.raises(LibvirtServiceError, match="must be a list"):
        host_preview(True, {})
