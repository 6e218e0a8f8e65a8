# -*- coding: utf-8 -*-
"""The NCCL topology file of a tenant guest (guest/nccl_topo): its text read back by NCCL's parser
rules (tests/unit/nccl_topo_rules.py, from NVIDIA/nccl src/graph/xml.cc), the topology files published
for VMs (tests/fixtures/nccl_topo, Azure's ndv4/ndv5) read by the same rules, broken files refused,
and every case where no honest file can be made said, not guessed."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest import nccl_topo
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.sysfs import Sysfs
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

from conftest import FIXTURES  # pylint: disable=import-error
from fakes.host_tree import FakeHost  # pylint: disable=import-error
from nccl_topo_rules import TopoError, links_fillable, parse, path_type  # pylint: disable=import-error

GEN5 = {"link_speed": "32.0 GT/s PCIe", "link_width": 16}
GEN4 = {"link_speed": "16.0 GT/s PCIe", "link_width": 16}
PIX = {"level": "PIX", "gpu": GEN5, "nic": GEN5, "switch": GEN5, "missing": None}
# a PXB tenant as planning.pci_links gives it: the shared switch's link and each side's below it
PXB = {"level": "PXB", "gpu": GEN5, "nic": GEN5, "shared_switch": GEN5, "gpu_switch": GEN4, "nic_switch": GEN5, "missing": None}


def fixture_text(name):
    with open(os.path.join(FIXTURES, "nccl_topo", name), encoding="utf-8") as handle:
        return handle.read()


def guest_tree(tmp_path, switch=True, nodes=(0,), gpu_node=-1, nic_node=-1, gpus=1):
    """A q35 guest as libvirt lays a GPU and a VF out under one emulated switch (a pcie-root-port, a
    switch's upstream and downstream ports) or each under its own root port; the VF is the PCI
    function of RDMA device mlx5_0."""
    tree = FakeHost(tmp_path)
    for node in nodes:
        tree.write("/sys/devices/system/node/node%d/cpulist" % node, "0-3")
    tree.add_pci("0000:00:02.0", "0x1b36", "0x000c", "0x060400", root_bus="pci0000:00")
    if switch:
        tree.add_pci("0000:01:00.0", "0x1b36", "0x000e", "0x060400", parent="0000:00:02.0")
        tree.add_pci("0000:02:00.0", "0x1b36", "0x000e", "0x060400", parent="0000:01:00.0")
        tree.add_pci("0000:02:01.0", "0x1b36", "0x000e", "0x060400", parent="0000:01:00.0")
        gpu_parents, nic_parent = ["0000:02:00.0"], "0000:02:01.0"
        if gpus > 1:
            tree.add_pci("0000:02:02.0", "0x1b36", "0x000e", "0x060400", parent="0000:01:00.0")
            gpu_parents.append("0000:02:02.0")
        gpu_addresses, nic_address = ["0000:03:00.0", "0000:05:00.0"][:gpus], "0000:04:00.0"
    else:
        tree.add_pci("0000:00:03.0", "0x1b36", "0x000c", "0x060400", root_bus="pci0000:00")
        gpu_parents, nic_parent = ["0000:00:02.0"], "0000:00:03.0"
        gpu_addresses, nic_address = ["0000:01:00.0"], "0000:02:00.0"
    for address, parent in zip(gpu_addresses, gpu_parents):
        tree.add_pci(address, "0x10de", "0x2330", "0x030200", parent=parent, numa_node=gpu_node)
    path = tree.add_pci(nic_address, "0x15b3", "0x101e", "0x020000", parent=nic_parent, numa_node=nic_node)
    tree.link("/sys/class/infiniband/mlx5_0/device", path)
    return Sysfs(str(tmp_path)), gpu_addresses, nic_address


def test_published_vm_files_read_by_the_rules():
    for name, cpus, leaves in (("ndv4-topo.xml", 4, 16), ("ndv5-topo.xml", 2, 16)):
        top = parse(fixture_text(name))
        assert len(top.subs) == cpus
        assert sum(1 for node in top.walk() if node.name == "pci" and not node.subs) == leaves


def test_the_path_rule_reads_a_published_file():
    """A control for path_type on Azure's ndv4 file (InfiniBand HCAs, class 0x0207, are NICs to NCCL's kvDictPciClass):
    a GPU and an HCA under one bridge are PIX, across NUMA nodes SYS."""
    top = parse(fixture_text("ndv4-topo.xml"))
    assert path_type(top, "0003:00:00.0", "0103:00:00.0") == "PIX"
    assert path_type(top, "0003:00:00.0", "0101:00:00.0") == "SYS"
    with pytest.raises(TopoError) as error:
        path_type(top, "ffff:ff:01.0", "0103:00:00.0")
    assert "no GPU or NIC" in str(error.value)


@pytest.mark.parametrize("broken, rule", [
    (lambda t: t.replace("  <cpu", "\t<cpu", 1), "expecting '<'"),
    (lambda t: t.replace('<system version="1">', '<system version="2">'), "wrong version"),
    (lambda t: t.replace("</pci>", "</cpu>", 1), "XML Mismatch"),
    (lambda t: t.replace('busid="0003:00:00.0"', 'busid="0003:00:00.0:0"'), "bus ID"),
    (lambda t: t.replace('busid="000d:00:00.0"', 'busid="000D:00:00.0"'), "lower-case"),
    (lambda t: t.replace('link_speed="16 GT/s" link_width="16"/>', 'link_speed="16GT/s" link_width="16"/>', 1), "kvDictPciGen"),
    # an XML declaration: NCCL reads "?xml" as an element and stops at the '?' before '>'
    (lambda t: '<?xml version="1.0"?>\n' + t, "expected >, got '?'"),
    (lambda t: t.replace("</pci>", "<gpu/></pci>", 1).replace("<cpu ", "<gpu ", 1).replace("</cpu>", "</gpu>", 1), "NCCL ignores it"),
    (lambda t: t.replace('class="0x030200"', 'class="0x030200" x="%s"' % ("a" * 260), 1), "too long"),
    (lambda t: t.rsplit("</system>", 1)[0], "unterminated system"),
])
def test_broken_files_are_refused(broken, rule):
    """A control: the rules refuse what NCCL refuses or misreads, so the passes above mean something."""
    with pytest.raises(TopoError) as error:
        parse(broken(fixture_text("ndv4-topo.xml")))
    assert rule in str(error.value)


def test_pix_tenant_under_the_guest_switch(tmp_path):
    fs, gpus, nic = guest_tree(tmp_path)
    text, details = nccl_topo.topology_file(fs, ["mlx5_0"], nccl_topo.check_links(PIX))
    top = parse(text)
    (cpu,) = top.subs
    assert cpu.attrs == {"numaid": "0"}  # NCCL reads the CPU's affinity, arch and vendor in the guest itself
    (bridge,) = cpu.subs
    # the guest's own switch (its upstream port), with the host switch's link
    assert bridge.attrs == {"busid": "0000:01:00.0", "class": "0x060400", "link_speed": "32.0 GT/s PCIe", "link_width": "16"}
    assert [(leaf.attrs["busid"], leaf.attrs["class"]) for leaf in bridge.subs] == [(gpus[0], "0x030200"), (nic, "0x020000")]
    assert all(leaf.attrs["link_speed"] == "32.0 GT/s PCIe" and leaf.attrs["link_width"] == "16" for leaf in bridge.subs)
    assert details == {"gpus": gpus, "nics": [nic], "level": "PIX", "reason": None, "from_guest": {}}
    # NCCL's path between them (paths.cc): GPU -> bridge -> NIC, PIX
    assert path_type(top, gpus[0], nic) == "PIX"


def test_pix_without_a_guest_switch_names_a_bridge_only_the_file_has(tmp_path):
    fs, gpus, nic = guest_tree(tmp_path, switch=False)
    links = dict(PIX, gpu=GEN4, nic=GEN5, switch=GEN4)
    top = parse(nccl_topo.topology_file(fs, ["mlx5_0"], nccl_topo.check_links(links))[0])
    (bridge,) = top.subs[0].subs
    assert bridge.attrs["busid"] == "ffff:ff:01.0" and bridge.attrs["link_speed"] == "16.0 GT/s PCIe"
    speeds = dict((leaf.attrs["busid"], leaf.attrs["link_speed"]) for leaf in bridge.subs)
    assert speeds == {gpus[0]: "16.0 GT/s PCIe", nic: "32.0 GT/s PCIe"}


def test_two_gpus_and_a_vf_in_one_switch(tmp_path):
    fs, gpus, nic = guest_tree(tmp_path, gpus=2)
    top = parse(nccl_topo.topology_file(fs, ["mlx5_0"], nccl_topo.check_links(PIX))[0])
    assert [leaf.attrs["busid"] for leaf in top.subs[0].subs[0].subs] == [gpus[0], nic, gpus[1]]


@pytest.mark.parametrize("level", ["PHB", "NODE"])
def test_host_bridge_levels_put_the_devices_under_their_numa_node(tmp_path, level):
    fs, gpus, nic = guest_tree(tmp_path, switch=False)
    links = {"level": level, "gpu": GEN5, "nic": GEN5, "switch": None, "missing": None}
    top = parse(nccl_topo.topology_file(fs, ["mlx5_0"], nccl_topo.check_links(links))[0])
    assert [leaf.attrs["busid"] for leaf in top.subs[0].subs] == [gpus[0], nic]
    assert all(not leaf.subs for leaf in top.subs[0].subs)


def test_sys_needs_the_guest_numa_nodes_apart(tmp_path):
    links = {"level": "SYS", "gpu": GEN5, "nic": GEN5, "switch": None, "missing": None}
    fs, gpus, nic = guest_tree(tmp_path / "apart", switch=False, nodes=(0, 1), gpu_node=0, nic_node=1)
    top = parse(nccl_topo.topology_file(fs, ["mlx5_0"], nccl_topo.check_links(links))[0])
    assert [(cpu.attrs["numaid"], [leaf.attrs["busid"] for leaf in cpu.subs]) for cpu in top.subs] == [("0", gpus), ("1", [nic])]
    fs, _gpus, _nic = guest_tree(tmp_path / "together", switch=False, nodes=(0, 1), gpu_node=1, nic_node=1)
    text, details = nccl_topo.topology_file(fs, ["mlx5_0"], nccl_topo.check_links(links))
    assert text is None and "share guest NUMA node 1" in details["reason"]


@pytest.mark.parametrize("links, tree, devices, reason", [
    (None, {}, ["mlx5_0"], "no host link facts were given"),
    ({"missing": "the host model has no max_link_speed for 0000:1b:00.0"}, {}, ["mlx5_0"], "link facts are unknown: the host model"),
    (PIX, {}, ["rxe0"], "rxe0 is not a PCI function"),
    (dict(PIX, level="PXB"), {}, ["mlx5_0"], "PXB apart"),
    (PIX, {"nodes": (0, 1)}, ["mlx5_0"], "has no NUMA node in this guest"),
    (PIX, {"nodes": (0, 1), "gpu_node": 0, "nic_node": 1}, ["mlx5_0"], "holds only GPUs"),
])
def test_no_file_and_why(tmp_path, links, tree, devices, reason):
    fs, _gpus, _nic = guest_tree(tmp_path, **tree)
    text, details = nccl_topo.topology_file(fs, devices, None if links is None else nccl_topo.check_links(links))
    assert text is None and reason in details["reason"]


def test_a_guest_without_gpus_gets_no_file(tmp_path):
    """The tenant bench's guests: a virtio NIC with soft-RoCE, no GPU."""
    tree = FakeHost(tmp_path)
    tree.add_pci("0000:01:00.0", "0x1af4", "0x1041", "0x020000", root_bus="pci0000:00")
    os.makedirs(tree.p("/sys/class/infiniband/rxe0"))
    text, details = nccl_topo.topology_file(Sysfs(str(tmp_path)), ["rxe0"], nccl_topo.check_links(PIX))
    assert text is None and "soft-RoCE" in details["reason"] and details["gpus"] == []


