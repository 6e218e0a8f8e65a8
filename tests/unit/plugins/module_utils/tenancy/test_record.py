# -*- coding: utf-8 -*-
"""tenancy/record: the tenants read once into read-only records; every option, every default, every
rule over the list, and each bad input named by its tenant, its option and the fix."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.defaults import TENANT_DEFAULTS
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.record import (
    Tenant, _tenant_record, check_tenant_list, tenant_record, tenant_records)

GPU_A, GPU_B = "0000:07:00.0", "0000:0f:00.0"


def entry(name="a", **options):
    return dict({"name": name, "vcpus": 2, "memory_mb": 1024}, **options)


def one(**options):
    return tenant_records([entry(**options)])[0]


# ---------------------------------------------------------------------------- every option, every default
@pytest.mark.parametrize("options, field, value", [
    # the defaults, written once (TENANT_DEFAULTS; firmware: fields.DEFAULT_FIRMWARE)
    ({}, "state", "present"),
    ({}, "priority", "online"),
    ({}, "gpus", 0),
    ({}, "vfs", 0),
    ({}, "firmware", "efi"),
    ({}, "max_vcpus", 2),
    # the placement choices left out are the policy's: not in the record
    ({}, "numa", None),
    ({}, "emulator", None),
    ({}, "hugepage_size", None),
    ({}, "mac", None),
    ({}, "vlan", None),
    ({}, "machine", None),
    ({}, "domain_type", None),
    # each option as given, normalised
    ({"state": "running"}, "state", "running"),
    ({"state": "defined"}, "state", "defined"),
    ({"state": None}, "state", "present"),
    ({"priority": "batch"}, "priority", "batch"),
    ({"gpus": "2"}, "gpus", 2),
    ({"gpus": [GPU_A, GPU_B]}, "gpus", (GPU_A, GPU_B)),
    ({"vfs": 1}, "vfs", 1),
    ({"vfs": None}, "vfs", 0),
    ({"vcpus": "4", "max_vcpus": 8}, "max_vcpus", 8),
    ({"vcpus": "4"}, "vcpus", 4),
    ({"memory_mb": "2048"}, "memory_mb", 2048),
    ({"hugepage_size": "1G"}, "hugepage_size", "1G"),
    ({"hugepage_size": "2048kB"}, "hugepage_size", "2M"),
    ({"hugepage_size": "none"}, "hugepage_size", "none"),
    ({"hugepage_size": None}, "hugepage_size", "none"),
    ({"numa": "spread"}, "numa", "spread"),
    ({"emulator": "vcpus"}, "emulator", "vcpus"),
    ({"mac": "52:54:00:AA:00:01"}, "mac", "52:54:00:aa:00:01"),
    ({"mac": ["52:54:00:AA:00:01", None]}, "mac", ("52:54:00:aa:00:01", None)),
    ({"vlan": "100"}, "vlan", 100),
    ({"firmware": "bios"}, "firmware", "bios"),
    ({"machine": "pc-q35-8.2"}, "machine", "pc-q35-8.2"),
    ({"domain_type": "qemu"}, "domain_type", "qemu"),
    ({"guest": {"address": "192.168.150.11/24", "management_mac": "52:54:00:AA:00:09"}}, "guest",
     {"address": "192.168.150.11/24", "management_mac": "52:54:00:aa:00:09"}),
    ({"data_nic": {"network": "data", "mac": "52:54:00:AA:00:08"}}, "data_nic", {"network": "data", "mac": "52:54:00:aa:00:08"}),
    ({"image": {"base": "/srv/debian-12.qcow2", "size_gb": 8}}, "image", {"base": "/srv/debian-12.qcow2", "size_gb": 8}),
    # what the contract does not read is kept as given, for the code that reads it
    ({"disks": [{"path": "/srv/a.qcow2"}]}, "disks", ({"path": "/srv/a.qcow2"},)),
    ({"qos": {"cpu_shares": 512}}, "qos", {"cpu_shares": 512}),
    ({"autostart": False}, "autostart", False),
])
def test_every_option_and_default(options, field, value):
    record = one(**options)
    assert getattr(record, field) == value
    assert record.get(field) == (None if value is None else record[field])


def test_the_defaults_table_is_what_a_bare_tenant_gets():
    record = one()
    assert dict((key, record[key]) for key in TENANT_DEFAULTS) == TENANT_DEFAULTS


def test_the_stages_firmware_is_the_default_and_a_tenants_own_wins():
    assert one(firmware=None).firmware == "efi"
    assert tenant_records([entry()], firmware="bios")[0].firmware == "bios"
    assert tenant_records([entry(firmware="efi")], firmware="bios")[0].firmware == "efi"


def test_a_tenant_that_leaves_needs_only_its_name():
    gone = tenant_records([{"name": "old", "state": "absent", "vcpus": "junk", "force_off": True}])[0]
    assert not gone.present and dict(gone) == {"name": "old", "state": "absent", "force_off": True}


def test_a_record_is_read_only_and_hands_out_copies():
    raw = [entry(gpus=[GPU_A], qos={"iotune": {"total_iops_sec": 5}})]
    before = copy.deepcopy(raw)
    record = tenant_records(raw)[0]
    assert raw == before
    with pytest.raises(AttributeError, match="read only"):
        record.vcpus = 64
    with pytest.raises(TypeError):
        record.qos["iotune"] = {}
    mine = record["qos"]
    mine["iotune"]["total_iops_sec"] = 0
    assert record["qos"] == {"iotune": {"total_iops_sec": 5}} and record.gpus == (GPU_A,)


def test_plain_is_the_record_as_a_dict_and_a_copy():
    class Tagged(str):
        """A str subclass, as a templating engine's tagged string: frozen and thawed as the str it is."""
    record = tenant_records([entry(gpus=[GPU_A], image={"base": Tagged("jammy"), "size_gb": 20},
                                   qos={"iotune": {"total_iops_sec": 5}}, mac=["52:54:00:00:00:01"])])[0]
    plain = record.plain()
    # plain dicts, not a read-only mapping (which is a Mapping too, so isinstance would not tell)
    assert plain == dict(record) and type(plain) is dict  # pylint: disable=unidiomatic-typecheck
    assert plain["gpus"] == [GPU_A] and plain["mac"] == ["52:54:00:00:00:01"] and plain["image"] == {"base": "jammy", "size_gb": 20}
    assert type(plain["image"]) is dict and type(plain["qos"]["iotune"]) is dict  # pylint: disable=unidiomatic-typecheck
    assert isinstance(plain["image"]["base"], Tagged)
    plain["qos"]["iotune"]["total_iops_sec"] = 0
    plain["gpus"].append(GPU_B)
    assert record["qos"] == {"iotune": {"total_iops_sec": 5}} and record.gpus == (GPU_A,)


