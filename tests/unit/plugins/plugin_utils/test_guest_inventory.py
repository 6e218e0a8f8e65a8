# -*- coding: utf-8 -*-
"""The guest inventory (plugin_utils guest_inventory, the action guest_inventory's logic): add_host
entries with the jump, checked before the first one; the wait's failures and times."""

from __future__ import annotations

import copy
import re
import shlex
import shutil
import subprocess

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.planning import tenant_plan
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.guest_inputs import data_nic_mac
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.tenant_domain_one import TENANT_DOMAIN_OPTIONS
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.record import tenant_records
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.vf_mac import derived_mac
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.guest_inventory import (
    GuestInventoryError, GuestWaitError, guest_hosts, wait_failures, wait_times)
from fakes.guest_tenants import ACCESS, TENANTS  # pylint: disable=import-error


def test_a_data_nic_reaches_the_entry_and_its_mac_the_guest_stage():
    tenant = {"name": "tenant-e", "state": "running", "vfs": 0, "vcpus": 1, "memory_mb": 1024, "image": {"base": "/srv/debian-12.qcow2"},
              "data_nic": {"network": "gpuvirt-data"}, "guest": {"address": "192.168.150.15/24", "rdma_address": "10.20.0.15/24"}}
    entry = tenant_plan.guest_domains([{"name": "tenant-e", "state": "running", "vcpus": 1, "memory_mb": 1024}], [tenant], ACCESS)[0]
    assert entry["data_nic"] == {"network": "gpuvirt-data"}
    assert not ArgumentSpecValidator(dict(TENANT_DOMAIN_OPTIONS, name=dict(type="str", required=True))).validate(entry).error_messages
    (host,) = guest_hosts([tenant], ACCESS, {"name": "h"})
    # the data NIC is the RDMA NIC of a tenant without a VF: its derived MAC, as the tenants stage derives it
    assert host["gpuvirt_guest_vf_mac"] == data_nic_mac("tenant-e")
    given = dict(tenant, data_nic={"network": "gpuvirt-data", "mac": "02:00:00:AA:BB:CC"})
    assert guest_hosts([given], ACCESS, {"name": "h"})[0]["gpuvirt_guest_vf_mac"] == "02:00:00:aa:bb:cc"


def test_guest_hosts_are_the_running_guests_with_a_jump():
    plan = {"placements": {"tenant-a": {"vfs": ["0000:81:00.3", "0000:81:00.2"], "mac": None}}}
    hosts = guest_hosts(TENANTS, ACCESS, {"name": "dgx01", "address": "192.0.2.11", "user": "ops", "port": 2222}, plan)
    assert [h["name"] for h in hosts] == ["tenant-a", "tenant-b"]
    a, b = hosts
    assert a["groups"] == ["gpuvirt_guests"] and a["ansible_host"] == "192.168.150.11" and a["ansible_user"] == "ops"
    assert a["ansible_ssh_common_args"] == "-o ProxyJump=ops@192.0.2.11:2222 -o StrictHostKeyChecking=accept-new"
    assert a["gpuvirt_guest_console_log"] == "/var/log/libvirt/qemu/tenant-a-console.log" and a["gpuvirt_tenant_host"] == "dgx01"
    # the first VF in PCI address order, its MAC derived as the tenants stage derives it
    assert a["gpuvirt_guest_vf_mac"] == derived_mac("tenant-a", 0)
    assert b["gpuvirt_guest_vf_mac"] == "52:54:00:00:00:0b"
    direct = guest_hosts(TENANTS, dict(ACCESS, jump=False), {"name": "dgx01"})
    assert all("ansible_ssh_common_args" not in h for h in direct)
    # a static guest inventory that lists tenant-a keeps it as it says
    assert [h["name"] for h in guest_hosts(TENANTS, ACCESS, {}, None, ["dgx01", "tenant-a"])] == ["tenant-b"]
    # tenant_guests_add_hosts false: the inventory lists the guests itself
    assert guest_hosts(TENANTS, ACCESS, {}, None, [], False) == []
    assert len(guest_hosts(TENANTS, ACCESS, {}, None, [], "true")) == 2