@pytest.mark.parametrize("links, message", [
    ("PIX", "expected the host's link facts"),
    ({"level": "PIX", "gpu": GEN5, "nic": GEN5, "switch": GEN5, "missing": None, "speed": 1}, "unknown keys speed"),
    (dict(PIX, level="LOC"), "not a distance of the plan"),
    (dict(PIX, switch=None, unknown="no switch"), "topo_links.unknown: expected"),
    (dict(PIX, switch=None, unknown={"bridge": "x"}), "topo_links.unknown: expected"),
    (dict(PIX, gpu={"link_speed": "16 Gb/s", "link_width": 16}), "topo_links.gpu.link_speed"),
    (dict(PIX, nic={"link_speed": "16.0 GT/s PCIe", "link_width": 0}), "topo_links.nic.link_width"),
    (dict(PIX, nic="x16"), "topo_links.nic: expected {link_speed, link_width}"),
])
def test_bad_links_are_refused(links, message):
    with pytest.raises(InputError) as error:
        nccl_topo.check_links(links)
    assert message in str(error.value)


def test_kernel_speed_strings_are_nccls():
    """Both forms the kernel prints (before and after Linux 5.7) are in NCCL's table; a value without the unit is not."""
    assert nccl_topo.speed_ok("16 GT/s") and nccl_topo.speed_ok("32.0 GT/s PCIe") and nccl_topo.speed_ok("64.0 GT/s PCIe")
    assert not nccl_topo.speed_ok("16.0") and not nccl_topo.speed_ok("Unknown")


