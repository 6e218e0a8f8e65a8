# -*- coding: utf-8 -*-
"""Bad inputs per module: each ends in a clear error (failed, a message naming the option and
the fix, no traceback) and changes nothing in the world the module ran on. The same list
(``BAD_INPUTS``) is the table of docs/reliability.md: ``python tests/unit/plugins/modules/
test_bad_inputs.py`` writes it, and ``test_the_documented_table_is_this_list`` keeps them equal."""

from __future__ import annotations

import os
import json
import shutil
import subprocess
import sys
import tempfile
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

if __name__ == "__main__":  # run as a script to write the table
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))

from conftest import LIBVIRT_TEST_URI, REPO_ROOT, run_module  # pylint: disable=import-error,wrong-import-position
from fakes.commands import RecordedCommands  # pylint: disable=import-error,wrong-import-position
from fakes.doc_table import documented_block, write_block  # pylint: disable=import-error,wrong-import-position
from fakes.host_tree import FakeHost  # pylint: disable=import-error,wrong-import-position
from fakes.interrupt import tree_state  # pylint: disable=import-error,wrong-import-position
from fakes.kernel import lab_host  # pylint: disable=import-error,wrong-import-position
from fakes.rdma import FakeConfigfs, add_port  # pylint: disable=import-error,wrong-import-position
from fakes.system_commands import SystemCommands  # pylint: disable=import-error,wrong-import-position

DOC = os.path.join(REPO_ROOT, "docs", "reliability.md")
BEGIN, END = "<!-- bad-inputs table: generated from tests/unit/plugins/modules/test_bad_inputs.py -->", "<!-- end -->"
PF = "0000:81:00.0"
NOT_UTF8 = b"# \xff\xfe latin-1 \xe9\n"
OUTSIDE = "outside"  # a directory next to the root: nothing there may change


class Link(str):
    """A file put in the world as an absolute symlink to this name in the directory next to
    the root (a capture's absolute link, leading out of the tree)."""


ROWS = [(0, "fe80:0000:0000:0000:a288:c2ff:fe5b:03ec", "v1", "ens3np0"),
        (1, "0000:0000:0000:0000:0000:ffff:0b00:0048", "v2", "ens3np0")]


# ---------------------------------------------------------------------------- worlds
def grub_world(root):
    tree = FakeHost(root)
    tree.set_cpuinfo("GenuineIntel")
    tree.write("/etc/default/grub", 'GRUB_CMDLINE_LINUX="quiet"\n')
    os.makedirs(tree.p("/sys/kernel/mm/hugepages/hugepages-2048kB"))
    return {}


def hugepages_world(root):
    tree = FakeHost(root)
    tree.set_cpuinfo("GenuineIntel")
    tree.add_numa_node(0, [0, 1], memory_mb=2048)
    os.makedirs(tree.p("/etc/systemd/system"))
    return {}


def rdma_world(root):
    add_port(root, "mlx5_0", 1, ROWS, pci=PF)
    os.makedirs(os.path.join(str(root), "etc", "udev", "rules.d"))
    return {"kernel": FakeConfigfs(root, [("mlx5_0", 1)], mode="IB/RoCE v1")}


def pci_world(root):
    _tree, kernel = lab_host(root)
    return {"kernel": kernel}


def empty_world(root):
    os.makedirs(str(root))
    return {}


def modprobe_world(root):
    os.makedirs(os.path.join(str(root), "etc", "modprobe.d"))
    return {}


WORLDS = {"iommu_grub": grub_world, "hugepages": hugepages_world, "nccl_env": rdma_world, "mlx_rocev2": rdma_world,
          "vfio_bind": pci_world, "sriov_vfs": pci_world, "mig_profile": empty_world,
          "guest_nvlink": modprobe_world}
BASE_ARGS = {"iommu_grub": {"bootloader_update": "none"}, "hugepages": {"pages": [{"size": "2M", "count": 8}]},
             "nccl_env": {"ib_hca": ["mlx5_0:1"]}, "mlx_rocev2": {"rdma_device": "mlx5_0", "default_roce_mode": "v2"},
             "vfio_bind": {"devices": ["0000:82:00.0"]}, "sriov_vfs": {"pf": PF, "num_vfs": 2},
             "mig_profile": {"config_file": "/etc/mig.yaml", "config": "all-1g"}, "guest_nvlink": {"state": "disabled"}}