def test_records_are_parsed_once():
    records = tenant_records([entry("a"), entry("b")])
    again = tenant_records(records)
    assert all(x is y for x, y in zip(records, again)) and isinstance(again[0], Tenant)


# ---------------------------------------------------------------------------- bad inputs: tenant, option, fix
@pytest.mark.parametrize("tenants, message", [
    ("a", "tenants: expected a list of tenant dicts (gpuvirt_tenants)"),
    (["a"], "tenants[0]: expected a dict with name, vcpus, memory_mb"),
    ([{"vcpus": 1}], "tenants[0]: name: required, a non-empty string"),
    ([entry(" ")], "tenants[0]: name: required, a non-empty string"),
    ([entry("a/b")], "tenants[0].name: "),
    ([entry(state="gone")], "tenants[0] (a): state 'gone' is not one of present, defined, running, absent"),
    ([entry(vcpus=None)], "tenants[0] (a): vcpus: required (the number of guest vCPUs)"),
    ([entry(memory_mb=None)], "tenants[0] (a): memory_mb: required (the guest memory in MiB)"),
    ([entry(vcpus=0)], "tenants[0] (a): vcpus: must be at least 1, got 0"),
    ([entry(vcpus=True)], "tenants[0] (a): vcpus: True is not a whole number"),
    ([entry(vcpus=1.5)], "tenants[0] (a): vcpus: 1.5 is not a whole number"),
    ([entry(max_vcpus=1)], "tenants[0] (a): max_vcpus: 1 is below vcpus 2; raise max_vcpus"),
    ([entry(gpus="two")], "tenants[0] (a): gpus: 'two' is not a whole number"),
    ([entry(gpus=-1)], "tenants[0] (a): gpus: must be at least 0, got -1"),
    # a bool is no whole number, though an int in Python: refused by the field's check as any other value
    ([entry(gpus=True)], "tenants[0] (a): gpus: True is not a whole number"),
    ([entry(vfs=False)], "tenants[0] (a): vfs: False is not a whole number"),
    ([entry(vfs=-1)], "tenants[0] (a): vfs: must be at least 0, got -1"),
    ([entry(memory_mb=True)], "tenants[0] (a): memory_mb: True is not a whole number"),
    ([entry(memory_mb=0)], "tenants[0] (a): memory_mb: must be at least 1, got 0"),
    ([entry(vlan="")], "tenants[0] (a): vlan: '' is not a VLAN id"),
    ([entry(firmware=["efi"])], "tenants[0] (a): firmware: ['efi'] is not one of efi, bios"),
    ([entry(gpus=[GPU_A, GPU_A.upper()])], "tenants[0] (a): gpus lists an address twice; list each device once"),
    ([entry(vfs="many")], "tenants[0] (a): vfs: 'many' is not a whole number"),
    ([entry(priority="gold")], "tenants[0] (a): priority 'gold' is not one of online, batch"),
    ([entry(numa="wide")], "tenants[0] (a): numa 'wide' is not one of required, required_vf_socket, preferred, spread (leave it out for policy.numa)"),
    ([entry(emulator="x")], "tenants[0] (a): emulator 'x' is not one of isolate, housekeeping, vcpus (leave it out"),
    ([entry(hugepage_size="3M")], "tenants[0] (a): hugepage_size: '3M' is not a hugepage size; use 2M or 1G or none"),
    ([entry(mac="00:00:00:00:00:00")], "tenants[0] (a): mac: 00:00:00:00:00:00 is the all-zero address"),
    ([entry(mac="01:00:5e:00:00:01")], "tenants[0] (a): mac: "),
    ([entry(mac=["52:54:00:00:00:01", "52:54:00:00:00:01"])], "tenants[0] (a): mac: 52:54:00:00:00:01 is listed 2 times"),
    ([entry(vlan=4095)], "tenants[0] (a): vlan: 4095 is not a VLAN id"),
    ([entry(firmware="coreboot")], "tenants[0] (a): firmware: 'coreboot' is not one of efi, bios"),
    ([entry(machine="q35\n")], "tenants[0] (a): machine: 'q35\\n' is not a name such as q35"),
    ([entry(domain_type="KVM!")], "tenants[0] (a): domain_type: 'KVM!' is not a name such as kvm"),
    ([entry(guest="192.168.150.11")], "tenants[0] (a): guest: expected a dict"),
    ([entry(guest={"address": "192.168.150.11"})], "tenants[0] (a): guest.address: '192.168.150.11' is not an IPv4 address with "
                                                   "its prefix, like 10.20.0.11/24"),
    ([entry(guest={"address": "192.168.150.0/24"})], "tenants[0] (a): guest.address: 192.168.150.0/24 is the network address"),
    ([entry(guest={"rdma_address": "010.20.0.1/24"})], "tenants[0] (a): guest.rdma_address: '010.20.0.1/24' is not an IPv4"),
    ([entry(guest={"management_mac": "nope"})], "tenants[0] (a): guest.management_mac: 'nope' is not a MAC address"),
    ([entry(data_nic={"network": "d", "mac": "nope"})], "tenants[0] (a): data_nic.mac: 'nope' is not a MAC address"),
    ([entry(data_nic="gpuvirt-data")], "tenants[0] (a): data_nic: expected a dict (network or bridge, mac, vlan), got str"),
    ([entry(image="/srv/debian-12.qcow2")], "tenants[0] (a): image: expected a dict (base or url, checksum, size_gb, copy), got str"),
])
def test_each_bad_input_names_the_tenant_the_option_and_the_fix(tenants, message):
    before = copy.deepcopy(tenants)
    with pytest.raises(InputError) as err:
        tenant_records(tenants)
    assert str(err.value).startswith(message), str(err.value)
    assert tenants == before