def test_a_guest_kernel_without_numa_puts_everything_on_node_0(tmp_path):
    fs, _gpus, _nic = guest_tree(tmp_path, nodes=())
    assert parse(nccl_topo.topology_file(fs, ["mlx5_0"], nccl_topo.check_links(PIX))[0]).subs[0].attrs == {"numaid": "0"}


UNKNOWN = {"gpu": "the host model has no max_link_speed/max_link_width for 0000:10:00.0",
           "nic": "the host model has no max_link_speed/max_link_width for 0000:18:00.0",
           "switch": "no bridge shared by the GPUs and PFs"}


def _partial(level, known=(), unknown=("gpu", "nic", "switch")):
    links = {"level": level, "gpu": None, "nic": None, "switch": None, "missing": None,
             "unknown": dict((kind, UNKNOWN[kind]) for kind in unknown)}
    links.update(dict((kind, GEN4) for kind in known))
    return links


@pytest.mark.parametrize("links, tree, elements", [
    # the DGX A100-class and HGX H100 captures: no link at all; the guest's own switch and devices, links left to NCCL
    (_partial("PIX"), {}, {"bridge": None, "gpu": None, "nic": None}),
    (_partial("PHB"), {"switch": False}, {"gpu": None, "nic": None}),
    (_partial("NODE"), {"switch": False}, {"gpu": None, "nic": None}),
    # GPUs of different links (or none known): their elements without one, the VF's PF's link kept
    (_partial("PHB", known=("nic",), unknown=("gpu",)), {"switch": False}, {"gpu": None, "nic": GEN4}),
    (_partial("PIX", known=("nic", "switch"), unknown=("gpu",)), {"gpus": 2}, {"bridge": GEN4, "gpu": None, "nic": GEN4}),
    # PFs of different links: the GPUs' kept
    (_partial("PIX", known=("gpu", "switch"), unknown=("nic",)), {}, {"bridge": GEN4, "gpu": GEN4, "nic": None}),
    # a bridge only the file names, with the host switch's link: the file may name it
    (_partial("PIX", known=("switch",), unknown=("gpu", "nic")), {"switch": False}, {"bridge": GEN4, "gpu": None, "nic": None}),
])
def test_known_facts_written_unknown_links_left_to_nccl(tmp_path, links, tree, elements):
    """Each element carries the host's link where it is known and none where it is not; every element without one is a
    device of the guest (NCCL reads its link there, never the 8 GT/s x16 fallback of a bus ID without sysfs)."""
    fs, gpus, nic = guest_tree(tmp_path, **tree)
    checked = nccl_topo.check_links(links)
    text, details = nccl_topo.topology_file(fs, ["mlx5_0"], checked)
    # the switch's link matters with PIX only
    wanted = dict((kind, why) for kind, why in links["unknown"].items() if kind != "switch" or links["level"] == "PIX")
    assert details["reason"] is None and details["from_guest"] == checked["unknown"] == wanted, details
    top = parse(text)
    links_fillable(top, set(fs.listdir(nccl_topo.PCI_DEVICES)))
    found = {}
    for node in top.walk():
        if node.name != "pci":
            continue
        kind = "bridge" if node.subs else ("nic" if node.attrs["busid"] == nic else "gpu")
        assert kind != "gpu" or node.attrs["busid"] in gpus
        link = {"link_speed": node.attrs["link_speed"], "link_width": int(node.attrs["link_width"])} if "link_speed" in node.attrs else None
        assert found.setdefault(kind, link) == link, (kind, text)
    assert found == elements, text