# (module, what is wrong, extra args (None: the base argument left out), files put in the world first
# {host path: bytes, or a Link out of the root}, the message says)
BAD_INPUTS = [
    ("iommu_grub", "GRUB file not UTF-8", {}, {"/etc/default/grub": b'GRUB_CMDLINE_LINUX="quiet \xe9"\n'},
     "grub_file: /etc/default/grub is not UTF-8"),
    ("iommu_grub", "grub_file a directory", {"grub_file": "/etc"}, {}, "grub_file: /etc does not exist or is not a file"),
    ("iommu_grub", "grub_file with a missing parent", {"grub_file": "/nowhere/grub"}, {}, "does not exist or is not a file"),
    ("iommu_grub", "grub_file with a newline", {"grub_file": "/etc/default/grub\nX"}, {}, "control character"),
    ("iommu_grub", "arg value with a newline", {"args": [{"name": "foo", "value": "1\nGRUB_DISABLE=1"}]}, {},
     "control character"),
    ("iommu_grub", "arg value ending in a newline", {"args": [{"name": "foo", "value": "1\n"}]}, {}, "control character"),
    ("iommu_grub", "arg name with a carriage return", {"args": [{"name": "foo\r", "value": "1"}]}, {}, "control character"),
    ("iommu_grub", "negative hugepage count", {"args": [{"name": "hugepagesz", "value": "2M"},
                                                        {"name": "hugepages", "value": "-4"}]}, {}, "cannot be negative"),
    ("iommu_grub", "hugepage size the CPU has not", {"args": [{"name": "hugepagesz", "value": "1G"},
                                                              {"name": "hugepages", "value": "4"}]}, {},
     "page size this CPU does not have"),
    ("iommu_grub", "GRUB file a symlink out of the root", {}, {"/etc/default/grub": Link("grub")},
     "grub_file: /etc/default/grub resolves to"),
    ("iommu_grub", "GRUB file with a blank before the CR of a CRLF line", {},
     {"/etc/default/grub": b'GRUB_CMDLINE_LINUX="quiet" \r\n'}, "a blank before the carriage return"),
    ("iommu_grub", "GRUB file with a BOM before a syntax error", {},
     {"/etc/default/grub": b'\xef\xbb\xbf# (serial console)\nGRUB_CMDLINE_LINUX="quiet"\n'}, "byte order mark"),
    ("iommu_grub", "GRUB file with a syntax error", {}, {"/etc/default/grub": b'GRUB_CMDLINE_LINUX="quiet"\nfi\n'},
     "'fi' closes nothing"),
    ("iommu_grub", "pre_bind_ids with a newline", {"pre_bind_ids": ["10de:2330\nx"]}, {}, "pre_bind_ids"),
    ("hugepages", "persist_unit a directory", {"persist": True, "persist_unit": "/etc/systemd/system"}, {},
     "persist_unit: /etc/systemd/system is a directory"),
    ("hugepages", "persist_unit with a missing parent", {"persist": True, "persist_unit": "/nowhere/x.service"}, {},
     "persist_unit: the directory of /nowhere/x.service does not exist"),
    ("hugepages", "persist_unit under a file", {"persist": True, "persist_unit": "/proc/cmdline/x.service"}, {},
     "is not a directory"),
    ("hugepages", "persist_unit not UTF-8", {"persist": True},
     {"/etc/systemd/system/gpuvirt-hugepages.service": NOT_UTF8}, "persist_unit: "),
    ("hugepages", "persist_unit with '..' out of the root", {"persist": True, "persist_unit": "/etc/../../outside/x.service"},
     {}, "persist_unit: /etc/../../outside/x.service resolves to"),
    ("hugepages", "systemd directory a symlink out of the root", {"persist": True, "persist_unit": "/etc/systemd/link/x.service"},
     {"/etc/systemd/link": Link("")}, "persist_unit: /etc/systemd/link/x.service resolves to"),
    ("hugepages", "persist_unit not a unit file name", {"persist": True, "persist_unit": "/etc/systemd/system/a%b.service"},
     {}, "is not a systemd service file name"),
    ("hugepages", "mount path a symlink out of the root", {"mounts": [{"size": "2M", "path": "/dev/hp"}]},
     {"/dev/hp": Link("hp")}, "mounts[0].path: /dev/hp resolves to"),
    ("hugepages", "mount path with '..'", {"mounts": [{"size": "2M", "path": "/dev/../../outside/hp"}]}, {},
     "is not normalised"),
    ("hugepages", "mount path with '.'", {"mounts": [{"size": "2M", "path": "/dev/./hp"}]}, {}, "give '/dev/hp'"),
    ("hugepages", "sysfs count a symlink out of the root", {},
     {"/sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages": Link("nr_hugepages")},
     "pages: 2M pages are not supported on node 0"),
    ("hugepages", "negative count", {"pages": [{"size": "2M", "count": -4}]}, {}, "is not a whole number"),
    ("hugepages", "mount path with a control character", {"mounts": [{"size": "2M", "path": "/dev/huge\x01"}]}, {},
     "control character"),
    ("guest_nvlink", "path a directory", {"path": "/etc/modprobe.d/x.conf"}, {"/etc/modprobe.d/x.conf/y": b""},
     "path: /etc/modprobe.d/x.conf is a directory"),
    ("guest_nvlink", "path outside modprobe.d", {"path": "/etc/nvlink.conf"}, {}, "path: /etc/nvlink.conf is not a file modprobe"),
    ("guest_nvlink", "the file a symlink out of the root", {}, {"/etc/modprobe.d/gpuvirt-nvlink.conf": Link("nvlink.conf")},
     "path: /etc/modprobe.d/gpuvirt-nvlink.conf resolves to"),
    ("guest_nvlink", "the file not UTF-8", {}, {"/etc/modprobe.d/gpuvirt-nvlink.conf": NOT_UTF8},
     "path: /etc/modprobe.d/gpuvirt-nvlink.conf is not UTF-8"),
    ("nccl_env", "path a directory", {"path": "/etc"}, {}, "path: /etc is a directory"),
    ("nccl_env", "path under a file", {"path": "/sys/class/infiniband/mlx5_0/ports/1/link_layer/nccl.conf"}, {},
     "is not a directory"),
    ("nccl_env", "path with '..' out of the root", {"path": "/etc/../../outside/nccl.conf"}, {},
     "path: /etc/../../outside/nccl.conf resolves to"),
    ("nccl_env", "path not normalised", {"path": "/etc/./nccl.conf"}, {}, "path: /etc/./nccl.conf is not a normalised path"),
    ("nccl_env", "hosts_path naming the directory above", {"hosts_path": "/nowhere/..",
                                                           "hosts_entries": [{"ip": "192.0.2.1", "names": ["a"]}]}, {},
     "hosts_path: /nowhere/.. is not a normalised path"),
    ("nccl_env", "nccl.conf a symlink out of the root", {}, {"/etc/nccl.conf": Link("nccl.conf")},
     "path: /etc/nccl.conf resolves to"),
    ("nccl_env", "hosts_path with '..' out of the root",
     {"hosts_path": "/etc/../../outside/hosts", "hosts_entries": [{"ip": "192.0.2.1", "names": ["a"]}]}, {},
     "hosts_path: /etc/../../outside/hosts resolves to"),
    ("nccl_env", "socket_ifname with a blank between names", {"socket_ifname": "eth0 eth1"}, {},
     "socket_ifname: 'eth0 eth1' is not NCCL_SOCKET_IFNAME's"),
    ("nccl_env", "socket_ifname in extra with a blank", {"extra": {"NCCL_SOCKET_IFNAME": "eth0 eth1"}}, {},
     "extra.NCCL_SOCKET_IFNAME: "),
    ("nccl_env", "ib_hca with an empty entry", {"ib_hca": [""]}, {}, "ib_hca: entry 0 is empty"),
    ("nccl_env", "HCA in extra that does not exist", {"ib_hca": [], "extra": {"NCCL_IB_HCA": "=mlx5_9:1"}}, {},
     "extra.NCCL_IB_HCA: no RDMA device mlx5_9"),
    ("nccl_env", "HCA in extra not in NCCL's syntax", {"ib_hca": [], "extra": {"NCCL_IB_HCA": "mlx5_0:1 mlx5_1"}}, {},
     "extra.NCCL_IB_HCA: 'mlx5_0:1 mlx5_1' is not DEVICE or DEVICE:PORT"),
    ("nccl_env", "HCA in both ib_hca and extra", {"extra": {"NCCL_IB_HCA": "mlx5_0"}}, {},
     "extra: NCCL_IB_HCA is managed by its own option"),
    ("nccl_env", "nccl.conf not UTF-8", {}, {"/etc/nccl.conf": NOT_UTF8}, "path: "),
    ("nccl_env", "extra value with a newline", {"extra": {"NCCL_IB_TC": "106\nNCCL_IB_GID_INDEX=0"}}, {},
     "extra.NCCL_IB_TC"),
    ("nccl_env", "extra key with a newline", {"extra": {"NCCL_IB_TC\n": "106"}}, {}, "extra"),
    ("nccl_env", "socket_ifname with a newline", {"socket_ifname": "eth0\nNCCL_DEBUG=INFO"}, {}, "socket_ifname"),
    ("nccl_env", "ib_hca entry with a newline", {"ib_hca": ["mlx5_0:1\nNCCL_DEBUG=INFO"]}, {}, "ib_hca"),
    ("nccl_env", "GDR level NCCL does not know", {"net_gdr_level": "NVL"}, {}, "not a level NCCL knows"),
    ("nccl_env", "GDR level out of range", {"net_gdr_level": "9"}, {}, "not a level NCCL knows"),
    ("nccl_env", "GDR level in extra", {"extra": {"NCCL_NET_GDR_LEVEL": "-1"}}, {}, "not a level NCCL knows"),
    ("mlx_rocev2", "persist_rules_dir a file", {"persist_rules_dir": "/etc/udev/rules.d/x"},
     {"/etc/udev/rules.d/x": b"x\n"}, "persist_rules_dir: /etc/udev/rules.d/x is not a directory"),
    ("mlx_rocev2", "persist_rules_dir under a file", {"persist_rules_dir": "/etc/udev/rules.d/x/y"},
     {"/etc/udev/rules.d/x": b"x\n"}, "persist_rules_dir: "),
    ("mlx_rocev2", "persist_script a directory", {"persist_script": "/etc"}, {}, "persist_script: /etc is a directory"),
    ("mlx_rocev2", "persist_script with a blank", {"persist_script": "/usr/local/sbin/a b"}, {}, "udev rule"),
    ("mlx_rocev2", "persist_script with a newline", {"persist_script": "/usr/local/sbin/a\nRUN+=x"}, {},
     "control character"),
    ("mlx_rocev2", "persist_rules_dir with '..' out of the root", {"persist_rules_dir": "/etc/../../outside"}, {},
     "persist_rules_dir: /etc/../../outside resolves to"),
    ("mlx_rocev2", "persist_rules_dir a symlink out of the root", {"persist_rules_dir": "/etc/udev/link"},
     {"/etc/udev/link": Link("")}, "persist_rules_dir: /etc/udev/link resolves to"),
    ("mlx_rocev2", "persist_script with '..' out of the root", {"persist_script": "/usr/../../outside/roce"}, {},
     "persist_script: /usr/../../outside/roce resolves to"),
    ("mlx_rocev2", "RDMA device name with a quote", {"rdma_device": 'mlx5_0",RUN+="x'},
     {'/sys/class/infiniband/mlx5_0",RUN+="x/ports/1/state': b"4: ACTIVE\n"}, "cannot go into a udev rule"),
    ("mlx_rocev2", "negative NUM_OF_VFS", {"device": PF, "firmware": {"NUM_OF_VFS": -5}}, {},
     "firmware.NUM_OF_VFS: -5 is not a VF count"),
    ("mlx_rocev2", "NUM_OF_VFS no PCIe function can have", {"device": PF, "firmware": {"NUM_OF_VFS": 2 ** 40}}, {},
     "firmware.NUM_OF_VFS: 1099511627776 is not a VF count"),
    ("mlx_rocev2", "firmware value of two words", {"device": PF, "firmware": {"LINK_TYPE_P1": "ETH SRIOV_EN=0"}}, {},
     "firmware.LINK_TYPE_P1: 'ETH SRIOV_EN=0' is not a value mlxconfig sets"),
    ("mlx_rocev2", "rule file not UTF-8", {}, {"/etc/udev/rules.d/70-gpuvirt-roce-mlx5_0.rules": NOT_UTF8},
     "persist_rules_dir: "),
    ("vfio_bind", "device address with a control character", {"devices": ["0000:82:\x0100.0"]}, {}, "devices"),
    ("vfio_bind", "id with a newline", {"devices": [], "ids": ["1234:11e8\nx"]}, {}, "ids"),
    ("sriov_vfs", "PF with a newline", {"pf": PF + "\nx"}, {}, "pf"),
    ("sriov_vfs", "systemd directory a symlink out of the root", {}, {"/etc/systemd/system": Link("")},
     "persist: /etc/systemd/system/"),
    ("mig_profile", "config_file a symlink out of the root", {}, {"/etc/mig.yaml": Link("mig.yaml")},
     "config_file: /etc/mig.yaml resolves to"),
    ("mig_profile", "negative GPU index",
     {"config_file": None, "config": None, "layout": [{"mig_enabled": True, "devices": [-1]}]}, {},
     "layout[0].devices must be 'all' or a list of GPU indexes (0 or more)"),
    ("mig_profile", "profile name with a trailing newline",
     {"config_file": None, "config": None, "layout": [{"mig_enabled": True, "mig_devices": {"1g.10gb\n": 1}}]}, {},
     "layout[0].mig_devices: "),
    ("mig_profile", "mig-parted file not UTF-8", {}, {"/etc/mig.yaml": NOT_UTF8}, "config_file /etc/mig.yaml is not UTF-8"),
    ("mig_profile", "config_file a directory", {"config_file": "/etc"}, {"/etc/x": b""}, "config_file /etc cannot be read"),
]
ROOTS = [("root that does not exist", "nowhere"), ("root that is a file", "a-file")]
MODULES = sorted(WORLDS)


