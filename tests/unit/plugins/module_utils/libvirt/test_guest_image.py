# -*- coding: utf-8 -*-
"""The guest files of a tenant: overlay or copy of a base image and the NoCloud seed, made with
this machine's real qemu-img and genisoimage and read back with qemu-img info and isoinfo."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.guest_image import (
    GIB, GuestRemoval, image_info, plan_guest, seed_addresses, seed_documents, tenant_paths)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.guest_inputs import data_nic_mac, management_mac
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.ipv4 import check_ipv4
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import Run

from fakes.kernel import fixture_text  # pylint: disable=import-error
from fakes.system_commands import SystemCommands  # pylint: disable=import-error

GUEST_DIR = "/var/lib/libvirt/images/gpuvirt"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGd3b3JrZXhhbXBsZWtleWZvcnRlc3RzMDAwMDAwMDAw ops@example"
VF_MAC = "52:54:00:00:00:0a"


def fixture(name):
    return fixture_text("qemu_img/" + name)


@pytest.fixture
def host(tmp_path):
    return Host(str(tmp_path), commands=SystemCommands())


def make_base(host, size="1G", host_path="/srv/images/base.qcow2"):
    real = host.path(host_path)
    os.makedirs(os.path.dirname(real), exist_ok=True)
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", real, size], check=True)
    return host_path


def sha256(real):
    with open(real, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def options(base, **image):
    return {"image": dict({"base": base, "url": None, "checksum": None, "size_gb": 4, "copy": False}, **image),
            "cloud_init": {"user": "gpuvirt", "ssh_authorized_keys": [KEY], "packages": ["rdma-core", "ibverbs-utils"],
                           "hostname": None, "rdma_address": "10.20.0.11/24"},
            "management": {"network": "gpuvirt-mgmt", "bridge": None, "mac": None, "address": "192.168.150.11/24",
                           "gateway": "192.168.150.1", "dns": ["192.168.150.1"]},
            "guest_dir": GUEST_DIR}


def info(host, host_path):
    out = subprocess.run(["qemu-img", "info", "--output=json", host.path(host_path)], check=True, capture_output=True).stdout
    return json.loads(out)


def iso_file(real, name):
    return subprocess.run(["isoinfo", "-i", real, "-J", "-x", "/" + name], check=True, capture_output=True).stdout.decode()


def test_image_info_reads_real_qemu_img_output():
    assert image_info(fixture("info_base_qcow2.json"), "base") == {"format": "qcow2", "virtual_size": 3 * GIB, "backing": None}
    overlay = image_info(fixture("info_overlay_qcow2.json"), "overlay")
    assert overlay == {"format": "qcow2", "virtual_size": 10 * GIB, "backing": "/tmp/qimg/base.qcow2"}
    assert image_info(fixture("info_raw.json"), "raw")["format"] == "raw"
    with pytest.raises(StateError, match="did not answer JSON"):
        image_info("qemu-img: Could not open", "x")


def test_overlay_and_seed_are_made_and_read_back(host):
    base = make_base(host)
    plan = plan_guest(host, "tenant-a", options(base), vf_mac=VF_MAC)
    assert [step[0] for step in plan.steps] == ["overlay", "seed"]
    run = Run()
    plan.apply(host, run)
    assert run.changed and run.elapsed_s == {}  # an overlay and a seed take no time worth a report
    paths = tenant_paths(GUEST_DIR, "tenant-a")
    disk = info(host, paths["disk"])
    assert disk["format"] == "qcow2" and disk["virtual-size"] == 4 * GIB
    assert disk["backing-filename"] == host.path(base) and disk["backing-filename-format"] == "qcow2"
    seed = host.path(paths["seed"])
    volume = subprocess.run(["isoinfo", "-d", "-i", seed], check=True, capture_output=True).stdout.decode()
    assert "Volume id: cidata" in volume
    user_data = iso_file(seed, "user-data")
    assert user_data.startswith("#cloud-config\n")
    body = json.loads(user_data.split("\n", 1)[1])
    assert body["users"][0]["ssh_authorized_keys"] == [KEY] and body["users"][0]["name"] == "gpuvirt"
    assert body["packages"] == ["rdma-core", "ibverbs-utils"] and body["ssh_pwauth"] is False
    # packages asked for: the apt index is read first; the host name resolves without touching the rest of /etc/hosts
    assert body["package_update"] is True and body["manage_etc_hosts"] == "localhost"
    network = json.loads(iso_file(seed, "network-config"))
    assert network["version"] == 2
    assert network["ethernets"]["rdma"] == {"match": {"macaddress": VF_MAC}, "addresses": ["10.20.0.11/24"]}
    management = network["ethernets"]["management"]
    assert management["match"]["macaddress"] == management_mac("tenant-a")
    assert management["addresses"] == ["192.168.150.11/24"]
    assert management["routes"] == [{"to": "0.0.0.0/0", "via": "192.168.150.1"}]
    assert json.loads(iso_file(seed, "meta-data")) == {"instance-id": "tenant-a", "local-hostname": "tenant-a"}
    # a second run has nothing to make
    again = plan_guest(host, "tenant-a", options(base), vf_mac=VF_MAC)
    assert not again.changed and again.diff() == []


def test_full_copy_has_no_backing_file_and_is_grown(host):
    base = make_base(host)
    plan = plan_guest(host, "tenant-b", options(base, copy=True, size_gb=2), vf_mac=VF_MAC)
    run = Run()
    plan.apply(host, run)
    assert list(run.elapsed_s) == ["copy " + tenant_paths(GUEST_DIR, "tenant-b")["disk"]]
    disk = info(host, tenant_paths(GUEST_DIR, "tenant-b")["disk"])
    assert "backing-filename" not in disk and disk["virtual-size"] == 2 * GIB


def test_a_changed_seed_is_rebuilt_with_a_diff(host):
    base = make_base(host)
    plan_guest(host, "tenant-a", options(base), vf_mac=VF_MAC).apply(host, Run())
    changed = options(base)
    changed["cloud_init"]["rdma_address"] = "10.20.0.12/24"
    plan = plan_guest(host, "tenant-a", changed, vf_mac=VF_MAC)
    assert [step[0] for step in plan.steps] == ["seed"]
    diffs = dict((d["after_header"], d) for d in plan.diff())
    entry = diffs[tenant_paths(GUEST_DIR, "tenant-a")["seed_dir"] + "/network-config"]
    assert "10.20.0.11/24" in entry["before"] and "10.20.0.12/24" in entry["after"]
    plan.apply(host, Run())
    assert "10.20.0.12/24" in iso_file(host.path(tenant_paths(GUEST_DIR, "tenant-a")["seed"]), "network-config")


def test_missing_base_image_is_refused_before_any_change(host, tmp_path):
    with pytest.raises(InputError, match="image.base: /srv/none.qcow2 is not a file on the host"):
        plan_guest(host, "tenant-a", options("/srv/none.qcow2"), vf_mac=VF_MAC)
    assert not os.path.exists(host.path(GUEST_DIR))


def test_disk_smaller_than_the_image_is_refused(host):
    base = make_base(host, size="3G")
    with pytest.raises(InputError, match=r"image.size_gb: 2 GiB is smaller than the virtual size of .* \(3.0 GiB\); give at least 3"):
        plan_guest(host, "tenant-a", options(base, size_gb=2), vf_mac=VF_MAC)
    assert not os.path.exists(host.path(GUEST_DIR))


def test_checksum_mismatch_is_refused_and_a_match_passes(host):
    base = make_base(host)
    with pytest.raises(InputError, match="image.checksum: image.base .* has sha256 [0-9a-f]{64}, not 0{64}; nothing was changed"):
        plan_guest(host, "tenant-a", options(base, checksum="sha256:" + "0" * 64), vf_mac=VF_MAC)
    assert not os.path.exists(host.path(GUEST_DIR))
    assert plan_guest(host, "tenant-a", options(base, checksum="sha256:" + sha256(host.path(base))), vf_mac=VF_MAC).changed


def test_a_download_with_the_wrong_checksum_is_removed(host, tmp_path):
    served = tmp_path / "served.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(served), "1G"], check=True)
    url = "file://" + str(served)
    # a URL is checked by its form first: only http(s) and ftp
    with pytest.raises(InputError, match="image.url"):
        plan_guest(host, "tenant-a", options(None, url=url, checksum="sha256:" + "0" * 64), vf_mac=VF_MAC)
    opts = options(None, url="http://images.example/debian-12-genericcloud-amd64.qcow2", checksum="sha256:" + "0" * 64)
    plan = plan_guest(host, "tenant-a", opts, vf_mac=VF_MAC, check_mode=True)
    assert ("fetch", GUEST_DIR + "/base/debian-12-genericcloud-amd64.qcow2") in plan.steps
    assert "not downloaded yet" in plan.notes[0]

    class Curl(SystemCommands):
        # the download: the served file copied where curl's -o says
        def run(self, argv, check=True, data=None):
            if os.path.basename(argv[0]) == "curl":
                self.calls.append(["curl"] + list(argv[1:]))
                with open(str(served), "rb") as src, open(argv[argv.index("-o") + 1], "wb") as dst:
                    dst.write(src.read())
                return 0, "", ""
            return super().run(argv, check, data)

    host.commands = Curl()
    with pytest.raises(InputError, match="the download of http://images.example/.* has sha256"):
        plan_guest(host, "tenant-a", opts, vf_mac=VF_MAC).apply(host, Run())
    assert os.listdir(host.path(GUEST_DIR + "/base")) == []
    good = dict(opts, image=dict(opts["image"], checksum="sha256:" + sha256(str(served))))
    run = Run()
    plan_guest(host, "tenant-a", good, vf_mac=VF_MAC).apply(host, run)
    assert list(run.elapsed_s) == ["fetch " + GUEST_DIR + "/base/debian-12-genericcloud-amd64.qcow2"]
    assert info(host, tenant_paths(GUEST_DIR, "tenant-a")["disk"])["backing-filename"] == host.path(
        GUEST_DIR + "/base/debian-12-genericcloud-amd64.qcow2")
    # the verified checksum is kept: the next run reads no image again
    assert not plan_guest(host, "tenant-a", good, vf_mac=VF_MAC).changed


@pytest.mark.parametrize("change, message", [
    (lambda o: o["image"].update(base="/a", url="http://x/y"), "give base .* or url"),
    (lambda o: o["image"].update(checksum="abc"), "is not ALGORITHM:HEX"),
    (lambda o: o["image"].update(size_gb=0), "image.size_gb: 0"),
    # a size qemu-img cannot make a qcow2 disk of (2 PiB with 64 KiB clusters): refused before any directory is made
    (lambda o: o["image"].update(size_gb=2097153), "image.size_gb: 2097153 GiB is more than qemu-img makes a qcow2 disk of "
                                                   r"\(2097152 GiB, 2 PiB, with its default 64 KiB clusters\); give at most 2097152"),
    (lambda o: o["cloud_init"].update(user="Root Admin"), "cloud_init.user"),
    (lambda o: o["cloud_init"].update(ssh_authorized_keys=["not a key"]), r"ssh_authorized_keys\[0\]"),
    (lambda o: o["cloud_init"].update(rdma_address="10.20.0.300/24"), "cloud_init.rdma_address"),
    (lambda o: o["management"].update(bridge="br0"), "management: give network .* or bridge"),
    (lambda o: o["management"].update(mac="01:00:5e:00:00:01"), "management.mac"),
    (lambda o: o["management"].update(address="192.168.150.11"), "management.address: .* with its prefix"),
    (lambda o: o.update(image=None), "cloud_init: needs image"),
])
def test_bad_guest_options_are_refused_before_any_change(host, change, message):
    opts = options(make_base(host))
    change(opts)
    with pytest.raises(InputError, match=message):
        plan_guest(host, "tenant-a", opts, vf_mac=VF_MAC)
    assert not os.path.exists(host.path(GUEST_DIR))


@pytest.mark.parametrize("data_nic, vf_mac, message", [
    ({"network": "data", "bridge": "br-data"}, None, "data_nic: give network .* or bridge"),
    ({}, None, "data_nic: give network .* or bridge"),
    ({"bridge": "br-data-for-tenants"}, None, "data_nic.bridge: 'br-data-for-tenants' is not a Linux bridge name"),
    ({"bridge": "br data"}, None, "data_nic.bridge: 'br data'"),
    ({"bridge": ".."}, None, r"data_nic.bridge: '\.\.'"),
    ({"network": "data/1"}, None, "data_nic.network: 'data/1' is not a libvirt network name"),
    ({"network": "data\nx"}, None, "data_nic.network"),
    ({"network": "data", "mac": "01:00:5e:00:00:01"}, None, "data_nic.mac"),
    ({"network": "data", "mac": management_mac("tenant-a")}, None, "data_nic.mac: .* is the management NIC's MAC too"),
    ({"network": "data", "vlan": 0}, None, "data_nic.vlan: 0 is not a VLAN ID; give 1 to 4094"),
    ({"network": "data", "vlan": 4095}, None, "data_nic.vlan: 4095"),
    # a tenant's RDMA NIC is its VF or its data NIC, never a guess between them
    ({"network": "data"}, VF_MAC, "data_nic: tenant tenant-a has a network VF too"),
    # an RDMA address with nothing to carry it is refused, not dropped
    (None, None, "cloud_init.rdma_address: tenant tenant-a has no network VF and no data_nic to carry 10.20.0.11/24"),
])
def test_bad_data_nics_are_refused_before_any_change(host, data_nic, vf_mac, message):
    opts = dict(options(make_base(host)), data_nic=data_nic)
    with pytest.raises(InputError, match=message):
        plan_guest(host, "tenant-a", opts, vf_mac=vf_mac)
    assert not os.path.exists(host.path(GUEST_DIR))


@pytest.mark.parametrize("data_nic, mac", [
    ({"network": "gpuvirt-data"}, data_nic_mac("tenant-a")),
    ({"bridge": "br-data", "mac": "02:00:00:AA:BB:01", "vlan": 100}, "02:00:00:aa:bb:01"),
])
def test_a_data_nic_carries_the_rdma_address_of_a_tenant_without_a_vf(host, data_nic, mac):
    plan = plan_guest(host, "tenant-a", dict(options(make_base(host)), data_nic=data_nic))
    assert plan.data_nic["mac"] == mac and plan.rdma_mac == mac
    plan.apply(host, Run())
    network = json.loads(iso_file(host.path(tenant_paths(GUEST_DIR, "tenant-a")["seed"]), "network-config"))
    assert network["ethernets"]["rdma"] == {"match": {"macaddress": mac}, "addresses": ["10.20.0.11/24"]}
    # the management NIC keeps its own MAC, derived in another space
    assert network["ethernets"]["management"]["match"]["macaddress"] == management_mac("tenant-a") != mac


def test_no_iso_builder_is_refused_naming_the_packages(tmp_path):
    host = Host(str(tmp_path), commands=SystemCommands(programs=["qemu-img"]))
    with pytest.raises(StateError, match="genisoimage .* xorriso"):
        plan_guest(host, "tenant-a", options(make_base(host)), vf_mac=VF_MAC)
    assert not os.path.exists(host.path(GUEST_DIR))


def test_a_disk_the_collection_did_not_make_is_not_taken(host):
    base = make_base(host)
    disk = host.path(tenant_paths(GUEST_DIR, "tenant-a")["disk"])
    os.makedirs(os.path.dirname(disk))
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", disk, "1G"], check=True)
    with pytest.raises(StateError, match="the collection did not make it"):
        plan_guest(host, "tenant-a", options(base), vf_mac=VF_MAC)


def test_removal_deletes_what_was_made_and_nothing_else(host):
    base = make_base(host)
    plan_guest(host, "tenant-a", options(base), vf_mac=VF_MAC).apply(host, Run())
    paths = tenant_paths(GUEST_DIR, "tenant-a")
    mine = host.path(paths["dir"] + "/notes.txt")
    with open(mine, "w", encoding="utf-8") as handle:
        handle.write("the operator's\n")
    removal = GuestRemoval(host, "tenant-a", GUEST_DIR)
    assert sorted(removal.files) == sorted([paths["disk"], paths["seed"], paths["manifest"]]
                                           + [paths["seed_dir"] + "/" + n for n in ("user-data", "meta-data", "network-config")])
    run = Run()
    removal.apply(host, run)
    assert run.changed
    assert sorted(os.listdir(host.path(paths["dir"]))) == ["notes.txt"]
    assert os.path.isfile(host.path(base))
    assert not GuestRemoval(host, "tenant-a", GUEST_DIR).changed


def test_seed_without_management_or_rdma_address():
    documents = seed_documents("t", {"user": "u", "ssh_authorized_keys": [], "packages": [], "hostname": "h"}, None, VF_MAC)
    assert json.loads(documents["network-config"]) == {"version": 2, "ethernets": {}}
    assert "packages" not in documents["user-data"]


@pytest.mark.parametrize("name", [".", "..", "a/../..", "tenant/x"])
def test_a_tenant_name_that_is_no_directory_of_its_own_is_refused(host, name):
    with pytest.raises(InputError, match="name"):
        tenant_paths(GUEST_DIR, name)
    with pytest.raises(InputError, match="name"):
        GuestRemoval(host, name, GUEST_DIR)
    assert not os.path.exists(host.path(GUEST_DIR))


ED25519 = KEY.split()[1]


@pytest.mark.parametrize("change, message", [
    # user names useradd would not take, or root
    (lambda c: c.update(user="a" * 33), "cloud_init.user: 'a{33}' is not a user name"),
    (lambda c: c.update(user="ops\nroot"), "cloud_init.user"),
    (lambda c: c.update(user="root"), "not root"),
    # host names (RFC 1123) and a tenant name that is none
    (lambda c: c.update(hostname="bad_host"), "cloud_init.hostname: 'bad_host' is not a host name"),
    (lambda c: c.update(hostname="-lead.example"), "cloud_init.hostname"),
    (lambda c: c.update(hostname="a" * 65), "cloud_init.hostname"),
    (lambda c: c.update(hostname="x\n#cloud-config"), "cloud_init.hostname"),
    # keys: one line of a known type whose data is base64 of that type
    (lambda c: c.update(ssh_authorized_keys=["ssh-foo %s ops" % ED25519]), r"ssh_authorized_keys\[0\]: not one OpenSSH"),
    (lambda c: c.update(ssh_authorized_keys=["ssh-ed25519 not-base64!! ops"]), r"ssh_authorized_keys\[0\]"),
    (lambda c: c.update(ssh_authorized_keys=["ssh-rsa %s ops" % ED25519]), r"ssh_authorized_keys\[0\]"),
    (lambda c: c.update(ssh_authorized_keys=[KEY + "\nssh-ed25519 %s evil" % ED25519]), r"ssh_authorized_keys\[0\]"),
    (lambda c: c.update(ssh_authorized_keys=["ssh-ed25519"]), r"ssh_authorized_keys\[0\]"),
    # packages that are apt options, or not one name
    (lambda c: c.update(packages=["--allow-unauthenticated"]), r"cloud_init.packages\[0\]: '--allow-unauthenticated'"),
    (lambda c: c.update(packages=["rdma-core", "-oAPT::Get::AllowUnauthenticated=true"]), r"cloud_init.packages\[1\]"),
    (lambda c: c.update(packages=["rdma-core ibverbs-utils"]), r"cloud_init.packages\[0\]"),
    (lambda c: c.update(packages=["#cloud-config"]), r"cloud_init.packages\[0\]"),
])
def test_cloud_init_inputs_the_guest_would_not_take_are_refused(host, change, message):
    opts = options(make_base(host))
    change(opts["cloud_init"])
    with pytest.raises(InputError, match=message):
        plan_guest(host, "tenant-a", opts, vf_mac=VF_MAC)
    assert not os.path.exists(host.path(GUEST_DIR))


def test_a_tenant_name_that_is_no_host_name_needs_a_hostname(host):
    with pytest.raises(InputError, match=r"cloud_init.hostname \(left out: the tenant's name; give one\): 'tenant_a'"):
        plan_guest(host, "tenant_a", options(make_base(host)), vf_mac=VF_MAC)
    opts = options(make_base(host))
    opts["cloud_init"]["hostname"] = "tenant-a"
    assert plan_guest(host, "tenant_a", opts, vf_mac=VF_MAC).changed


def test_good_cloud_init_inputs_pass_and_non_ascii_is_written_as_utf8(host):
    opts = options(make_base(host))
    opts["cloud_init"].update(user="_svc-1", packages=["python3", "libibverbs1:amd64", "rdma-core=44.0-2", "NetworkManager"],
                              hostname="gpu-a.example")
    opts["cloud_init"]["ssh_authorized_keys"] = [KEY + " Jos\u00e9 \U0001f511"]
    plan = plan_guest(host, "tenant-a", opts, vf_mac=VF_MAC)
    plan.apply(host, Run())
    user_data = iso_file(host.path(tenant_paths(GUEST_DIR, "tenant-a")["seed"]), "user-data")
    assert "Jos\u00e9 \U0001f511" in user_data and "\\u" not in user_data
    assert not plan.notes


def test_a_seed_without_a_key_says_nobody_can_log_in(host):
    opts = options(make_base(host))
    opts["cloud_init"]["ssh_authorized_keys"] = []
    plan = plan_guest(host, "tenant-a", opts, vf_mac=VF_MAC)
    assert any("nobody can log in" in note and "ssh_authorized_keys" in note for note in plan.notes)


def test_an_operators_own_seed_file_is_never_taken_over(host):
    base = make_base(host)
    user_data = host.path(tenant_paths(GUEST_DIR, "tenant-a")["seed_dir"] + "/user-data")
    os.makedirs(os.path.dirname(user_data))
    with open(user_data, "w", encoding="utf-8") as handle:
        handle.write("#cloud-config\n{}\n")
    with pytest.raises(StateError, match=r"seed/user-data exists and the collection did not make it"):
        plan_guest(host, "tenant-a", options(base), vf_mac=VF_MAC)
    with open(user_data, encoding="utf-8") as handle:
        assert handle.read() == "#cloud-config\n{}\n"


def _apply_in_a_process(root, name, start):
    from fakes.system_commands import SystemCommands  # pylint: disable=import-error,import-outside-toplevel
    host = Host(root, commands=SystemCommands())
    plan = plan_guest(host, name, options("/srv/images/base.qcow2"), vf_mac=VF_MAC)
    start.wait()  # both decided before either acts
    plan.apply(host, Run())


@pytest.mark.parametrize("round_", range(8))
def test_two_runs_at_once_on_one_root_lose_nothing(host, round_):
    import multiprocessing  # pylint: disable=import-outside-toplevel
    make_base(host)
    context = multiprocessing.get_context("fork")
    start = context.Barrier(2)
    runs = [context.Process(target=_apply_in_a_process, args=(host.root, "tenant-a", start)) for _index in range(2)]
    for run in runs:
        run.start()
    for run in runs:
        run.join(60)
    assert [run.exitcode for run in runs] == [0, 0], round_
    paths = tenant_paths(GUEST_DIR, "tenant-a")
    made = json.loads(open(host.path(paths["manifest"]), encoding="utf-8").read())["made"]
    assert paths["disk"] in made and paths["seed"] in made
    assert info(host, paths["disk"])["backing-filename"] == host.path("/srv/images/base.qcow2")
    assert not [n for n in os.listdir(host.path(paths["dir"])) if ".part" in n]
    # the next run has nothing to make
    assert not plan_guest(host, "tenant-a", options("/srv/images/base.qcow2"), vf_mac=VF_MAC).changed


@pytest.mark.parametrize("change, message", [
    # addresses no host can hold
    (lambda o: o["management"].update(address="192.168.150.0/24"), r"management.address: .* the network address of 192.168.150.0/24"),
    (lambda o: o["management"].update(address="192.168.150.255/24"), "the broadcast address of 192.168.150.0/24"),
    (lambda o: o["management"].update(address="127.0.0.5/8"), "a loopback address"),
    (lambda o: o["management"].update(address="224.0.0.5/24"), "a multicast address"),
    (lambda o: o["management"].update(address="0.1.2.3/8"), r"in 0.0.0.0/8"),
    (lambda o: o["management"].update(address="169.254.10.10/16"), "link-local"),
    (lambda o: o["management"].update(address="192.168.150.011/24"), "is not an IPv4 address"),
    (lambda o: o["cloud_init"].update(rdma_address="10.20.0.255/24"), r"cloud_init.rdma_address: .* broadcast"),
    # a gateway or name server with a prefix, outside the subnet, or the tenant's own address
    (lambda o: o["management"].update(gateway="192.168.150.1/24"), "management.gateway: '192.168.150.1/24' has a prefix"),
    (lambda o: o["management"].update(dns=["192.168.150.1/24"]), r"management.dns\[0\]: .* has a prefix"),
    (lambda o: o["management"].update(gateway="192.168.151.1"), "outside the tenant's subnet 192.168.150.0/24"),
    (lambda o: o["management"].update(gateway="192.168.150.11"), "is the tenant's own address"),
    # the RDMA address is its own
    (lambda o: o["cloud_init"].update(rdma_address="192.168.150.11/24"), "cloud_init.rdma_address: .* the management address"),
])
def test_addresses_no_host_can_hold_are_refused(host, change, message):
    opts = options(make_base(host))
    change(opts)
    with pytest.raises(InputError, match=message):
        plan_guest(host, "tenant-a", opts, vf_mac=VF_MAC)
    assert not os.path.exists(host.path(GUEST_DIR))


@pytest.mark.parametrize("address", ["10.0.0.1/8", "192.168.150.254/24", "100.64.0.10/10", "172.16.0.1/30", "10.9.9.9/32",
                                     "10.9.9.8/31"])
def test_host_addresses_pass(address):
    assert check_ipv4(address, "management.address", True) == address


@pytest.mark.parametrize("url, message, secret", [
    ("https://images.example/debian/..", "is not an http.s. or ftp URL of a file", None),
    ("https://images.example/debian/.", "is not an http.s. or ftp URL of a file", None),
    ("https://images.example/debian/", "is not an http.s. or ftp URL of a file", None),
    ("https://images.example/a b.qcow2", "is not an http.s. or ftp URL of a file", None),
    ("https://ops:s3cret@images.example/debian.qcow2", "names a user .and perhaps a password.", "s3cret"),
])
def test_bad_image_urls_are_refused_and_a_password_is_never_echoed(host, url, message, secret):
    opts = options(None)
    opts["image"].update(base=None, url=url, checksum="sha256:" + "0" * 64)
    with pytest.raises(InputError, match=message) as error:
        plan_guest(host, "tenant-a", opts, vf_mac=VF_MAC)
    assert secret is None or secret not in str(error.value)
    assert not os.path.exists(host.path(GUEST_DIR))


# ---------------------------------------------------------------------------- a base that is no disk
def _raw(real, size="4M"):
    subprocess.run(["qemu-img", "create", "-q", "-f", "raw", real, size], check=True)


def _partitioned(label):
    def make(real):
        _raw(real)
        subprocess.run(["sfdisk", "-q", real], input="label: %s\n,,L\n" % label, text=True, check=True, capture_output=True)
    return make


def _mkfs(*argv):
    def make(real):
        _raw(real, "40M")
        subprocess.run(list(argv) + [real], check=True, capture_output=True)
    return make


def _mkfs_sized(size, *argv):
    def make(real):
        _raw(real, size)
        subprocess.run(list(argv) + [real], check=True, capture_output=True)
    return make


def _luks(real):
    """A LUKS2 volume formatted on the file itself (cheap key derivation: only its header is read)."""
    _raw(real, "20M")
    subprocess.run(["cryptsetup", "luksFormat", "-q", "--batch-mode", "--type", "luks2", "--pbkdf", "pbkdf2",
                    "--pbkdf-force-iterations", "1000", "--key-file=-", real], input=b"stand-in passphrase", check=True,
                   capture_output=True)


def _iso(real):
    subprocess.run(["genisoimage", "-quiet", "-o", real, "-volid", "cidata", "/etc/hostname"], check=True)


def _write(data):
    def make(real):
        with open(real, "wb") as handle:
            handle.write(data)
    return make


def _packed(argv):
    """A real qcow2 image put through ``argv`` (a compressor or archiver writing ``real``)."""
    def make(real):
        image = real + ".qcow2"
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", image, "1G"], check=True)
        subprocess.run([a.format(real=real, image=image, name=os.path.basename(image), dir=os.path.dirname(image)) for a in argv],
                       check=True, shell=False)
        os.remove(image)
    return make


def _program(real):
    with open("/bin/true", "rb") as source, open(real, "wb") as handle:
        handle.write(source.read())


SHADOW = b"root:*:19700:0:99999:7:::\ndaemon:*:19700:0:99999:7:::\n"
# (what, how the file is made, what the message says it is)
NOT_DISKS = [
    ("a shadow file", _write(SHADOW), "a text file of %d bytes" % len(SHADOW)),
    ("an empty file", _write(b""), "an empty file"),
    ("a raw file of zeros", _raw, "4194304 bytes that are all zeros where a partition table or filesystem would begin"),
    ("a gzip of a qcow2 image", _packed(["sh", "-c", "gzip -c {image} > {real}"]), "gzip-compressed data (decompress it: gunzip)"),
    ("a tar of a qcow2 image", _packed(["tar", "-C", "{dir}", "-cf", "{real}", "{name}"]),
     "a tar archive (extract the image from it: tar -xf)"),
    ("a program", _program, "an ELF program or library"),
]
DISKS = [
    ("qcow2", lambda real: subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", real, "1G"], check=True)),
    ("raw, MBR", _partitioned("dos")),
    ("raw, GPT", _partitioned("gpt")),
    ("raw, ext4", _mkfs("mkfs.ext4", "-q", "-F")),
    ("raw, vfat", _mkfs("mkfs.vfat")),
    ("raw, ISO 9660", _iso),
    ("raw, swap", _mkfs("mkswap")),
    ("raw, XFS", _mkfs_sized("320M", "mkfs.xfs", "-q", "-f")),     # mkfs.xfs takes no filesystem under 300 MB
    ("raw, btrfs", _mkfs_sized("120M", "mkfs.btrfs", "-q", "-f")),
    ("raw, squashfs", lambda real: subprocess.run(["mksquashfs", "/etc/hostname", real, "-quiet", "-noappend", "-no-progress"],
                                                  check=True, capture_output=True)),
    ("raw, LUKS", _luks),
]
# An LVM physical volume is taken by its label's magic (disk_header.py names the source); pvcreate writes only to a
# block device (a loop device here would need the host's loop driver), so it is not made here


@pytest.mark.parametrize("what, make, found", NOT_DISKS, ids=[case[0] for case in NOT_DISKS])
def test_a_base_that_is_no_disk_is_refused_saying_what_it_is(host, what, make, found):
    """qemu-img reads any file as raw; a raw base needs a partition table or a filesystem at its start. The
    message names the option, the file, the tenant and what the file is instead, and quotes none of it."""
    from fakes.interrupt import tree_state  # pylint: disable=import-error,import-outside-toplevel
    base = "/srv/images/base.img"
    os.makedirs(os.path.dirname(host.path(base)))
    make(host.path(base))
    before = tree_state(host.root)
    for check_mode in (True, False):
        with pytest.raises(InputError) as error:
            plan_guest(host, "tenant-a", options(base), vf_mac=VF_MAC, check_mode=check_mode)
        assert str(error.value) == (
            "image.base: %s (tenant tenant-a) is not a disk image: qemu-img reads it as raw, and it is %s. Nothing was changed. "
            "Give the tenant's base cloud image (qcow2, or a raw disk with a partition table or a filesystem)" % (base, found)), what
    assert "root:" not in str(error.value)
    assert tree_state(host.root) == before


@pytest.mark.parametrize("what, make", DISKS, ids=[case[0] for case in DISKS])
def test_a_base_that_is_a_disk_is_taken(host, what, make):
    base = "/srv/images/base.img"
    os.makedirs(os.path.dirname(host.path(base)))
    make(host.path(base))
    plan = plan_guest(host, "tenant-a", options(base, size_gb=None), vf_mac=VF_MAC)
    assert [step[0] for step in plan.steps] == ["overlay", "seed"], what


# ---------------------------------------------------------------------------- a step that fails
def _left(message):
    """The host paths a failed step's message says are left on the host."""
    said = message.rsplit("left on the host: ", 1)
    return set(said[1].split(", ")) if len(said) == 2 else set()