BAD_TENANTS = [
    # (what is wrong, tenants, the record's message excerpt)
    ("not a list", {"tenant-a": {}}, "tenants: expected a list of tenant dicts (gpuvirt_tenants)"),
    ("a guest that is not a dict", [dict(TENANTS[0], guest="192.168.150.11")],
     "tenants[0] (tenant-a): guest: expected a dict (address, rdma_address, hostname, packages, management_mac), got str"),
    ("a loopback guest address", [dict(TENANTS[0], guest={"address": "127.0.0.1/24"})],
     "tenants[0] (tenant-a): guest.address: 127.0.0.1/24 is a loopback address, which no host can hold; give a host address"),
    ("a guest address without its prefix", [dict(TENANTS[0], guest={"address": "192.168.150.11"})],
     "tenants[0] (tenant-a): guest.address: '192.168.150.11' is not an IPv4 address with its prefix"),
    ("a state that is none", [dict(TENANTS[0], state="started")], "tenants[0] (tenant-a): state 'started' is not one of"),
    ("an image that is not a dict", [dict(TENANTS[0], image="/srv/debian-12.qcow2")], "tenants[0] (tenant-a): image: expected a dict"),
    ("a multicast MAC", [dict(TENANTS[1], mac="01:00:5e:00:00:01")], "tenants[0] (tenant-b): mac: 01:00:5e:00:00:01 is a multicast address"),
    ("a data NIC MAC that is none", [dict(TENANTS[0], data_nic={"network": "gpuvirt-data", "mac": "02:00"})],
     "tenants[0] (tenant-a): data_nic.mac: '02:00' is not a MAC address"),
    ("no vCPUs", [dict(TENANTS[0], vcpus=None)], "tenants[0] (tenant-a): vcpus: required"),
    # the rules over the list: also where the tenant that breaks one adds no host itself (tenant-c is only defined)
    ("one address to two guests", TENANTS[:2] + [dict(TENANTS[2], guest={"address": "192.168.150.11/24"})],
     "tenants[2] (tenant-c): guest.address 192.168.150.11 is also the guest.address of tenants[0] (tenant-a)"),
    ("one name twice", TENANTS + [dict(TENANTS[3])], "tenants[4] (tenant-d): name tenant-d is also tenants[3]"),
]


@pytest.mark.parametrize("tenants, words", [case[1:] for case in BAD_TENANTS], ids=[case[0] for case in BAD_TENANTS])
def test_a_bad_tenant_entry_gets_the_records_error_and_no_host(tenants, words):
    """The tenants are read as the tenant records: a bad entry, a guest's or not, is refused with the
    record's message (the tenant, the option and the fix), and no host is added."""
    given = copy.deepcopy(tenants)
    with pytest.raises(GuestInventoryError) as caught:
        guest_hosts(tenants, ACCESS, {"name": "dgx01"})
    message = str(caught.value)
    assert words in message and message.endswith("; no host was added"), message
    assert tenants == given


def test_the_tenants_fields_are_the_records():
    """What an entry holds of a tenant is its record's: the MAC in lower case, the first of a list of
    MACs, the address without its prefix; records are taken as they are."""
    records = tenant_records(TENANTS)
    assert guest_hosts(records, ACCESS, {"name": "dgx01"}) == guest_hosts(TENANTS, ACCESS, {"name": "dgx01"})
    listed = dict(TENANTS[1], mac=["52:54:00:00:00:1B", None])
    (entry,) = guest_hosts([listed], ACCESS, {"name": "dgx01"})
    assert entry["gpuvirt_guest_vf_mac"] == "52:54:00:00:00:1b" and entry["ansible_host"] == "192.168.150.12"
    # a list whose first VF's MAC is derived: the plan's VF gets it as the tenants stage derives it
    plan = {"placements": {"tenant-b": {"vfs": ["0000:81:00.2"], "mac": None}}}
    (entry,) = guest_hosts([dict(listed, mac=[None])], ACCESS, {"name": "dgx01"}, plan)
    assert entry["gpuvirt_guest_vf_mac"] == derived_mac("tenant-b", 0)