def module_of(name):
    return __import__("ansible_collections.gpuvirt.tenancy.plugins.modules." + name, fromlist=["main"])


def host_of(name, root, world):
    # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
    return Host(str(root), commands=RecordedCommands(), kernel=world.get("kernel"))


def put(root, files):
    outside = os.path.join(os.path.dirname(str(root)), OUTSIDE)
    os.makedirs(outside, exist_ok=True)
    for path, data in files.items():
        real = os.path.join(str(root), path.lstrip("/"))
        os.makedirs(os.path.dirname(real), exist_ok=True)
        if isinstance(data, Link):
            if os.path.isdir(real) and not os.path.islink(real):
                os.rmdir(real)
            elif os.path.lexists(real):
                os.unlink(real)
            os.symlink(os.path.join(outside, data) if data else outside, real)
            continue
        with open(real, "wb") as handle:
            handle.write(data)


@pytest.mark.parametrize("name, what, args, files, message", BAD_INPUTS, ids=["%s: %s" % c[:2] for c in BAD_INPUTS])
def test_bad_input_is_a_clear_error_and_changes_nothing(tmp_path, name, what, args, files, message):
    root = tmp_path / "root"
    world = WORLDS[name](root)
    put(root, files)
    before = tree_state(str(tmp_path))
    given = dict((key, value) for key, value in dict(BASE_ARGS[name], **args).items() if value is not None)
    result = run_module(module_of(name).main, given, host=host_of(name, root, world))
    assert result.get("failed") is True, (what, result)
    assert message in result["msg"], (what, result["msg"])
    assert "exception" not in result and "Traceback" not in result["msg"], result
    assert result["changed"] is False, result
    assert tree_state(str(tmp_path)) == before, what  # the root and what lies next to it