def test_a_file_only_bridge_without_the_host_switch_link_is_no_file(tmp_path):
    fs, _gpus, _nic = guest_tree(tmp_path, switch=False)
    text, details = nccl_topo.topology_file(fs, ["mlx5_0"], nccl_topo.check_links(_partial("PIX")))
    assert text is None and "no bridge above its GPUs and VF" in details["reason"] and "8 GT/s x16" in details["reason"]
    assert UNKNOWN["switch"] in details["reason"] and details["from_guest"] == {}


def test_the_rule_refuses_a_file_only_bridge_without_a_link():
    """A control for links_fillable: the published files' bridges (ffff:ff:..) carry links; without them NCCL would guess."""
    top = parse(fixture_text("ndv4-topo.xml"))
    links_fillable(top, set())
    bare = fixture_text("ndv4-topo.xml").replace('class="0x060400" link_speed="16 GT/s" link_width="16"', 'class="0x060400"', 1)
    with pytest.raises(TopoError) as error:
        links_fillable(parse(bare), set())
    assert "no sysfs path: NCCL would read 8 GT/s x16" in str(error.value)


def _link_of(node):
    return {"link_speed": node.attrs["link_speed"], "link_width": int(node.attrs["link_width"])}


@pytest.mark.parametrize("tree", [{}, {"gpus": 2}, {"switch": False}])
def test_pxb_tenant_gets_three_file_only_bridge_levels(tmp_path, tree):
    """The host's shared switch, and below it the GPUs' and the VF's switch, as bridges only the file names (the guest's
    one emulated switch, or none, is not in the file); NCCL reads the path between each GPU and the NIC as PXB."""
    fs, gpus, nic = guest_tree(tmp_path, **tree)
    text, details = nccl_topo.topology_file(fs, ["mlx5_0"], nccl_topo.check_links(PXB))
    assert details["reason"] is None and details["level"] == "PXB" and details["from_guest"] == {}, details
    top = parse(text)
    links_fillable(top, set(fs.listdir(nccl_topo.PCI_DEVICES)))
    (cpu,) = top.subs
    (shared,) = cpu.subs
    assert (shared.attrs["busid"], shared.attrs["class"], _link_of(shared)) == ("ffff:ff:01.0", "0x060400", GEN5)
    sides = [(side.attrs["busid"], _link_of(side), [leaf.attrs["busid"] for leaf in side.subs]) for side in shared.subs]
    assert sides == [("ffff:ff:02.0", GEN4, gpus), ("ffff:ff:03.0", GEN5, [nic])], text
    assert all(not leaf.subs and _link_of(leaf) == GEN5 for side in shared.subs for leaf in side.subs)
    assert [path_type(top, gpu, nic) for gpu in gpus] == ["PXB"] * len(gpus)
    if len(gpus) > 1:
        assert path_type(top, gpus[0], gpus[1]) == "PIX"