@pytest.mark.parametrize("state, runs, added", [
    ("running", ["tenant-a"], True),
    # the default state (present) and running: its domain runs
    (None, ["tenant-a"], True),
    ("present", ["tenant-a"], True),
    # listed as defined: left out although its domain runs
    ("defined", ["tenant-a"], False),
    ("running", [], False),
])
def test_with_the_running_domains_a_guest_is_one_whose_domain_runs(state, runs, added):
    tenant = dict(TENANTS[0], state=state)
    assert bool(guest_hosts([tenant], ACCESS, {"name": "dgx01"}, running=runs)) is added


JUMP_HOST = {"name": "dgx01", "address": "192.0.2.11", "user": "ops", "port": 22}


def one_guest(name="tenant-a"):
    """A tenant that becomes a guest host entry (running, an image, an address)."""
    return [dict(TENANTS[0], name=name)]


def proxy_jump_as_ssh_reads_it(common_args):
    """(user, host, port) of the ProxyJump ssh takes from ``ansible_ssh_common_args`` (split as
    Ansible splits it): ``ssh -G`` prints the options it would use, connecting nowhere, and
    refuses a ProxyJump it cannot parse (ssh_config(5): ``[user@]host[:port]``, an IPv6 address
    in brackets)."""
    ssh = shutil.which("ssh")
    assert ssh, "ssh (openssh-client) is installed by scripts/bootstrap.sh"
    done = subprocess.run([ssh, "-F", "/dev/null", "-G"] + shlex.split(common_args) + ["guest"],
                          capture_output=True, text=True, check=False, timeout=30)
    assert done.returncode == 0, done.stderr
    shown = next(line.split(" ", 1)[1] for line in done.stdout.splitlines() if line.startswith("proxyjump "))
    match = re.match(r"^(?:(?P<user>[^@]+)@)?(?:\[(?P<bracketed>[^\]]+)\]|(?P<host>[^:]+))(?::(?P<port>[0-9]+))?$", shown)
    assert match, shown
    return match.group("user"), match.group("bracketed") or match.group("host"), int(match.group("port") or 22)


@pytest.mark.parametrize("host, jump, read_by_ssh", [
    (JUMP_HOST, "ops@192.0.2.11", ("ops", "192.0.2.11", 22)),
    (dict(JUMP_HOST, port="2222"), "ops@192.0.2.11:2222", ("ops", "192.0.2.11", 2222)),
    # an IPv6 GPU host in brackets, with or without a port (unbracketed, ssh takes its first ':' for the port's)
    (dict(JUMP_HOST, address="2001:db8::11", port=2222), "ops@[2001:db8::11]:2222", ("ops", "2001:db8::11", 2222)),
    (dict(JUMP_HOST, address="2001:db8::11", user=""), "[2001:db8::11]", (None, "2001:db8::11", 22)),
    (dict(JUMP_HOST, address="[2001:db8::11]", port="22"), "ops@[2001:db8::11]", ("ops", "2001:db8::11", 22)),
    # no address: the inventory name
    ({"name": "dgx01.example.org", "user": "", "port": 22}, "dgx01.example.org", (None, "dgx01.example.org", 22)),
])
def test_the_jump_is_one_ssh_takes(host, jump, read_by_ssh):
    entry = guest_hosts(one_guest(), ACCESS, host)[0]
    assert entry["ansible_ssh_common_args"] == "-o ProxyJump=%s -o StrictHostKeyChecking=accept-new" % jump
    assert proxy_jump_as_ssh_reads_it(entry["ansible_ssh_common_args"]) == read_by_ssh


@pytest.mark.parametrize("access, port, jumps", [
    (ACCESS, None, True),
    (dict(ACCESS, port=2222), 2222, True),
    (dict(ACCESS, port="2222"), 2222, True),
    (dict(ACCESS, port=65535, jump="yes"), 65535, True),
    # a string read as Ansible's bool options read it, never as "a non-empty string is true"
    (dict(ACCESS, jump="false"), None, False),
    (dict(ACCESS, jump="no"), None, False),
    (dict(ACCESS, jump=0), None, False),
    (dict(ACCESS, jump=None), None, True),
])
def test_ports_are_integers_and_jump_a_strict_boolean(access, port, jumps):
    entry = guest_hosts(one_guest(), access, JUMP_HOST)[0]
    assert entry.get("ansible_port") == port
    assert ("ansible_ssh_common_args" in entry) is jumps


