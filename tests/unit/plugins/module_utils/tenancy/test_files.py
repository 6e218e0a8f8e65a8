# -*- coding: utf-8 -*-
"""tenancy/files: no tenant is given a file another tenant or domain owns or reads (the rule over
the list that the domain code applies once the guests' paths are known)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.files import check_tenant_files

BASE = "/srv/images/debian.qcow2"
A_DISK, A_SEED = "/g/tenants/a/disk.qcow2", "/g/tenants/a/seed.iso"


def tenant(name, own=(), base=None):
    return (name, "domains[%d] (%s)" % (ord(name) - ord("a"), name), list(own), base)


@pytest.mark.parametrize("present, holdings, message", [
    # a disk or seed to one tenant
    ([tenant("a", [A_DISK]), tenant("b", [A_DISK])], {},
     "domains[1] (b): /g/tenants/a/disk.qcow2 is also a file of tenant a; a tenant's disk or seed is its own"),
    ([tenant("a", [A_DISK], BASE), tenant("b", [BASE])], {}, "domains[1] (b): /srv/images/debian.qcow2 is also a file of tenant a"),
    # a base image is read only: never another tenant's disk
    ([tenant("a", [A_DISK]), tenant("b", [], A_DISK)], {},
     "domains[1] (b): image.base: /g/tenants/a/disk.qcow2 is a disk of tenant a, which writes it"),
    # against the other domains on the host
    ([tenant("a", [A_SEED])], {"legacy": ([], [], [A_SEED])}, "domains[0] (a): /g/tenants/a/seed.iso is a disk of domain legacy"),
    ([tenant("a", [], A_DISK)], {"legacy": ([], [], [A_DISK])}, "domains[0] (a): /g/tenants/a/disk.qcow2 is a disk of domain legacy"),
])
def test_a_file_goes_to_one_tenant(present, holdings, message):
    with pytest.raises(InputError) as err:
        check_tenant_files(present, set(t[0] for t in present), holdings)
    assert str(err.value).startswith(message), str(err.value)


def test_what_the_rule_lets_through():
    # one base read by many overlays; a tenant's own domain holds its files; a domain the call removes frees them
    present = [tenant("a", [A_DISK, A_SEED], BASE), tenant("b", ["/g/tenants/b/disk.qcow2"], BASE)]
    check_tenant_files(present, {"a", "b"}, {"a": ([], [], [A_DISK, A_SEED, BASE])})
    check_tenant_files([tenant("a", [A_DISK])], {"a", "old"}, {"old": ([], [], [A_DISK])})