def _new_paths(host, before):
    from fakes.interrupt import tree_state  # pylint: disable=import-error,import-outside-toplevel
    return set("/" + p for p in set(tree_state(host.root)) - set(before))


def test_qemu_img_at_the_largest_size_makes_the_disk(host):
    """The bound is qemu-img's own: 2097152 GiB is made (a sparse overlay), one more GiB is refused up front."""
    plan = plan_guest(host, "tenant-a", options(make_base(host), size_gb=2097152), vf_mac=VF_MAC)
    plan.apply(host, Run())
    assert info(host, tenant_paths(GUEST_DIR, "tenant-a")["disk"])["virtual-size"] == 2097152 * GIB


def test_a_disk_step_that_fails_leaves_nothing_of_the_tenant_and_says_what_stays(host):
    """qemu-img fails at the disk (the base removed after the plan read it): the partial disk, the tenant's
    directory and its list of made files are gone; what stays (directories shared with other tenants, the
    lock files) is said, path by path, and is all that is new on the host."""
    from fakes.interrupt import tree_state  # pylint: disable=import-error,import-outside-toplevel
    base = make_base(host)
    before = tree_state(host.root)
    plan = plan_guest(host, "tenant-a", options(base), vf_mac=VF_MAC)
    os.remove(host.path(base))
    with pytest.raises(StateError) as error:
        plan.apply(host, Run())
    message = str(error.value)
    assert message.startswith("command failed (rc=1): ") and "The overlay step of tenant tenant-a stopped; what it made of " \
        "the tenant's own was removed, left on the host: " in message
    paths = tenant_paths(GUEST_DIR, "tenant-a")
    assert not os.path.exists(host.path(paths["dir"]))
    new = _new_paths(host, {k: v for k, v in before.items() if k != "srv/images/base.qcow2"})
    assert _left(message) == new
    assert new == {"/var", "/var/lib", "/var/lib/libvirt", "/var/lib/libvirt/images", GUEST_DIR, GUEST_DIR + "/tenants",
                   GUEST_DIR + "/.locks", GUEST_DIR + "/.locks/tenants%tenant-a%disk.qcow2.lock",
                   GUEST_DIR + "/.locks/tenants%tenant-a%made.json.lock"}
    # the next run makes the disk afresh, nothing of the failed one in its way
    make_base(host)
    again = plan_guest(host, "tenant-a", options(base), vf_mac=VF_MAC)
    assert [step[0] for step in again.steps] == ["overlay", "seed"]
    again.apply(host, Run())
    assert info(host, paths["disk"])["backing-filename"] == host.path(base)


