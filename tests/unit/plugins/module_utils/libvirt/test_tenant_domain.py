# -*- coding: utf-8 -*-
"""The libvirt features (tenant_domain_one, domain_info, libvirt/holdings) on libvirt's test driver, where a module run cannot
reach: the removal of a guest that ignores the power button."""

from __future__ import annotations

import libvirt
import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_info import foreign_domains
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_tree import to_text
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.holdings import domain_holdings
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.libvirt_connection import Connection
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import Run
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.tenant_domain_one import TenantDomain
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.tenant_spec import TenantSpec

from conftest import LIBVIRT_TEST_URI as URI  # pylint: disable=import-error
from fakes.clock import Clock  # pylint: disable=import-error


# --------------------------------------------------------------------------- removal of a guest that ignores shutdown
class _DeafDomain:
    """A libvirt test-driver domain whose guest ignores the ACPI power button (as the lab's
    diskless tenants do): shutdown() is accepted and nothing happens."""

    def __init__(self, domain):
        self._domain = domain
        self.shutdowns = 0

    def shutdown(self):
        self.shutdowns += 1
        return 0

    def __getattr__(self, name):
        return getattr(self._domain, name)


class _Conn:
    def __init__(self, conn):
        self._conn = conn
        self.domain = None

    def lookupByName(self, name):  # pylint: disable=invalid-name
        self.domain = _DeafDomain(self._conn.lookupByName(name))
        return self.domain

    def __getattr__(self, name):
        return getattr(self._conn, name)


@pytest.fixture
def deaf_running_domain(libvirt_conn):
    spec = TenantSpec({"name": "deaf", "domain_type": "test", "arch": "i686", "vcpus": 1, "memory_mb": 16})
    libvirt_conn.defineXML(to_text(spec.build())).create()
    yield libvirt_conn
    try:
        domain = libvirt_conn.lookupByName("deaf")
        if domain.isActive():
            domain.destroy()
        domain.undefine()
    except libvirt.libvirtError:
        pass


def test_removal_waits_then_refuses_without_force(deaf_running_domain):
    conn = deaf_running_domain
    clock = Clock()
    wrapped = _Conn(conn)
    run = Run()
    tenant = TenantDomain(Connection(wrapped, URI), TenantSpec.named("deaf"), "absent", shutdown_timeout=30,
                          clock=clock, sleep=clock.sleep)
    with pytest.raises(StateError, match=r"deaf did not shut down within 30s .*force_off"):
        tenant.apply(run)
    assert wrapped.domain.shutdowns == 1 and clock.now >= 30
    assert conn.lookupByName("deaf").isActive()
    assert conn.lookupByName("deaf").isPersistent()
    assert not run.changed


def test_removal_forces_off_only_when_allowed(deaf_running_domain):
    conn = deaf_running_domain
    clock = Clock()
    run = Run()
    tenant = TenantDomain(Connection(_Conn(conn), URI), TenantSpec.named("deaf"), "absent", shutdown_timeout=5, force_off=True,
                          clock=clock, sleep=clock.sleep)
    tenant.apply(run)
    assert tenant.result()["forced_off"] and tenant.result()["removed"] and run.changed
    with pytest.raises(libvirt.libvirtError):
        conn.lookupByName("deaf")


# --------------------------------------------------------------------------- a stored definition that does not parse
class _UnreadableDomain:
    """A domain whose stored XML is not XML (a control character in an attribute, as libvirt
    kept it): every call that reads it names it instead of failing with a traceback."""

    def definition(self):
        return "<domain type='kvm'><name>broken</name><os><type machine='pc\x01'>hvm</type></os></domain>"

    def is_active(self):
        return False

    def autostart(self):
        return False


class _OneDomainConn:
    uri = "test:///default"

    def domain_names(self):
        return ["broken"]

    def domain(self, name):
        return _UnreadableDomain() if name == "broken" else None


def test_a_stored_definition_that_does_not_parse_is_a_clear_error():
    message = r"domain broken: its stored definition does not parse as XML .*\(virsh edit broken\) or remove it \(virsh undefine broken\)"
    with pytest.raises(StateError, match=message):
        domain_holdings(_OneDomainConn())
    with pytest.raises(StateError, match=message):
        foreign_domains(_OneDomainConn(), [])
    with pytest.raises(StateError, match=message):
        TenantDomain(_OneDomainConn(), TenantSpec({"name": "broken", "vcpus": 1, "memory_mb": 64}), "defined")
