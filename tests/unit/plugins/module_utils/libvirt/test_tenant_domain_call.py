# -*- coding: utf-8 -*-
"""Property tests of the tenant-level file checks of tenant_domain: whatever the
call and the host's domains, no tenant is given a file another tenant or domain owns or reads
(``check_files``), and no removal deletes a file another tenant or domain reads, directly or
through a backing chain (``check_removals``). Each is checked against its own statement of the
rule over generated calls; the backing chains are real qcow2 images made by qemu-img."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections import OrderedDict
from types import SimpleNamespace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.tenant_domain_call import check_files, check_removals

from fakes.system_commands import SystemCommands  # pylint: disable=import-error

POOL = ["/srv/images/f%d.qcow2" % index for index in range(5)]


def request(name, present=True, disks=(), seed=None, base=None, removal=()):
    """What the checks read of a DomainRequest: its name and label, whether it stays, its disks and seed, its
    guest's base image, and (removed) the files its removal deletes."""
    guest = SimpleNamespace(image={"base": base}, base={"path": base}) if base else None
    spec = SimpleNamespace(name=name, disks=[{"path": p} for p in disks], seed_cdrom=seed)
    return SimpleNamespace(spec=spec, present=present, guest=guest, label="domains[%s] (%s)" % (name[1:], name),
                           removal=SimpleNamespace(files=list(removal)) if not present else None)


tenants = st.lists(st.fixed_dictionaries({
    "present": st.booleans(),
    "disks": st.lists(st.sampled_from(POOL), max_size=2, unique=True),
    "seed": st.one_of(st.none(), st.sampled_from(POOL)),
    "base": st.one_of(st.none(), st.sampled_from(POOL)),
}), min_size=1, max_size=4)
domains = st.lists(st.lists(st.sampled_from(POOL), max_size=2, unique=True), max_size=2)


def broken_file_rule(call, holdings):
    """The rule, stated apart from the code: between two tenants the call keeps, a disk or seed of one is no disk,
    seed or base of the other; a tenant's disk, seed or base is no file of a domain the call does not name."""
    present = [(r.spec.name, set(d["path"] for d in r.spec.disks) | ({r.spec.seed_cdrom} - {None}),
                {r.guest.base["path"]} if r.guest else set()) for r in call if r.present]
    for name, own, base in present:
        for other, other_own, other_base in present:
            if other != name and own & (other_own | other_base):
                return True
    names = set(r.spec.name for r in call)
    held = set(f for domain, (_d, _m, files) in holdings.items() if domain not in names for f in files)
    return any((own | base) & held for _name, own, base in present)


@settings(max_examples=400, deadline=None)
@given(tenants, domains)
def test_no_tenant_is_given_a_file_another_tenant_or_domain_owns_or_reads(entries, held):
    call = [request("t%d" % index, present=e["present"], disks=e["disks"], seed=e["seed"], base=e["base"])
            for index, e in enumerate(entries)]
    holdings = OrderedDict(("d%d" % index, ([], [], files)) for index, files in enumerate(held))
    try:
        check_files(call, holdings)
        refused = None
    except InputError as error:
        refused = str(error)
    assert (refused is not None) == broken_file_rule(call, holdings), refused
    if refused:
        # the message names the file, the tenant it is about and the other owner
        assert any(path in refused for path in POOL) and refused.startswith("domains[")
        assert any(other in refused for other in ["tenant t%d" % i for i in range(len(call))] + ["domain d0", "domain d1"])


# a world of images: each file a base (None) or an overlay on an earlier one
worlds = st.tuples(st.none(), *[st.one_of(st.none(), st.integers(min_value=0, max_value=i - 1)) for i in range(1, len(POOL))]).map(list)
uses = st.lists(st.tuples(st.sampled_from(["tenant", "domain", "removed"]), st.sampled_from(range(len(POOL)))), min_size=1, max_size=4)


def make_images(host, parents):
    for index, parent in enumerate(parents):
        real = host.path(POOL[index])
        os.makedirs(os.path.dirname(real), exist_ok=True)
        argv = ["qemu-img", "create", "-q", "-f", "qcow2"]
        if parent is not None:
            argv += ["-F", "qcow2", "-b", host.path(POOL[parent])]
        subprocess.run(argv + [real, "64M"], check=True)


def chain(parents, index):
    out = [index]
    while parents[out[-1]] is not None:
        out.append(parents[out[-1]])
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds, uses)
def test_no_removal_deletes_a_file_another_tenant_or_domain_reads(parents, used):
    """A removed tenant's files are refused to go while a tenant the call keeps, or a domain it does not name, has
    one of them as a disk or anywhere in its disk's backing chain; otherwise the removal passes."""
    with tempfile.TemporaryDirectory() as root:
        host = Host(root, commands=SystemCommands())
        make_images(host, parents)
        removed = sorted(set(index for kind, index in used if kind == "removed"))
        call = [request("t0", present=False, removal=[POOL[i] for i in removed])]
        call += [request("t%d" % (n + 1), disks=[POOL[i]]) for n, (kind, i) in enumerate(used) if kind == "tenant"]
        holdings = OrderedDict(("d%d" % n, ([], [], [POOL[i]])) for n, (kind, i) in enumerate(used) if kind == "domain")
        readers = [i for kind, i in used if kind != "removed"]
        broken = any(set(chain(parents, i)) & set(removed) for i in readers)
        try:
            check_removals(call, holdings, host)
            refused = None
        except StateError as error:
            refused = str(error)
        assert (refused is not None) == broken, (parents, used, refused)
        if refused:
            assert refused.startswith("domains[0] (t0): removing tenant t0 would delete /srv/images/f") and "nothing was changed" in refused