BAD_GUEST_INPUTS = [
    # (what is wrong, tenants, access, host, known, add, message excerpt)
    ("a tenant named localhost", one_guest("localhost"), ACCESS, JUMP_HOST, None, True,
     "tenant localhost: a name Ansible keeps for the controller (127.0.0.1, localhost, ::1)"),
    ("a tenant named localhost the inventory lists", one_guest("localhost"), ACCESS, JUMP_HOST, ["dgx01", "localhost"], True,
     "tenant localhost: a name Ansible keeps for the controller"),
    ("a tenant named 127.0.0.1", one_guest("127.0.0.1"), ACCESS, JUMP_HOST, None, True, "tenant 127.0.0.1: a name Ansible keeps"),
    ("a tenant named all", one_guest("all"), ACCESS, JUMP_HOST, None, True, "tenant all: the name of a group (all, ungrouped"),
    ("a tenant named ungrouped", one_guest("ungrouped"), ACCESS, JUMP_HOST, None, True, "tenant ungrouped: the name of a group"),
    ("a tenant named as the guests' group", one_guest("gpuvirt_guests"), ACCESS, JUMP_HOST, None, True,
     "tenant gpuvirt_guests: the name of a group"),
    ("a tenant name with a blank", one_guest("tenant a"), ACCESS, JUMP_HOST, None, True,
     "tenant 'tenant a': not an inventory host name"),
    ("a tenant name with a port", one_guest("tenant-a:22"), ACCESS, JUMP_HOST, None, True, "tenant 'tenant-a:22': not an inventory host name"),
    ("a tenant name with a range", one_guest("web[1:3]"), ACCESS, JUMP_HOST, None, True, "tenant 'web[1:3]': not an inventory host name"),
    ("a tenant name with a comma", one_guest("a,b"), ACCESS, JUMP_HOST, None, True, "tenant 'a,b': not an inventory host name"),
    ("a tenant name starting with '-'", one_guest("-a"), ACCESS, JUMP_HOST, None, True, "tenant '-a': not an inventory host name"),
    ("access port with a shell word", one_guest(), dict(ACCESS, port="22; x"), JUMP_HOST, None, True,
     "access.port (gpuvirt_guest_access.port, the guests' SSH port): '22; x' is not a TCP port; give a whole number from 1 to 65535"),
    ("access port a service name", one_guest(), dict(ACCESS, port="ssh"), JUMP_HOST, None, True, "access.port (gpuvirt_guest_access.port, "
     "the guests' SSH port): 'ssh' is not a TCP port"),
    ("access port above 65535", one_guest(), dict(ACCESS, port=70000), JUMP_HOST, None, True, "70000 is not a TCP port"),
    ("access port 0", one_guest(), dict(ACCESS, port=0), JUMP_HOST, None, True, "access.port (gpuvirt_guest_access.port, the guests' SSH "
     "port): 0 is not a TCP port"),
    ("access port a boolean", one_guest(), dict(ACCESS, port=True), JUMP_HOST, None, True, "True is not a TCP port"),
    ("access port a fraction", one_guest(), dict(ACCESS, port=22.5), JUMP_HOST, None, True, "22.5 is not a TCP port"),
    ("jump host port with a shell word", one_guest(), ACCESS, dict(JUMP_HOST, port="22; x"), None, True,
     "host.port: '22; x' is not a TCP port; give a whole number from 1 to 65535"),
    ("jump host port above 65535", one_guest(), ACCESS, dict(JUMP_HOST, port=70000), None, True, "host.port: 70000 is not a TCP port"),
    ("jump not a boolean", one_guest(), dict(ACCESS, jump="maybe"), JUMP_HOST, None, True,
     "access.jump (gpuvirt_guest_access.jump): 'maybe' is not a boolean; give true or false"),
    ("jump a list", one_guest(), dict(ACCESS, jump=[]), JUMP_HOST, None, True, "access.jump (gpuvirt_guest_access.jump): [] is not a boolean"),
    ("add not a boolean", one_guest(), ACCESS, JUMP_HOST, None, "maybe", "add (tenant_guests_add_hosts): 'maybe' is not a boolean"),
    ("jump host address with options after a blank", one_guest(), ACCESS, dict(JUMP_HOST, address="192.0.2.11 -o ProxyCommand=x"), None,
     True, "host.address: '192.0.2.11 -o ProxyCommand=x' is not a host name or an IP address"),
    ("jump host address with a second jump", one_guest(), ACCESS, dict(JUMP_HOST, address="192.0.2.11,evil"), None, True,
     "host.address: '192.0.2.11,evil' is not a host name or an IP address"),
    ("jump host address with a port", one_guest(), ACCESS, dict(JUMP_HOST, address="192.0.2.11:2222"), None, True,
     "without a port (that is host.port)"),
    ("jump host name with a blank", one_guest(), ACCESS, {"name": "dgx 01"}, None, True, "host.name: 'dgx 01' is not a host name"),
    ("jump host user with a blank", one_guest(), ACCESS, dict(JUMP_HOST, user="ops -o X=y"), None, True,
     "host.user: 'ops -o X=y' cannot be the user of the SSH jump"),
]


