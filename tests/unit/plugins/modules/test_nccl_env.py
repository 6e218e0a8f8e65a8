# -*- coding: utf-8 -*-
"""nccl_env end to end over fake GID tables built from real show_gids captures
(tests/fixtures/rdma) and from the lab's verified soft-RoCE layout (docs/DESIGN: rxe GIDs are
RoCE v2 only; a global IPv6 address added before IPv4 moves the IPv4 GID from 1 to 2)."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.modules import nccl_env

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host

from conftest import FIXTURES, run_module  # pylint: disable=import-error
from fakes.commands import RecordedCommands, Reply  # pylint: disable=import-error
from fakes.interrupt import InterruptingHost, converges_from_every_interruption, tree_state  # pylint: disable=import-error
from fakes.rdma import add_port, read_fixture, tree_from_show_gids  # pylint: disable=import-error

CX6 = "show_gids_mlx5_0_connectx6_two-linklocal-ipv6_plus-ipv4.txt"
H100 = "show_gids_h100-host_bare-metal_gid0-3_mlx5_0-1_partial.txt"

EXISTING = "# written by the image build\nNCCL_DEBUG=WARN\nNCCL_IB_GID_INDEX=3\n"


def nccl(root, args, commands=None, **kwargs):
    """The module on a Host over the tree at ``root``; /etc/nccl.conf and the GID tables are under it."""
    return run_module(nccl_env.main, args, host=Host(str(root), commands=commands or RecordedCommands()), **kwargs)


@pytest.fixture
def cx6(tmp_path):
    root = tmp_path / "root"
    tree_from_show_gids(root, read_fixture("rdma", CX6))
    conf = root / "etc" / "nccl.conf"
    conf.parent.mkdir()
    conf.write_text(EXISTING)
    return {"root": str(root), "path": "/etc/nccl.conf", "real": str(conf)}


def test_discover_writes_the_ipv4_roce_v2_index_and_keeps_other_lines(cx6):
    args = {"path": cx6["path"], "ib_hca": ["mlx5_0:1"], "socket_ifname": "ens1f0",
            "net_gdr_level": "PHB", "gid_index": "discover"}
    result = nccl(cx6["root"], args, diff=True)
    assert not result.get("failed"), result
    assert result["changed"] is True and result["gid_index"] == 5
    text = open(cx6["real"], encoding="utf-8").read()
    assert text == ("# written by the image build\nNCCL_DEBUG=WARN\nNCCL_IB_GID_INDEX=5\n"
                    "NCCL_IB_HCA=mlx5_0:1\nNCCL_NET_GDR_LEVEL=PHB\nNCCL_SOCKET_IFNAME=ens1f0\n")
    assert result["diff"] == [{"before": EXISTING, "after": text, "before_header": cx6["path"], "after_header": cx6["path"]}]
    again = nccl(cx6["root"], args)
    assert again["changed"] is False and again["gid_index"] == 5


def test_check_mode_writes_nothing(cx6):
    result = nccl(cx6["root"], {"path": cx6["path"], "gid_index": "discover"}, check_mode=True)
    assert result["changed"] is True and result["gid_index"] == 5
    assert open(cx6["real"], encoding="utf-8").read() == EXISTING


def test_explicit_index_refused_with_the_table_nothing_written(cx6):
    before = os.stat(cx6["real"])
    result = nccl(cx6["root"], {"path": cx6["path"], "gid_index": "3", "ib_hca": ["mlx5_0"]})
    assert result["failed"]
    assert "gid_index 3 refused" in result["msg"] and "172.19.0.60" in result["msg"]
    assert "use gid_index: 5" in result["msg"]
    assert open(cx6["real"], encoding="utf-8").read() == EXISTING
    assert os.stat(cx6["real"]).st_mtime_ns == before.st_mtime_ns


def test_auto_pins_family_range_version_and_drops_the_index(cx6):
    args = {"path": cx6["path"], "gid_index": "auto", "addr_range": "172.19.0.0/16",
            "nccl_version": "2.23.4", "extra": {"NCCL_IB_TC": 106, "NCCL_DEBUG": None}}
    result = nccl(cx6["root"], args)
    assert result["gid_index"] == "auto"
    assert open(cx6["real"], encoding="utf-8").read() == (
        "# written by the image build\nNCCL_IB_ADDR_FAMILY=AF_INET\nNCCL_IB_ADDR_RANGE=172.19.0.0/16\n"
        "NCCL_IB_ROCE_VERSION_NUM=2\nNCCL_IB_TC=106\n")
    assert result["removed"] == ["NCCL_DEBUG", "NCCL_IB_GID_INDEX"]
    assert nccl(cx6["root"], args)["changed"] is False


def test_new_file_in_a_new_directory(tmp_path):
    root = tmp_path / "root"
    tree_from_show_gids(root, read_fixture("rdma", H100))
    path = root / "etc" / "nccl.conf.d" / "tenant-a.conf"
    result = nccl(root, {"path": "/etc/nccl.conf.d/tenant-a.conf", "ib_hca": ["mlx5_0:1", "mlx5_1:1"]})
    assert result["changed"] is True and result["path"] == "/etc/nccl.conf.d/tenant-a.conf"
    assert path.read_text() == "NCCL_IB_GID_INDEX=3\nNCCL_IB_HCA=mlx5_0:1,mlx5_1:1\n"


@pytest.mark.parametrize("tenant, rows, index", [
    # rxe on a NIC: link-local, then IPv4
    ("a", [(0, "fe80:0000:0000:0000:5054:00ff:fe00:8300", "v2", "ens3"),
           (1, "0000:0000:0000:0000:0000:ffff:c0a8:530a", "v2", "ens3")], 1),
    # rxe on a veth that got a global IPv6 address before its IPv4 one
    ("b", [(0, "fe80:0000:0000:0000:7c1e:52ff:fe3a:0b01", "v2", "vB"),
           (1, "fd00:000b:0000:0000:0000:0000:0000:0010", "v2", "vB"),
           (2, "0000:0000:0000:0000:0000:ffff:c0a8:540a", "v2", "vB")], 2),
])
def test_soft_roce_tenants(tmp_path, tenant, rows, index):
    root = tmp_path / "root"
    add_port(root, "rxe" + tenant.upper(), 1, rows)
    path = root / ("tenant-%s.conf" % tenant)
    result = nccl(root, {"path": "/tenant-%s.conf" % tenant, "ib_hca": ["rxe%s:1" % tenant.upper()]})
    assert result["gid_index"] == index
    other = {"path": "/tenant-%s.conf" % tenant, "gid_index": str(3 - index), "ib_hca": ["rxe%s:1" % tenant.upper()]}
    refused = nccl(root, other)
    # the other tenant's index: an empty slot on tenant a, a global IPv6 GID on tenant b
    assert refused["failed"] and "gid_index %d refused" % (3 - index) in refused["msg"]
    assert ("has no GID at index 2" if tenant == "a" else "index 1 is RoCE v2 fd00:000b") in refused["msg"]
    assert "use gid_index: %d" % index in refused["msg"]
    assert path.read_text() == "NCCL_IB_GID_INDEX=%d\nNCCL_IB_HCA=rxe%s:1\n" % (index, tenant.upper())


@pytest.mark.parametrize("args, match", [
    ({"ib_hca": ["mlx5_7"]}, "no RDMA device mlx5_7"),
    ({"ib_hca": ["mlx5_0:2"]}, "has no port 2"),
    ({"gid_index": "x"}, "gid_index"),
    ({"extra": {"NCCL_IB_GID_INDEX": 1}}, "managed by its own option"),
    ({"extra": {"bad key": 1}}, "not an environment variable name"),
    ({"gid_index": "auto", "addr_range": "172.19.0.0/16", "nccl_version": "2.18.1"}, "NCCL >= 2.21"),
])
def test_bad_inputs_change_nothing(cx6, args, match):
    result = nccl(cx6["root"], dict({"path": cx6["path"]}, **args))
    assert result["failed"] and match in result["msg"]
    assert open(cx6["real"], encoding="utf-8").read() == EXISTING


# NCCL_IB_HCA as NCCL's documentation gives it: [^][=]DEVICE[:PORT],... (see nccl_conf.parse_hca)
@pytest.mark.parametrize("ib_hca, checked", [
    (["=mlx5_0:1"], [("mlx5_0", 1)]),
    (["=mlx5_0:1", "mlx5_1:1"], [("mlx5_0", 1), ("mlx5_1", 1)]),
    (["=mlx5_0:1,mlx5_1:1"], [("mlx5_0", 1), ("mlx5_1", 1)]),
    (["^=mlx5_1"], [("mlx5_0", 1)]),
    (["^mlx5_0:1"], [("mlx5_1", 1)]),
    (["mlx5"], [("mlx5_0", 1), ("mlx5_1", 1)]),
])
def test_ib_hca_in_nccl_syntax_is_written_as_given(tmp_path, ib_hca, checked):
    root = tmp_path / "root"
    tree_from_show_gids(root, read_fixture("rdma", H100))
    result = nccl(root, {"ib_hca": ib_hca})
    assert not result.get("failed"), result
    assert sorted(set((r["device"], r["port"]) for r in result["gid_table"])) == checked
    assert result["settings"]["NCCL_IB_HCA"] == ",".join(ib_hca)
    assert (root / "etc" / "nccl.conf").read_text() == "NCCL_IB_GID_INDEX=3\nNCCL_IB_HCA=%s\n" % ",".join(ib_hca)


@pytest.mark.parametrize("ib_hca, match", [
    (["mlx5_0", "^mlx5_1"], "'^mlx5_1' is not DEVICE or DEVICE:PORT"),
    (["=^mlx5_0"], "'^mlx5_0' is not DEVICE or DEVICE:PORT"),
    (["mlx5_0:x"], "'mlx5_0:x' is not DEVICE or DEVICE:PORT"),
    (["mlx5_0,,mlx5_1"], "'' is not DEVICE or DEVICE:PORT"),
    (["=mlx5"], "no RDMA device mlx5 on this host"),
    (["=mlx5_0:2"], "mlx5_0 has no port 2"),
])
def test_bad_ib_hca_is_refused_naming_the_entry(tmp_path, ib_hca, match):
    root = tmp_path / "root"
    tree_from_show_gids(root, read_fixture("rdma", H100))
    result = nccl(root, {"ib_hca": ib_hca})
    assert result["failed"] and match in result["msg"] and result["changed"] is False
    assert not (root / "etc" / "nccl.conf").exists()


def test_auto_derives_the_range_with_ip_on_the_host(tmp_path):
    """The range of the RoCE netdev, from `ip -j -4 addr` (the real capture of the lab VM's eth0)."""
    root = tmp_path / "root"
    add_port(root, "rxe0", 1, [(0, "fe80:0000:0000:0000:00fc:00ff:fe00:0001", "v2", "eth0"),
                               (1, "0000:0000:0000:0000:0000:ffff:c000:0202", "v2", "eth0")])
    with open(os.path.join(FIXTURES, "host_usage", "ip-j-addr_debian12_virtio-eth0.json"), encoding="utf-8") as handle:
        capture = handle.read()
    commands = RecordedCommands(replies=[Reply(["ip", "-j", "-4", "addr", "show", "dev", "eth0"], out=capture)])
    result = nccl(root, {"gid_index": "auto", "ib_hca": ["=rxe0:1"]}, commands=commands)
    assert not result.get("failed"), result
    assert result["settings"]["NCCL_IB_ADDR_RANGE"] == "192.0.2.0/24"
    assert commands.ran("ip") == [["ip", "-j", "-4", "addr", "show", "dev", "eth0"]]


# -- the hosts block in the same call ------------------------------------------------------

HOSTS = "127.0.0.1\tlocalhost\n::1     localhost ip6-localhost ip6-loopback\n"
ENTRIES = [{"ip": "192.168.83.10", "names": ["tenant-a-rdma"]}, {"ip": "192.168.84.10", "names": ["tenant-b-rdma"]}]
# the block the role's blockinfile task wrote before this module took it over (same marker)
BLOCK = ("# BEGIN gpuvirt.tenancy guest_rdma\n192.168.83.10 tenant-a-rdma\n192.168.84.10 tenant-b-rdma\n"
         "# END gpuvirt.tenancy guest_rdma\n")
CONVERGED_CONF = "# written by the image build\nNCCL_DEBUG=WARN\nNCCL_IB_GID_INDEX=5\nNCCL_IB_HCA=mlx5_0:1\n"


@pytest.fixture
def guest(cx6):
    hosts = os.path.join(cx6["root"], "etc", "hosts")
    with open(hosts, "w", encoding="utf-8") as handle:
        handle.write(HOSTS)
    return dict(cx6, hosts=hosts, args={"path": cx6["path"], "ib_hca": ["mlx5_0:1"], "hosts_entries": ENTRIES})


def read(path):
    with open(path, encoding="utf-8", newline="") as handle:
        return handle.read()


def test_nccl_and_hosts_in_one_call(guest):
    result = nccl(guest["root"], guest["args"], diff=True)
    assert not result.get("failed"), result
    assert result["changed"] is True and result["gid_index"] == 5
    assert read(guest["real"]) == CONVERGED_CONF
    assert read(guest["hosts"]) == HOSTS + BLOCK
    assert result["hosts_path"] == "/etc/hosts"
    assert result["hosts_lines"] == ["192.168.83.10 tenant-a-rdma", "192.168.84.10 tenant-b-rdma"]
    assert result["diff"] == [
        {"before_header": "/etc/nccl.conf", "after_header": "/etc/nccl.conf", "before": EXISTING, "after": CONVERGED_CONF},
        {"before_header": "/etc/hosts", "after_header": "/etc/hosts", "before": HOSTS, "after": HOSTS + BLOCK}]
    again = nccl(guest["root"], guest["args"])
    assert again["changed"] is False and "backup_file" not in again


@pytest.mark.parametrize("conf, hosts, changed", [
    # both files as the role's earlier three calls left them: nothing to do
    (CONVERGED_CONF, HOSTS + BLOCK, False),
    # only one of the two differs: changed, and only that file is written
    (EXISTING, HOSTS + BLOCK, True),
    (CONVERGED_CONF, HOSTS, True),
    (CONVERGED_CONF, HOSTS + BLOCK.replace("192.168.84.10", "192.168.84.11"), True),
])
def test_changed_only_for_a_file_that_differs(guest, conf, hosts, changed):
    for path, text in ((guest["real"], conf), (guest["hosts"], hosts)):
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    stat = dict((path, os.stat(path).st_mtime_ns) for path in (guest["real"], guest["hosts"]))
    result = nccl(guest["root"], guest["args"])
    assert result["changed"] is changed
    assert read(guest["real"]) == CONVERGED_CONF and read(guest["hosts"]) == HOSTS + BLOCK
    for path, text in ((guest["real"], conf), (guest["hosts"], hosts)):
        if text == read(path):
            assert os.stat(path).st_mtime_ns == stat[path], path


def test_check_mode_writes_neither_file(guest):
    result = nccl(guest["root"], guest["args"], check_mode=True, diff=True)
    assert result["changed"] is True
    assert [entry["after"] for entry in result["diff"]] == [CONVERGED_CONF, HOSTS + BLOCK]
    assert read(guest["real"]) == EXISTING and read(guest["hosts"]) == HOSTS


@pytest.mark.parametrize("entries, before, after", [
    # no entries: the block is removed, the rest kept
    ([], HOSTS + BLOCK, HOSTS),
    ([], HOSTS, HOSTS),
    # not given: the hosts file is not read or changed, even with a block in it
    (None, HOSTS + BLOCK, HOSTS + BLOCK),
    (None, "not UTF-8 \xe9", "not UTF-8 \xe9"),
])
def test_empty_or_absent_entries(guest, entries, before, after):
    with open(guest["hosts"], "w", encoding="latin-1") as handle:
        handle.write(before)
    args = dict(guest["args"], hosts_entries=entries)
    result = nccl(guest["root"], args)
    assert not result.get("failed"), result
    with open(guest["hosts"], encoding="latin-1") as handle:
        assert handle.read() == after
    assert ("hosts_path" in result) is (entries is not None)


@pytest.mark.parametrize("entries, created", [(ENTRIES, BLOCK), ([], None)])
def test_missing_hosts_file(guest, entries, created):
    os.unlink(guest["hosts"])
    result = nccl(guest["root"], dict(guest["args"], hosts_entries=entries))
    assert not result.get("failed"), result
    assert (read(guest["hosts"]) if os.path.exists(guest["hosts"]) else None) == created


def test_backup_of_each_file(guest):
    result = nccl(guest["root"], dict(guest["args"], backup=True))
    assert result["backup_file"].startswith("/etc/nccl.conf.") and result["hosts_backup_file"].startswith("/etc/hosts.")
    assert read(os.path.join(guest["root"], result["hosts_backup_file"].lstrip("/"))) == HOSTS


def test_other_marker_and_hosts_path(guest):
    other = os.path.join(guest["root"], "etc", "hosts.rdma")
    with open(other, "w", encoding="utf-8") as handle:
        handle.write(HOSTS)
    args = dict(guest["args"], hosts_path="/etc/hosts.rdma", hosts_marker="# {mark} site rdma names",
                hosts_entries=ENTRIES[:1])
    assert nccl(guest["root"], args)["changed"] is True
    assert read(other) == HOSTS + "# BEGIN site rdma names\n192.168.83.10 tenant-a-rdma\n# END site rdma names\n"
    assert read(guest["hosts"]) == HOSTS


@pytest.mark.parametrize("args, match", [
    ({"hosts_entries": [{"ip": "192.168.83.300", "names": ["tenant-a-rdma"]}]},
     "hosts_entries[0].ip: '192.168.83.300' is not an IPv4 or IPv6 address"),
    ({"hosts_entries": [{"ip": "192.168.83.10", "names": ["tenant a"]}]}, "hosts_entries[0].names: 'tenant a' is not a host name"),
    ({"hosts_entries": [{"ip": "192.168.83.10", "names": ["a\n10.0.0.1 b"]}]}, "control character"),
    ({"hosts_entries": [{"ip": "192.168.83.10", "names": []}]}, "give at least one name"),
    ({"hosts_entries": ENTRIES + [{"ip": "10.0.0.1", "names": ["tenant-a-rdma"]}]}, "tenant-a-rdma is given twice"),
    ({"hosts_entries": [{"ip": "192.168.83.10"}]}, "names"),
    ({"hosts_marker": "# no mark"}, "hosts_marker: '# no mark' has no {mark}"),
    ({"hosts_path": "/etc"}, "hosts_path: /etc is a directory"),
    ({"hosts_path": "/nowhere/hosts"}, "hosts_path: the directory of /nowhere/hosts does not exist"),
    # a bad NCCL input leaves the hosts file alone too
    ({"gid_index": "3"}, "gid_index 3 refused"),
    # two paths for one file, or the NCCL file made inside the hosts file's path: the second write would undo the first
    ({"hosts_path": "/etc/nccl.conf"}, "path and hosts_path: /etc/nccl.conf and /etc/nccl.conf are the same file"),
    ({"path": "/etc/hosts"}, "are the same file"),
    ({"path": "/etc/new/nccl.conf", "hosts_path": "/etc/new"}, "path: /etc/new/nccl.conf would be made inside /etc/new"),
])
def test_bad_input_changes_neither_file(guest, args, match):
    stat = [os.stat(path).st_mtime_ns for path in (guest["real"], guest["hosts"])]
    result = nccl(guest["root"], dict(guest["args"], **args))
    assert result["failed"] and match in result["msg"] and result.get("changed", False) is False, result
    assert read(guest["real"]) == EXISTING and read(guest["hosts"]) == HOSTS
    assert [os.stat(path).st_mtime_ns for path in (guest["real"], guest["hosts"])] == stat
    assert sorted(os.listdir(os.path.join(guest["root"], "etc"))) == ["hosts", "nccl.conf"]


def test_hosts_file_not_utf8_changes_neither_file(guest):
    with open(guest["hosts"], "wb") as handle:
        handle.write(b"127.0.0.1 caf\xe9\n")
    result = nccl(guest["root"], guest["args"])
    assert result["failed"] and "hosts_path: /etc/hosts is not UTF-8" in result["msg"]
    assert read(guest["real"]) == EXISTING


def test_converges_from_an_interruption_between_the_two_files(tmp_path):
    """Two writes (nccl.conf, then /etc/hosts): stopped before either, the next run finishes."""
    def build(name):
        root = tmp_path / name
        tree_from_show_gids(root, read_fixture("rdma", CX6))
        (root / "etc").mkdir()
        (root / "etc" / "nccl.conf").write_text(EXISTING)
        (root / "etc" / "hosts").write_text(HOSTS)
        return str(root)

    def run(root, countdown):
        host = InterruptingHost(root, countdown, commands=RecordedCommands())
        return run_module(nccl_env.main, {"ib_hca": ["mlx5_0:1"], "hosts_entries": ENTRIES}, host=host)

    assert converges_from_every_interruption(build, run, tree_state) == 2


def test_ib_hca_given_in_extra_is_checked_and_written_as_ib_hca(cx6):
    args = {"path": cx6["path"], "ib_hca": [], "extra": {"NCCL_IB_HCA": " =mlx5_0:1"}, "gid_index": "discover"}
    result = nccl(cx6["root"], args)
    assert not result.get("failed"), result
    assert result["settings"]["NCCL_IB_HCA"] == "=mlx5_0:1"
    assert "NCCL_IB_HCA==mlx5_0:1\n" in open(cx6["real"], encoding="utf-8").read()
    refused = nccl(cx6["root"], dict(args, extra={"NCCL_IB_HCA": "mlx5_0:7"}))
    assert refused["failed"] and "extra.NCCL_IB_HCA: mlx5_0 has no port 7" in refused["msg"], refused


def test_a_crlf_nccl_conf_gets_its_new_lines_in_lf(cx6):
    with open(cx6["real"], "w", encoding="utf-8", newline="") as handle:
        handle.write(EXISTING.replace("\n", "\r\n"))
    result = nccl(cx6["root"], {"path": cx6["path"], "ib_hca": [" mlx5_0:1"], "gid_index": "discover"})
    assert not result.get("failed"), result
    with open(cx6["real"], encoding="utf-8", newline="") as handle:
        text = handle.read()
    assert text == "# written by the image build\r\nNCCL_DEBUG=WARN\r\nNCCL_IB_GID_INDEX=5\nNCCL_IB_HCA=mlx5_0:1\n"


# --------------------------------------------------------------------------- NCCL in a tenant VM
def test_relaxed_ordering_is_written_and_checked(cx6):
    args = {"path": cx6["path"], "gid_index": "discover", "ib_pci_relaxed_ordering": "1", "net_gdr_level": "PXB"}
    result = nccl(cx6["root"], args)
    assert not result.get("failed"), result
    assert result["settings"]["NCCL_IB_PCI_RELAXED_ORDERING"] == "1" and result["settings"]["NCCL_NET_GDR_LEVEL"] == "PXB"
    assert "NCCL_IB_PCI_RELAXED_ORDERING=1\n" in open(cx6["real"], encoding="utf-8").read()
    assert not nccl(cx6["root"], args)["changed"]


@pytest.mark.parametrize("args, match", [
    ({"ib_pci_relaxed_ordering": "on"}, "ib_pci_relaxed_ordering: 'on' is not a value NCCL_IB_PCI_RELAXED_ORDERING takes"),
    ({"ib_pci_relaxed_ordering": "1", "extra": {"NCCL_IB_PCI_RELAXED_ORDERING": 2}}, "managed by its own option"),
])
def test_bad_relaxed_ordering_changes_nothing(cx6, args, match):
    result = nccl(cx6["root"], dict({"path": cx6["path"]}, **args))
    assert result["failed"] and match in result["msg"], result
    assert open(cx6["real"], encoding="utf-8").read() == EXISTING


def test_the_gpudirect_check_says_what_is_missing_and_fails_nothing(cx6):
    """A guest without the NVIDIA driver (the lab's): said, not checked; with the driver and no peer-memory module on a
    kernel before RDMA DMA-BUF: named, with the fix; with nvidia-peermem loaded (NCCL's own test file): nothing said."""
    root = cx6["root"]
    args = {"path": cx6["path"], "gid_index": "discover"}
    result = nccl(root, args)
    assert not result.get("failed") and result["gpudirect"]["status"] == "no_driver"
    assert any(w.startswith("GPUDirect RDMA not checked: no NVIDIA driver") for w in result["warnings"]), result
    for path, text in (("sys/module/nvidia/version", "535.183.01\n"), ("proc/sys/kernel/osrelease", "5.4.0-190-generic\n")):
        os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(root, path), "w", encoding="utf-8") as handle:
            handle.write(text)
    result = nccl(root, args)
    assert result["gpudirect"]["status"] == "missing" and not result.get("failed")
    assert any("no GPUDirect RDMA: nvidia-peermem is not loaded" in w and "modprobe nvidia-peermem" in w for w in result["warnings"])
    os.makedirs(os.path.join(root, "sys/module/nvidia_peermem"))
    with open(os.path.join(root, "sys/module/nvidia_peermem/version"), "w", encoding="utf-8") as handle:
        handle.write("535.183.01\n")
    result = nccl(root, args)
    assert result["gpudirect"]["status"] == "peermem" and result["gpudirect"]["message"] is None
    assert not any("GPUDirect" in w for w in result.get("warnings", []))