@pytest.mark.parametrize("kind", ["shared_switch", "gpu_switch", "nic_switch"])
def test_pxb_without_a_switch_level_link_is_no_file(tmp_path, kind):
    fs, _gpus, _nic = guest_tree(tmp_path)
    why = "the host model has no max_link_speed/max_link_width for 0000:0f:00.0"
    links = dict(PXB, unknown={kind: why})
    links[kind] = None
    text, details = nccl_topo.topology_file(fs, ["mlx5_0"], nccl_topo.check_links(links))
    what = dict(nccl_topo.PXB_SWITCHES)[kind]
    assert text is None and "PXB apart" in details["reason"] and "%s (%s)" % (what, why) in details["reason"], details
    assert "8 GT/s x16" in details["reason"] and details["from_guest"] == {}


def test_pxb_without_a_reason_given_says_so(tmp_path):
    fs, _gpus, _nic = guest_tree(tmp_path)
    links = dict(PXB, gpu_switch=None)
    text, details = nccl_topo.topology_file(fs, ["mlx5_0"], nccl_topo.check_links(links))
    assert text is None and "the GPUs' switch below it (not given by the GPU host)" in details["reason"]


def test_pxb_leaves_unknown_device_links_to_nccl(tmp_path):
    """As with PIX, a GPU or NIC link the host cannot give is left to NCCL in the guest (the device is there)."""
    fs, gpus, nic = guest_tree(tmp_path)
    links = dict(PXB, gpu=None, unknown={"gpu": UNKNOWN["gpu"]})
    text, details = nccl_topo.topology_file(fs, ["mlx5_0"], nccl_topo.check_links(links))
    assert details["from_guest"] == {"gpu": UNKNOWN["gpu"]}
    top = parse(text)
    links_fillable(top, set(fs.listdir(nccl_topo.PCI_DEVICES)))
    assert path_type(top, gpus[0], nic) == "PXB"