@pytest.mark.parametrize("tenants, access, host, known, add, words",
                         [case[1:] for case in BAD_GUEST_INPUTS], ids=[case[0] for case in BAD_GUEST_INPUTS])
def test_guest_hosts_refuses_a_bad_input_naming_it_and_the_fix(tenants, access, host, known, add, words):
    inputs = copy.deepcopy((tenants, access, host, known))
    with pytest.raises(GuestInventoryError) as caught:
        guest_hosts(tenants, access, host, None, known, add)
    message = str(caught.value)
    assert message.endswith("; no host was added"), message
    assert words in message, message
    assert "\n" not in message
    assert (tenants, access, host, known) == inputs


@pytest.mark.parametrize("tenant", [
    # not a guest to add (not running, no image, no address): its name is the tenants stage's to check
    dict(TENANTS[0], name="localhost", state="defined"),
    dict(TENANTS[3], name="all"),
])
def test_a_tenant_that_adds_no_host_is_not_checked_as_one(tenant):
    assert guest_hosts([tenant], ACCESS, JUMP_HOST) == []


def test_wait_failures_name_the_tenant_and_its_console_log():
    hosts = guest_hosts(TENANTS, ACCESS, {"name": "dgx01", "address": "192.0.2.11"})
    results = [{"item": hosts[0], "failed": True, "elapsed": 300, "msg": "Timeout when waiting for search string OpenSSH in 192.168.150.11:22"},
               {"item": hosts[1], "failed": False, "elapsed": 12, "port": 22}]
    assert wait_failures({"results": results}) == [
        "tenant tenant-a did not answer SSH on 192.168.150.11:22 within 300s (Timeout when waiting for search string OpenSSH in "
        "192.168.150.11:22); read its console log /var/log/libvirt/qemu/tenant-a-console.log on dgx01"]
    assert wait_failures({"results": results[1:]}) == []
    # named with the GPU host given, else each entry's
    assert wait_failures({"results": results}, "gpu-07")[0].endswith("tenant-a-console.log on gpu-07")
    # with failed_when false the timeout has no failed flag, only no port
    quiet = [dict(results[0], failed=False, failed_when_result=False)]
    assert len(wait_failures({"results": quiet})) == 1
    assert wait_failures({"results": [{"item": hosts[0], "skipped": True}]}) == []
    # a wait skipped as a whole (a preview) has no results
    assert wait_failures({"skipped": True, "changed": False}) == []


HOSTS = guest_hosts(TENANTS, ACCESS, {"name": "dgx01", "address": "192.0.2.11"})


@pytest.mark.parametrize("results, times", [
    # an answer and a timeout (wait_for's result has elapsed either way)
    ([{"item": HOSTS[0], "elapsed": 12, "port": 22, "changed": False},
      {"item": HOSTS[1], "elapsed": 600, "failed": False, "failed_when_result": False,
       "msg": "Timeout when waiting for search string OpenSSH in 192.168.150.12:22"}],
     [["tenant-a", 12], ["tenant-b", 600]]),
    # a result without elapsed reads ?
    ([{"item": HOSTS[1], "skipped": True}], [["tenant-b", "?"]]),
    ([], []),
])
def test_guest_wait_times_pair_each_guest_with_its_seconds(results, times):
    assert wait_times({"results": results, "changed": False}) == times