# ---------------------------------------------------------------- the NCCL topology file (topo_links)
GEN5 = {"link_speed": "32.0 GT/s PCIe", "link_width": 16}
PIX_LINKS = {"level": "PIX", "gpu": GEN5, "nic": GEN5, "switch": GEN5, "missing": None}
TOPO = "/etc/nccl-topo.xml"


@pytest.fixture
def tenant_guest(cx6):
    """The cx6 GID table on a guest whose GPU and VF (mlx5_0's PCI function) sit under one emulated switch."""
    from fakes.host_tree import FakeHost  # pylint: disable=import-error,import-outside-toplevel
    tree = FakeHost(cx6["root"])
    tree.write("/sys/devices/system/node/node0/cpulist", "0-7")
    tree.add_pci("0000:00:02.0", "0x1b36", "0x000c", "0x060400", root_bus="pci0000:00")
    tree.add_pci("0000:01:00.0", "0x1b36", "0x000e", "0x060400", parent="0000:00:02.0")
    tree.add_pci("0000:02:00.0", "0x1b36", "0x000e", "0x060400", parent="0000:01:00.0")
    tree.add_pci("0000:02:01.0", "0x1b36", "0x000e", "0x060400", parent="0000:01:00.0")
    tree.add_pci("0000:03:00.0", "0x10de", "0x2330", "0x030200", parent="0000:02:00.0")
    tree.link("/sys/class/infiniband/mlx5_0/device", tree.add_pci("0000:04:00.0", "0x15b3", "0x101e", "0x020000", parent="0000:02:01.0"))
    return dict(cx6, topo=os.path.join(cx6["root"], TOPO.lstrip("/")))