@pytest.mark.parametrize("name", MODULES)
@pytest.mark.parametrize("what, root_name", ROOTS)
def test_a_root_that_is_no_directory_is_an_error(tmp_path, name, what, root_name):
    (tmp_path / "a-file").write_text("x\n")
    result = run_module(module_of(name).main, dict(BASE_ARGS[name], root=str(tmp_path / root_name)))
    assert result.get("failed") is True and "is not a directory" in result["msg"], (what, result)
    assert result["changed"] is False


# ---------------------------------------------------------------------------- no write outside the root
# Every host-changing module that takes a root runs in-process (not in check mode) on the worlds
# above with generated path options ('..', '.', names that lead next to the root) and generated
# symlinks in the tree, relative or absolute, that lead out of it (what they named moved out
# first, so that a write through the link would land outside): the directory next to the root
# stays byte for byte as it was, and no run ends in a traceback.
# Host paths each module reads to edit, writes or links (its defaults and the test worlds' files).
LINKABLE = {
    "iommu_grub": ["/etc", "/etc/default", "/etc/default/grub", "/etc/modules-load.d", "/etc/modprobe.d",
                   "/etc/initramfs-tools"],
    "hugepages": ["/etc", "/etc/systemd", "/etc/systemd/system", "/dev", "/sys/devices/system/node/node0/hugepages",
                  "/sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages"],
    "nccl_env": ["/etc", "/etc/nccl.conf", "/etc/hosts"],
    "mlx_rocev2": ["/etc", "/etc/udev", "/etc/udev/rules.d", "/usr/local/sbin", "/usr/local", "/sys/kernel/config"],
    "sriov_vfs": ["/etc", "/etc/systemd/system", "/usr/local/libexec", "/usr/local/libexec/gpuvirt", "/etc/gpuvirt",
                  "/sys/bus/pci/devices/0000:81:00.0"],
    "vfio_bind": ["/etc", "/etc/systemd/system", "/usr/local/libexec/gpuvirt", "/etc/modprobe.d",
                  "/etc/modules-load.d", "/sys/bus/pci/devices/0000:82:00.0"],
    "mig_profile": ["/etc", "/etc/mig.yaml"],
    "guest_nvlink": ["/etc", "/etc/modprobe.d", "/etc/modprobe.d/gpuvirt-nvlink.conf"],
}
NAMES = ["..", ".", "etc", "outside", "systemd", "system", "udev", "dev", "hp", "x.service", "nccl.conf", "hosts",
         "grub", "default", "rules.d"]