# ---------------------------------------------------------------------------- vfs: a count, never VFs by address
VF_A, VF_B = "0000:84:10.0", "0000:84:10.2"
VFS_FIX = ("but a tenant's vfs is a count: give the number of VFs (vfs: %d); the planner picks the tenant's VFs near its "
           "GPU, and each gets its MAC and VLAN from the tenant's mac (one, or a list of one per VF) and vlan")


@pytest.mark.parametrize("vfs, count", [
    # the forms the SR-IOV/VFIO stage once took: addresses, {address, mac, vlan}, a mix of both
    ([VF_A], 1),
    ([VF_A, VF_B], 2),
    ([{"address": VF_A, "mac": "52:54:00:a0:00:01", "vlan": 101}], 1),
    ([VF_A, {"address": VF_B, "vlan": 7}], 2),
    ((VF_A,), 1),
    # one VF as a dict, and an empty list (no VFs: the count 0)
    ({"address": VF_A, "mac": "52:54:00:a0:00:01"}, 1),
    ([], 0),
])
def test_vfs_named_by_address_are_refused_with_the_count_to_give(vfs, count):
    tenants = [entry("a", mac="52:54:00:a0:00:01", vlan=101), entry("b", vfs=vfs, mac="52:54:00:b0:00:01", vlan=102)]
    before = copy.deepcopy(tenants)
    with pytest.raises(InputError) as err:
        tenant_records(tenants)
    assert str(err.value) == "tenants[1] (b): vfs: %r names VFs by address, %s" % (vfs, VFS_FIX % count)
    assert tenants == before
    # the count the message names is taken, with the same mac and vlan
    record = tenant_records([entry("b", vfs=count, mac="52:54:00:b0:00:01", vlan=102)])[0]
    assert (record["vfs"], record["mac"], record["vlan"]) == (count, "52:54:00:b0:00:01", 102)