def test_pxb_needs_gpus_and_vfs_on_one_guest_node(tmp_path):
    fs, _gpus, _nic = guest_tree(tmp_path, nodes=(0, 1), gpu_node=0, nic_node=1)
    text, details = nccl_topo.topology_file(fs, ["mlx5_0"], nccl_topo.check_links(PXB))
    assert text is None and "(PXB)" in details["reason"] and "holds only GPUs" in details["reason"]


SHARED_OPEN = '    <pci busid="ffff:ff:01.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">\n'
NIC_SIDE = '      </pci>\n      <pci busid="ffff:ff:03.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">\n'


@pytest.mark.parametrize("mutate, found", [
    # the two side bridges collapsed into one: GPU -> bridge -> NIC, which NCCL reads as PIX
    (lambda t: t.replace(NIC_SIDE, ""), "PIX"),
    # the shared bridge gone: each side bridge on the CPU, the path through the CPU reads PHB
    (lambda t: t.replace(SHARED_OPEN, "").replace("    </pci>\n  </cpu>", "  </cpu>"), "PHB"),
    # the NIC's side under another NUMA node's copy of the shared bridge: across the CPUs, SYS
    (lambda t: t.replace(NIC_SIDE, "      </pci>\n    </pci>\n  </cpu>\n  <cpu numaid=\"1\">\n" + SHARED_OPEN.replace("01.0", "04.0")
                         + NIC_SIDE.split("\n", 1)[1]), "SYS"),
])
def test_the_path_rule_catches_a_broken_pxb_file(tmp_path, mutate, found):
    """A control for path_type: a file whose tree does not hold PXB is read as what it holds."""
    fs, gpus, nic = guest_tree(tmp_path)
    text = nccl_topo.topology_file(fs, ["mlx5_0"], nccl_topo.check_links(PXB))[0]
    assert path_type(parse(text), gpus[0], nic) == "PXB"
    broken = mutate(text)
    assert broken != text
    assert path_type(parse(broken), gpus[0], nic) == found, broken