def topo_args(cx6, **extra):
    return dict({"path": cx6["path"], "ib_hca": ["mlx5_0:1"], "gid_index": "discover", "topo_links": PIX_LINKS}, **extra)


def test_topology_file_written_and_named(tenant_guest):
    from nccl_topo_rules import parse  # pylint: disable=import-error,import-outside-toplevel
    result = nccl(tenant_guest["root"], topo_args(tenant_guest), diff=True)
    assert not result.get("failed"), result
    assert result["changed"] is True and result["settings"]["NCCL_TOPO_FILE"] == TOPO
    assert result["topology"] == {"path": TOPO, "written": True, "gpus": ["0000:03:00.0"], "nics": ["0000:04:00.0"],
                                  "level": "PIX", "reason": None, "from_guest": {}, "removed": False, "kept": None}
    text = open(tenant_guest["topo"], encoding="utf-8").read()
    bridge = parse(text).subs[0].subs[0]
    assert bridge.attrs["busid"] == "0000:01:00.0" and [leaf.attrs["busid"] for leaf in bridge.subs] == ["0000:03:00.0", "0000:04:00.0"]
    assert "NCCL_TOPO_FILE=%s\n" % TOPO in open(tenant_guest["real"], encoding="utf-8").read()
    assert [entry["after_header"] for entry in result["diff"]] == [TOPO, tenant_guest["path"]]
    assert result["diff"][0]["after"] == text and not result["diff"][0]["before"]
    again = nccl(tenant_guest["root"], topo_args(tenant_guest))
    assert again["changed"] is False