PATHS = st.lists(st.sampled_from(NAMES), min_size=1, max_size=6).map(lambda parts: "/" + "/".join(parts))


def path_options(name):
    """The module's path options, each left at its default or generated."""
    def maybe(key, strategy):
        return st.one_of(st.just({}), strategy.map(lambda value: {key: value}))
    mount = PATHS.map(lambda path: {"mounts": [{"size": "2M", "path": path}]})
    options = {
        "iommu_grub": [maybe("grub_file", PATHS)],
        "hugepages": [st.just({"persist": True}), maybe("persist_unit", PATHS.map(lambda p: p + ".service")),
                      st.one_of(st.just({}), mount), maybe("boot_config", st.just("grub")), maybe("grub_file", PATHS)],
        "nccl_env": [maybe("path", PATHS), maybe("hosts_path", PATHS),
                     st.just({"hosts_entries": [{"ip": "192.0.2.1", "names": ["a"]}]})],
        "mlx_rocev2": [maybe("persist_rules_dir", PATHS), maybe("persist_script", PATHS)],
        "sriov_vfs": [st.just({})],
        "vfio_bind": [st.just({})],
        "mig_profile": [maybe("config_file", PATHS)],
        "guest_nvlink": [maybe("path", PATHS.map(lambda p: "/etc/modprobe.d" + p + ".conf")),
                         st.sampled_from([{"state": "disabled"}, {"state": "enabled"}])],
    }[name]
    return st.tuples(*options).map(lambda parts: dict(kv for part in parts for kv in part.items()))