# ---------------------------------------------------------------------------- the rules over the list
ADDRESS = {"address": "192.168.150.11/24"}


@pytest.mark.parametrize("tenants, held, host, message", [
    # a name to one tenant
    ([entry("a"), entry("a")], None, None, "tenants[1] (a): name a is also tenants[0]; tenant names are domain names: list each"),
    ([entry("a"), {"name": "a", "state": "absent"}], None, None, "tenants[1] (a): name a is also tenants[0]"),
    # a device to one tenant
    ([entry("a", gpus=[GPU_A]), entry("b", gpus=[GPU_B, GPU_A.upper()])], None, None,
     "tenants[1] (b): gpus: 0000:07:00.0 is also a GPU of tenants[0] (a); a device goes to one tenant only"),
    # a MAC to one interface: a tenant's VF MAC, its management NIC's, its data NIC's
    ([entry("a", mac="52:54:00:00:00:01"), entry("b", mac=["52:54:00:00:00:01"])], None, None,
     "tenants[1] (b): mac[0] 52:54:00:00:00:01 is also the MAC of tenants[0] (a) (mac); a MAC belongs to one interface"),
    ([entry("a", mac="52:54:00:00:00:01"), entry("b", guest={"management_mac": "52:54:00:00:00:01"})], None, None,
     "tenants[1] (b): guest.management_mac 52:54:00:00:00:01 is also the MAC of tenants[0] (a) (mac)"),
    ([entry("a", data_nic={"network": "d", "mac": "52:54:00:00:00:02"}), entry("b", mac="52:54:00:00:00:02")], None, None,
     "tenants[1] (b): mac 52:54:00:00:00:02 is also the MAC of tenants[0] (a) (data_nic.mac)"),
    ([entry("a", mac="52:54:00:00:00:03", guest={"management_mac": "52:54:00:00:00:03"})], None, None,
     "tenants[0] (a): guest.management_mac 52:54:00:00:00:03 is also the MAC of mac"),
    # an address to one guest, within the call
    ([entry("a", guest=ADDRESS), entry("b", guest={"address": "192.168.150.11/16"})], None, None,
     "tenants[1] (b): guest.address 192.168.150.11 is also the guest.address of tenants[0] (a); an address belongs to one guest"),
    ([entry("a", guest={"rdma_address": "10.20.0.1/24"}), entry("b", guest={"rdma_address": "10.20.0.1/24"})], None, None,
     "tenants[1] (b): guest.rdma_address 10.20.0.1 is also the guest.rdma_address of tenants[0] (a)"),
    # across calls: another domain's address; the host's own address
    ([entry("a", guest=ADDRESS)], {"legacy": {"addresses": ["192.168.150.11"]}}, None,
     "tenants[0] (a): guest.address 192.168.150.11 is already the address of domain legacy; an address belongs to one guest"),
    ([entry("a", guest=ADDRESS)], None, "192.168.150.11/24",
     "tenants[0] (a): guest.address 192.168.150.11 is the host's own address on the management network (192.168.150.11/24); "
     "give the guest another address"),
])
def test_each_rule_over_the_list(tenants, held, host, message):
    with pytest.raises(InputError) as err:
        tenant_records(tenants, held=held, host_address=host)
    assert str(err.value).startswith(message), str(err.value)