def test_topology_file_check_mode_writes_nothing(tenant_guest):
    result = nccl(tenant_guest["root"], topo_args(tenant_guest), check_mode=True, diff=True)
    assert result["changed"] is True and result["topology"]["written"] is True
    assert not os.path.exists(tenant_guest["topo"]) and open(tenant_guest["real"], encoding="utf-8").read() == EXISTING
    assert TOPO in [entry["after_header"] for entry in result["diff"]]


def test_unknown_host_links_leave_the_file_out_and_say_why(tenant_guest):
    missing = {"missing": "the host model has no max_link_speed/max_link_width for 0000:1b:00.0"}
    result = nccl(tenant_guest["root"], topo_args(tenant_guest, topo_links=missing))
    assert not result.get("failed"), result
    assert result["topology"]["written"] is False and "max_link_speed" in result["topology"]["reason"]
    assert "NCCL_TOPO_FILE" not in result["settings"] and not os.path.exists(tenant_guest["topo"])
    assert any(w.startswith("no NCCL topology file (%s): the GPU host's link facts are unknown" % TOPO) for w in result["warnings"])


def test_host_without_link_facts_gets_a_file_of_the_known_ones(tenant_guest):
    """The DGX A100-class and HGX H100 captures: no max_link_speed; the file holds the devices, their NUMA node and the
    guest switch, without a link attribute, and says which links NCCL reads in the guest."""
    from nccl_topo_rules import links_fillable, parse  # pylint: disable=import-error,import-outside-toplevel
    why = "the host model has no max_link_speed/max_link_width for 0000:10:00.0"
    links = {"level": "PIX", "gpu": None, "nic": None, "switch": None, "missing": None,
             "unknown": {"gpu": why, "nic": why, "switch": why}}
    result = nccl(tenant_guest["root"], topo_args(tenant_guest, topo_links=links))
    assert not result.get("failed"), result
    assert result["topology"]["written"] is True and result["topology"]["from_guest"] == links["unknown"]
    assert result["settings"]["NCCL_TOPO_FILE"] == TOPO
    text = open(tenant_guest["topo"], encoding="utf-8").read()
    assert "link_" not in text
    links_fillable(parse(text), set(os.listdir(os.path.join(tenant_guest["root"], "sys/bus/pci/devices"))))