def link_out(root, outside, host_path, absolute):
    """Move what ``host_path`` holds next to the root and leave a link to it in its place."""
    real = os.path.join(root, host_path.lstrip("/"))
    if os.path.islink(real) or not os.path.lexists(os.path.dirname(real)) and not os.path.lexists(real):
        return
    target = os.path.join(outside, host_path.strip("/").replace("/", "_"))
    if os.path.lexists(real):
        shutil.move(real, target)
    else:
        os.makedirs(target)
    os.symlink(target if absolute else os.path.relpath(target, os.path.dirname(os.path.realpath(real))), real)


@pytest.mark.parametrize("name", MODULES)
def test_no_file_outside_the_root_changes(name):
    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(options=path_options(name),
           links=st.lists(st.tuples(st.sampled_from(LINKABLE[name]), st.booleans()), max_size=2, unique_by=lambda link: link[0]))
    def check(options, links):
        with tempfile.TemporaryDirectory() as top:
            root, outside = os.path.join(top, "root"), os.path.join(top, "outside")
            os.makedirs(outside)
            world = WORLDS[name](root)
            with open(os.path.join(outside, "keep"), "w", encoding="utf-8") as handle:
                handle.write("outside the root\n")
            for host_path, absolute in links:
                link_out(root, outside, host_path, absolute)
            before = tree_state(outside)
            result = run_module(module_of(name).main, dict(BASE_ARGS[name], **options), host=host_of(name, root, world))
            assert "exception" not in result and "Traceback" not in result.get("msg", ""), result
            assert tree_state(outside) == before, (options, links, result)
    check()