def test_a_seed_step_that_fails_keeps_the_disk_made_before_it_and_says_so(host):
    """The disk is made, then the ISO builder fails: the seed's files and partial ISO are removed, the tenant's
    list of made files still lists the disk (made by this run) and nothing of the seed."""
    base = make_base(host)
    plan = plan_guest(host, "tenant-a", options(base), vf_mac=VF_MAC)

    class NoIso(SystemCommands):
        def run(self, argv, check=True, data=None):
            if os.path.basename(argv[0]) == "genisoimage":
                return super().run(["sh", "-c", "echo 'genisoimage: No space left on device' >&2; exit 1"], check, data)
            return super().run(argv, check, data)

    host.commands = NoIso()
    with pytest.raises(StateError) as error:
        plan.apply(host, Run())
    paths = tenant_paths(GUEST_DIR, "tenant-a")
    assert "No space left on device. The seed step of tenant tenant-a stopped" in str(error.value)
    assert not os.path.exists(host.path(paths["seed_dir"])) and not os.path.exists(host.path(paths["seed"] + ".part"))
    made = json.loads(open(host.path(paths["manifest"]), encoding="utf-8").read())["made"]
    assert made == [paths["disk"], paths["disk"] + ".part", paths["manifest"]]  # a partial disk is listed so a removal finds it
    assert _left(str(error.value)) == {GUEST_DIR + "/.locks/tenants%tenant-a%seed.iso.lock"}