NO_GPU = {"missing": "the plan gives the tenant no GPU on its host"}
PXB_LINKS = dict(PIX_LINKS, level="PXB", switch=None, shared_switch=GEN5, gpu_switch=GEN5,
                 nic_switch={"link_speed": "16.0 GT/s PCIe", "link_width": 8})


def test_a_pxb_tenant_gets_its_file_in_place_of_the_pix_one(tenant_guest):
    """The tenant's distance became PXB (its VF now under another host switch): the file is rewritten with the host's three
    switch levels as bridges only it names, which NCCL reads as PXB; check mode first, then for real, then nothing."""
    from nccl_topo_rules import links_fillable, parse, path_type  # pylint: disable=import-error,import-outside-toplevel
    nccl(tenant_guest["root"], topo_args(tenant_guest))
    pix = open(tenant_guest["topo"], encoding="utf-8").read()
    checked = nccl(tenant_guest["root"], topo_args(tenant_guest, topo_links=PXB_LINKS), check_mode=True, diff=True)
    assert checked["changed"] is True and open(tenant_guest["topo"], encoding="utf-8").read() == pix
    result = nccl(tenant_guest["root"], topo_args(tenant_guest, topo_links=PXB_LINKS), diff=True)
    assert not result.get("failed"), result
    assert result["changed"] is True and result["topology"]["written"] is True and result["topology"]["level"] == "PXB"
    text = open(tenant_guest["topo"], encoding="utf-8").read()
    assert [entry for entry in result["diff"] if entry["after_header"] == TOPO][0]["after"] == text
    assert [entry for entry in checked["diff"] if entry["after_header"] == TOPO][0]["after"] == text
    top = parse(text)
    links_fillable(top, set(os.listdir(os.path.join(tenant_guest["root"], "sys/bus/pci/devices"))))
    assert path_type(parse(pix), "0000:03:00.0", "0000:04:00.0") == "PIX"
    assert path_type(top, "0000:03:00.0", "0000:04:00.0") == "PXB"
    assert 'busid="ffff:ff:03.0" class="0x060400" link_speed="16.0 GT/s PCIe" link_width="8"' in text
    assert result["settings"]["NCCL_TOPO_FILE"] == TOPO
    assert nccl(tenant_guest["root"], topo_args(tenant_guest, topo_links=PXB_LINKS))["changed"] is False