# The modules that also change libvirt, with their own worlds: tenant_domain makes and removes a
# tenant's guest files (disk, seed, manifest) under guest_dir, from a base image, with the real
# qemu-img and genisoimage; numa_pin changes pins only, reading the host model under the root.
GUEST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGd3b3JrZXhhbXBsZWtleWZvcnRlc3RzMDAwMDAwMDAw ops@example"
LIBVIRT_LINKABLE = {
    "tenant_domain": ["/var", "/var/lib/libvirt/images", "/var/lib/libvirt/images/gpuvirt",
                      "/var/lib/libvirt/images/gpuvirt/tenants", "/srv", "/srv/base.qcow2", "/etc"],
    "numa_pin": ["/etc", "/sys", "/sys/devices/system"],
}
GUEST_PATHS = st.lists(st.sampled_from(["..", ".", "var", "lib", "libvirt", "images", "outside", "srv", "tenants"]),
                       min_size=1, max_size=6).map(lambda parts: "/" + "/".join(parts))


def libvirt_world(root):
    os.makedirs(os.path.join(root, "srv"))
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", os.path.join(root, "srv", "base.qcow2"), "64M"], check=True)


def libvirt_options(name):
    if name == "numa_pin":
        return st.just({"vcpu_pins": {"0": "1"}, "emulator_cpus": "2", "nodeset": "0"})
    tenant = {"domain_type": "test", "arch": "i686", "firmware": "bios", "vcpus": 1, "memory_mb": 64,
              "cloud_init": {"ssh_authorized_keys": [GUEST_KEY]}}
    # each left at what works or generated, half and half
    image = st.fixed_dictionaries({"base": st.one_of(st.just("/srv/base.qcow2"), GUEST_PATHS), "size_gb": st.just(1),
                                   "copy": st.booleans()})
    guest_dir = st.one_of(st.just("/var/lib/libvirt/images/gpuvirt"), GUEST_PATHS)
    return st.fixed_dictionaries({"image": image, "guest_dir": guest_dir,
                                  "remove": st.booleans(), "manifest_out": st.booleans()}).map(lambda o: dict(tenant, **o))