def test_a_bad_download_says_what_stays(host, tmp_path):
    """A download with the wrong checksum is removed; the message no longer says nothing was changed: it names the
    directories and lock file the step made, which are all that is new on the host."""
    from fakes.interrupt import tree_state  # pylint: disable=import-error,import-outside-toplevel
    served = tmp_path / "served.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(served), "1G"], check=True)

    class Curl(SystemCommands):
        def run(self, argv, check=True, data=None):
            if os.path.basename(argv[0]) == "curl":
                with open(str(served), "rb") as src, open(argv[argv.index("-o") + 1], "wb") as dst:
                    dst.write(src.read())
                return 0, "", ""
            return super().run(argv, check, data)

    host.commands = Curl()
    before = tree_state(host.root)
    opts = options(None, url="http://images.example/debian-12-genericcloud-amd64.qcow2", checksum="sha256:" + "0" * 64)
    with pytest.raises(InputError) as error:
        plan_guest(host, "tenant-a", opts, vf_mac=VF_MAC).apply(host, Run())
    message = str(error.value)
    assert "; the download was removed. Give the checksum" in message and "nothing was changed" not in message
    assert _left(message) == _new_paths(host, before)
    assert GUEST_DIR + "/base" in _left(message) and not os.listdir(host.path(GUEST_DIR + "/base"))


def test_seed_addresses_are_read_from_the_network_config_beside_a_seed(host):
    """The addresses another domain's seed gives (the tenants stage refuses them to a tenant): read from
    the network-config this code keeps beside the seed.iso; a disk that is no seed, or a seed without its
    files, gives none."""
    paths = tenant_paths(GUEST_DIR, "legacy")
    documents = seed_documents("legacy", {"user": "ops", "ssh_authorized_keys": [], "packages": [], "rdma_address": "10.20.0.9/24"},
                               {"network": "gpuvirt-mgmt", "mac": "52:54:00:00:00:99", "address": "192.168.150.9/24"}, VF_MAC)
    os.makedirs(host.path(paths["seed_dir"]))
    with open(host.path(paths["seed_dir"] + "/network-config"), "w", encoding="utf-8") as handle:
        handle.write(documents["network-config"])
    assert seed_addresses(host, [paths["disk"], paths["seed"], paths["seed"]]) == ["192.168.150.9", "10.20.0.9"]
    assert seed_addresses(host, [paths["disk"], tenant_paths(GUEST_DIR, "other")["seed"]]) == []