def test_a_file_that_can_no_longer_be_made_is_removed_with_its_setting(tenant_guest):
    """Written once; then the tenant's facts no longer make a file (its GPU gone, a PXB distance without the links of its
    host switch levels): the file this module
    wrote goes and NCCL_TOPO_FILE with it, check mode first (nothing removed, the same diff), then for real, then nothing."""
    nccl(tenant_guest["root"], topo_args(tenant_guest))
    written = open(tenant_guest["topo"], encoding="utf-8").read()
    for links in (NO_GPU, dict(PIX_LINKS, level="PXB")):
        checked = nccl(tenant_guest["root"], topo_args(tenant_guest, topo_links=links), check_mode=True, diff=True)
        assert checked["changed"] is True and checked["topology"]["removed"] is True and checked["removed"] == ["NCCL_TOPO_FILE"]
        assert open(tenant_guest["topo"], encoding="utf-8").read() == written
        topo_diff = [entry for entry in checked["diff"] if entry["after_header"] == TOPO]
        assert topo_diff == [{"before_header": TOPO, "after_header": TOPO, "before": written, "after": ""}]
    result = nccl(tenant_guest["root"], topo_args(tenant_guest, topo_links=NO_GPU))
    assert result["changed"] is True and not os.path.exists(tenant_guest["topo"])
    assert "NCCL_TOPO_FILE" not in open(tenant_guest["real"], encoding="utf-8").read()
    assert any("the one this module wrote is removed, NCCL_TOPO_FILE with it" in w for w in result["warnings"])
    again = nccl(tenant_guest["root"], topo_args(tenant_guest, topo_links=NO_GPU))
    assert again["changed"] is False and again["topology"]["removed"] is False and again["removed"] == []