@pytest.mark.parametrize("name", sorted(LIBVIRT_LINKABLE))
def test_no_file_outside_the_root_changes_libvirt_modules(libvirt_conn, name):
    """As above, with libvirt's test driver as the host's libvirt; tenant_domain's guest files made
    and then, with ``remove``, removed again (a manifest that names a file next to the root, with
    ``manifest_out``, included)."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host  # pylint: disable=import-outside-toplevel

    @settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(options=libvirt_options(name),
           links=st.lists(st.tuples(st.sampled_from(LIBVIRT_LINKABLE[name]), st.booleans()), max_size=2,
                          unique_by=lambda link: link[0]))
    def check(options, links):
        with tempfile.TemporaryDirectory() as top:
            root, outside = os.path.join(top, "root"), os.path.join(top, "outside")
            os.makedirs(outside)
            libvirt_world(root)
            with open(os.path.join(outside, "keep"), "w", encoding="utf-8") as handle:
                handle.write("outside the root\n")
            options = dict(options, name="prop-" + uuid.uuid4().hex[:8], uri=LIBVIRT_TEST_URI)
            remove, manifest_out = options.pop("remove", False), options.pop("manifest_out", False)
            if name == "numa_pin":
                libvirt_conn.defineXML("<domain type='test'><name>%s</name><memory>65536</memory><vcpu>2</vcpu>"
                                       "<os><type arch='i686'>hvm</type></os></domain>" % options["name"])
            else:
                guest_dir = os.path.normpath(options["guest_dir"])
                if manifest_out and not guest_dir.startswith("/.."):
                    made = os.path.join(root, guest_dir.lstrip("/"), "tenants", options["name"])
                    os.makedirs(made)
                    with open(os.path.join(made, "made.json"), "w", encoding="utf-8") as handle:
                        json.dump({"made": ["/../outside/keep", "/../../outside/keep"]}, handle)
            for host_path, absolute in links:
                link_out(root, outside, host_path, absolute)
            before = tree_state(outside)
            host = Host(root, commands=SystemCommands())
            results = [run_module(module_of(name).main, options, host=host)]
            if remove:
                results.append(run_module(module_of(name).main, {"name": options["name"], "uri": LIBVIRT_TEST_URI,
                                                                 "guest_dir": options["guest_dir"], "state": "absent"},
                                          host=Host(root, commands=SystemCommands())))
            for result in results:
                assert "exception" not in result and "Traceback" not in result.get("msg", ""), result
            assert tree_state(outside) == before, (options, links, results)
    check()


def host_changing_modules_with_a_root():
    """Every module with a root option but the read-only ones (their documentation extends
    ``attributes.INFO_MODULE``: the ``*_info`` modules; an action plugin's
    documentation, such as host_reboot's, has no module code)."""
    names = []
    for entry in sorted(os.listdir(os.path.join(REPO_ROOT, "plugins", "modules"))):
        name = entry[:-3]
        action = os.path.join(REPO_ROOT, "plugins", "action", entry)
        if entry.endswith(".py") and not entry.startswith("_") and not os.path.exists(action):
            module = module_of(name)
            if "root" in module.MODULE_ARGS["argument_spec"] and "gpuvirt.tenancy.attributes.INFO_MODULE" not in module.DOCUMENTATION:
                names.append(name)
    return names


def test_the_property_covers_every_host_changing_module_with_a_root():
    assert sorted(MODULES + sorted(LIBVIRT_LINKABLE)) == host_changing_modules_with_a_root()


def render_table():
    lines = ["| module | bad input | outcome (message excerpt) |", "| --- | --- | --- |"]
    for name, what, _args, _files, message in BAD_INPUTS:
        lines.append("| %s | %s | error, nothing changed: `%s` |" % (name, what, message.replace("|", "\\|")))
    for what, _root in ROOTS:
        lines.append("| %s | %s | error, nothing changed: `root ... is not a directory` |" % (", ".join(MODULES), what))
    return "\n".join([BEGIN] + lines + [END])


def test_the_documented_table_is_this_list():
    assert documented_block(DOC, BEGIN, END) == render_table()


if __name__ == "__main__":
    write_block(DOC, BEGIN, END, render_table())
