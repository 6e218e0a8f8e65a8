# -*- coding: utf-8 -*-
"""The connection helper on libvirt's test driver: the one place libvirt is called, where its
errors become StateError."""

from __future__ import annotations

import uuid

import libvirt
import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.libvirt_connection import LibvirtError, _version_text, connection

from conftest import LIBVIRT_TEST_URI as URI  # pylint: disable=import-error

DOMAIN = ("<domain type='test'><name>%s</name><memory unit='MiB'>16</memory><vcpu current='1'>2</vcpu>"
          "<os><type arch='i686'>hvm</type></os></domain>")


def test_unreachable_uri_is_a_state_error():
    with pytest.raises(StateError, match=r"^uri: cannot connect to test:///nonexistent.xml: .*libvirtd running"):
        with connection("test:///nonexistent.xml"):
            pass


def test_a_domain_that_is_not_there_is_none(libvirt_conn):
    del libvirt_conn
    with connection(URI) as conn:
        assert conn.domain("no-such-domain") is None


def test_live_calls_on_a_running_domain(libvirt_conn):
    del libvirt_conn
    name = "conn-" + uuid.uuid4().hex[:8]
    with connection(URI) as conn:
        domain = conn.define(DOMAIN % name)
        assert not domain.is_active() and domain.is_persistent()
        assert "<name>%s</name>" % name in domain.definition()
        domain.start()
        assert domain.vcpus() == (1, 2)
        domain.set_vcpus(2)
        length = conn.cpu_map_length()
        domain.pin_vcpu(1, [3], length)
        assert domain.vcpu_pins()[1] == [3]
        domain.destroy()
        domain.undefine()
        assert conn.domain(name) is None


def test_a_refused_call_is_a_libvirt_error_with_libvirts_message(libvirt_conn):
    del libvirt_conn
    name = "conn-" + uuid.uuid4().hex[:8]
    with connection(URI) as conn:
        domain = conn.define(DOMAIN % name)
        domain.start()
        with pytest.raises(LibvirtError, match="vcpu"):
            domain.pin_vcpu(1, [3], conn.cpu_map_length())
        assert isinstance(LibvirtError("x"), StateError)
        domain.destroy()
        domain.undefine()


def test_hypervisor_versions_from_the_connection(libvirt_conn):
    """libvirt's version as the host model's ``hypervisor`` holds it; the test driver is not
    QEMU, so no QEMU version."""
    del libvirt_conn
    number = libvirt.getVersion()
    with connection(URI) as conn:
        versions = conn.hypervisor_versions()
    assert versions == {"libvirt": "%d.%d.%d" % (number // 1000000, number // 1000 % 1000, number % 1000), "qemu": None}
    assert _version_text(8000000) == "8.0.0" and _version_text(8007001) == "8.7.1" and _version_text(10010000) == "10.10.0"