@pytest.mark.parametrize("waited, words", [
    ([], "waited: expected the looped wait's registered result \\(a dict\\), got list"),
    ({"results": "tenant-a"}, "waited.results: expected the results of the looped wait \\(a list\\), got str"),
    ({"results": [{"elapsed": 3}]}, "waited: each result is a wait over a guest_hosts entry"),
    ({"results": ["tenant-a"]}, "waited: each result is a wait over a guest_hosts entry"),
])
def test_guest_wait_times_name_a_bad_input(waited, words):
    with pytest.raises(GuestWaitError, match=words):
        wait_times(waited)
    if isinstance(waited, list) or not isinstance(waited["results"], list):
        with pytest.raises(GuestWaitError, match=words):
            wait_failures(waited)


@pytest.mark.parametrize("level, gdr", [("PIX", "PIX"), ("PXB", "PXB"), ("PHB", "PHB"), ("NODE", "PHB"), ("SYS", "SYS"), (None, None)])
def test_a_tenant_guest_gets_the_nccl_settings_of_a_vm(level, gdr):
    """The guest stage's NCCL settings for a VM: GPUDirect RDMA as far as the plan's level
    between the tenant's GPUs and VFs on the host, as NCCL_NET_GDR_LEVEL names it, and relaxed ordering on."""
    plan = {"placements": {"tenant-a": {"gpus": ["0000:10:00.0"], "vfs": ["0000:81:00.2"], "mac": None, "pcie_affinity": level}}}
    a = guest_hosts(TENANTS, ACCESS, {"name": "dgx01"}, plan)[0]
    assert a.get("gpuvirt_guest_gdr_level") == gdr and a["gpuvirt_guest_relaxed_ordering"] == "1"
    # a tenant without GPUs has no GPU-to-VF level; one without VFs no RDMA NIC to set
    plan["placements"]["tenant-a"]["gpus"] = []
    assert "gpuvirt_guest_gdr_level" not in guest_hosts(TENANTS, ACCESS, {"name": "dgx01"}, plan)[0]
    b = guest_hosts(TENANTS, ACCESS, {"name": "dgx01"}, plan)[1]
    assert "gpuvirt_guest_relaxed_ordering" not in b and "gpuvirt_guest_gdr_level" not in b


def test_a_tenant_guest_gets_the_hosts_link_facts_for_its_nccl_topology_file():
    """The tenants stage's pci_links reach the guest with GPUs and VFs as gpuvirt_guest_pci_links (guest_rdma's topo_links)."""
    gen4 = {"link_speed": "16.0 GT/s PCIe", "link_width": 16}
    links = {"tenant-a": {"level": "PIX", "gpu": gen4, "nic": gen4, "switch": gen4, "missing": None}}
    plan = {"placements": {"tenant-a": {"gpus": ["0000:10:00.0"], "vfs": ["0000:81:00.2"], "mac": None, "pcie_affinity": "PIX"}}}
    a, b = guest_hosts(TENANTS, ACCESS, {"name": "dgx01"}, plan, None, True, links)[:2]
    assert a["gpuvirt_guest_pci_links"] == links["tenant-a"] and "gpuvirt_guest_pci_links" not in b
    # a tenant whose GPU is gone: the facts say so, and its guest stage removes the file it wrote
    plan["placements"]["tenant-a"]["gpus"] = []
    a = guest_hosts(TENANTS, ACCESS, {"name": "dgx01"}, plan, None, True, {})[0]
    assert a["gpuvirt_guest_pci_links"] == {"missing": "the plan gives the tenant no GPU on its host"}
    plan["placements"]["tenant-a"]["gpus"] = ["0000:10:00.0"]
    # without the stage's links (an older stage result): nothing, and the guest stage says there is no file
    assert "gpuvirt_guest_pci_links" not in guest_hosts(TENANTS, ACCESS, {"name": "dgx01"}, plan)[0]
    with pytest.raises(GuestInventoryError, match="links .the tenants stage's pci_links. must be a dict"):
        guest_hosts(TENANTS, ACCESS, {"name": "dgx01"}, plan, None, True, ["tenant-a"])