@pytest.mark.parametrize("tenants, held, host", [
    # the same MAC, address or device on a tenant that leaves is no conflict
    ([entry("a", gpus=[GPU_A], mac="52:54:00:00:00:01", guest=ADDRESS), {"name": "b", "state": "absent", "gpus": [GPU_A],
                                                                         "mac": "52:54:00:00:00:01", "guest": ADDRESS}], None, None),
    # a tenant's own domain holds its address: it is that tenant's
    ([entry("a", guest=ADDRESS)], {"a": {"addresses": ["192.168.150.11"]}}, None),
    # a management address and an RDMA address are on networks of their own
    ([entry("a", guest=ADDRESS), entry("b", guest={"rdma_address": "192.168.150.11/24"})], None, "192.168.150.1/24"),
    # counts of GPUs are the planner's to place
    ([entry("a", gpus=1), entry("b", gpus=1)], {"legacy": {"addresses": []}}, None),
])
def test_what_the_rules_let_through(tenants, held, host):
    assert [r.name for r in tenant_records(tenants, held=held, host_address=host)] == [t["name"] for t in tenants]


def test_the_list_rules_run_again_on_records_with_what_the_host_holds():
    records = tenant_records([entry("a", guest=ADDRESS)])
    assert check_tenant_list(records) is records
    with pytest.raises(InputError, match="already the address of domain legacy"):
        check_tenant_list(records, {"legacy": {"addresses": ["192.168.150.11"]}})


# ---------------------------------------------------------------------------- an entry read without names, then named
def _entries():
    """Entries good and bad, generated over the options: every field alone, given, left out, None
    or wrong, and some together."""
    values = {
        "state": ["running", "absent", "gone", None, ""],
        "gpus": [1, "2", -1, True, [GPU_A], [GPU_A, GPU_A.upper()], None, "two"],
        "vfs": [1, None, -1, False, [VF_A], {"address": VF_A}, "many"],
        "vcpus": [4, "4", 0, None, 1.5],
        "memory_mb": [2048, "2048", 0, None, True],
        "max_vcpus": [8, 1, None, "x"],
        "mac": ["52:54:00:AA:00:01", ["52:54:00:00:00:01", "52:54:00:00:00:01"], "00:00:00:00:00:00", "", None, "nope"],
        "vlan": [100, "100", 4095, "", None],
        "firmware": ["bios", "coreboot", ["efi"], None],
        "machine": ["pc-q35-8.2", "q35\n", None],
        "domain_type": ["qemu", "KVM!", None],
        "priority": ["batch", "gold", None],
        "hugepage_size": ["1G", "3M", None, "none"],
        "numa": ["spread", "wide", "", None],
        "emulator": ["vcpus", "x", None],
        "guest": [{"address": "192.168.150.11/24"}, {"address": "192.168.150.0/24"}, {"management_mac": "nope"}, "x", None],
        "data_nic": [{"network": "d", "mac": "52:54:00:AA:00:08"}, {"mac": "nope"}, "x", None],
        "image": [{"base": "/srv/a.qcow2"}, "x", None],
        "qos": [{"cpu_shares": 512}, None],
    }
    names = ["a", "a/b", "..", "12", "x\ny"]
    for key, options in values.items():
        for value in options:
            yield entry(**{key: value})
    for number, name in enumerate(names):
        # several options at once, the first bad one of each differs
        yield dict(entry(name), **dict((key, options[number % len(options)]) for key, options in values.items()))
        yield dict(entry(name), **dict((key, options[0]) for key, options in values.items()))


def _outcome(raw, index, option, named):
    try:
        return _tenant_record(raw, index, None, option, named)  # pylint: disable=protected-access
    except InputError:
        return "refused"


@pytest.mark.parametrize("option", [None, "fabric_vm"])
def test_an_entry_read_without_names_is_the_entry_read_with_them(option):
    # tenant_record reads an entry without naming it in messages and reads it again with the names
    # only where it fails: both readings must take and refuse the same entries, into the same records
    for index, raw in enumerate(_entries()):
        before = copy.deepcopy(raw)
        unnamed, named = _outcome(raw, index, option, False), _outcome(raw, index, option, True)
        assert (unnamed == "refused") == (named == "refused"), raw
        if named != "refused":
            assert dict(unnamed) == dict(named) and (unnamed.index, unnamed.label, unnamed.present) == (named.index, named.label, named.present)
        else:
            with pytest.raises(InputError) as err:
                tenant_record(raw, index, option=option)
            with pytest.raises(InputError) as again:
                _tenant_record(raw, index, None, option, True)  # pylint: disable=protected-access
            assert str(err.value) == str(again.value)
        assert raw == before