def test_a_topology_file_not_written_here_is_kept_and_said(tenant_guest):
    with open(tenant_guest["topo"], "w", encoding="utf-8") as handle:
        handle.write('<system version="1">\n</system>\n')
    with open(tenant_guest["real"], "a", encoding="utf-8") as handle:
        handle.write("NCCL_TOPO_FILE=%s\n" % TOPO)
    for _run in (1, 2):
        result = nccl(tenant_guest["root"], topo_args(tenant_guest, topo_links=NO_GPU))
        assert result["topology"]["removed"] is False and "not a file this module wrote" in result["topology"]["kept"]
        assert open(tenant_guest["topo"], encoding="utf-8").read() == '<system version="1">\n</system>\n'
        assert "NCCL_TOPO_FILE=%s\n" % TOPO in open(tenant_guest["real"], encoding="utf-8").read()
        assert any("left as it is, and NCCL_TOPO_FILE with it" in w for w in result["warnings"])
    assert result["changed"] is False


def test_a_setting_naming_a_missing_file_goes(tenant_guest):
    with open(tenant_guest["real"], "a", encoding="utf-8") as handle:
        handle.write("NCCL_TOPO_FILE=%s\n" % TOPO)
    result = nccl(tenant_guest["root"], topo_args(tenant_guest, topo_links=NO_GPU))
    assert result["changed"] is True and result["removed"] == ["NCCL_TOPO_FILE"]
    assert "NCCL_TOPO_FILE" not in open(tenant_guest["real"], encoding="utf-8").read()


@pytest.mark.parametrize("extra, message", [
    ({"topo_links": dict(PIX_LINKS, level="far")}, "topo_links.level"),
    ({"topo_file": "/etc/nccl.conf"}, "topo_file: /etc/nccl.conf is the NCCL settings file"),
    ({"extra": {"NCCL_TOPO_FILE": "/x.xml"}}, "NCCL_TOPO_FILE is managed by topo_file"),
])
def test_bad_topology_inputs_change_nothing(tenant_guest, extra, message):
    result = nccl(tenant_guest["root"], topo_args(tenant_guest, **extra))
    assert result.get("failed") and message in result["msg"], result
    assert open(tenant_guest["real"], encoding="utf-8").read() == EXISTING and not os.path.exists(tenant_guest["topo"])
