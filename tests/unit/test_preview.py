# -*- coding: utf-8 -*-
"""The preview (docs/preview.md) of the example inventory on the unit tests' DGX A100-class tree
(tests/tools/dgx_tree.py): site.yml in check and diff mode with gpuvirt_host_root, on this
machine through the inventory's preview alias (connection local). One test, two runs:

- the host stages: the preflight plan fits, and each stage prints its planned change (the GRUB
  line with IOMMU, pre-binding and 1G hugepages; the VF counts; the GPUs' move to vfio-pci),
  while the tree is left as it was, in four module calls on the host (the gate's read and one call
  per host stage, each deciding on the host from the inventory's desired state);
- the tenants stage: a domain XML per tenant (libvirt's test driver stands for the host's
  libvirt), UEFI and an OVMF 64-bit MMIO window that holds its GPUs' BARs (the tree's A100 40GB
  has a 64 GiB BAR1), its vCPUs pinned to the node of its GPU, each network VF an interface with
  its own MAC and VLAN;
- a tenant that cannot be placed stops the run at the preflight gate, with a non-zero exit.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import os
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def load_dgx_tree():
    spec = importlib.util.spec_from_file_location("dgx_tree", os.path.join(REPO, "tests", "tools", "dgx_tree.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def digest(tree):
    """Every file's content and every link's target under ``tree``."""
    sha = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(tree)):
        dirs.sort()
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]):
            path = os.path.join(folder, name)
            sha.update(path.encode())
            sha.update(os.readlink(path).encode() if os.path.islink(path) else open(path, "rb").read())
    return sha.hexdigest()


# Test helper: the action of every task that ran, on which host and whether delegated, one JSON
# object a line into $GPUVIRT_PREVIEW_TASKS.
RECORDER = """
from ansible.plugins.callback import CallbackBase
import json, os


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "record_tasks"
    CALLBACK_NEEDS_ENABLED = True

    def v2_runner_on_ok(self, result):
        with open(os.environ["GPUVIRT_PREVIEW_TASKS"], "a") as handle:
            handle.write(json.dumps({"task": result.task_name, "action": result._task.action, "host": result._host.get_name(),
                                     "delegated": bool(result._task.delegate_to)}) + "\\n")

    v2_runner_on_failed = v2_runner_on_ok
"""
# What runs on the controller only (no round trip to the host).
CONTROLLER_ACTIONS = {"ansible.builtin.set_fact", "ansible.builtin.debug", "ansible.builtin.assert", "ansible.builtin.fail",
                      "ansible.builtin.validate_argument_spec", "ansible.builtin.meta", "ansible.builtin.set_stats"}


def preview(tmp_path, *extra):
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", os.path.join(REPO, "inventories", "example"),
            os.path.join(REPO, "playbooks", "site.yml"), "--check", "--diff",
            "-e", "gpuvirt_host_root=%s" % (tmp_path / "dgx"), "-e", "gpuvirt_preflight_report_dir=%s" % (tmp_path / "reports")]
    plugins = tmp_path / "callbacks"
    plugins.mkdir(exist_ok=True)
    (plugins / "record_tasks.py").write_text(RECORDER)
    tasks = tmp_path / "tasks.jsonl"
    if tasks.exists():
        tasks.unlink()
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_CALLBACK_PLUGINS=str(plugins), ANSIBLE_CALLBACKS_ENABLED="record_tasks", GPUVIRT_PREVIEW_TASKS=str(tasks))
    done = subprocess.run(argv + list(extra), cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=600, check=False)
    return done.returncode, done.stdout + done.stderr


def host_calls(tmp_path):
    """The module calls the last preview made on the previewed host: its tasks that ran, less what runs
    on the controller alone (set_fact, debug, ...) and what was delegated to it (the report file)."""
    with open(tmp_path / "tasks.jsonl", encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle]
    return [r["action"] for r in records if r["host"] == "dgx01-preview" and not r["delegated"]
            and r["action"] not in CONTROLLER_ACTIONS]


def test_preview_of_the_example_inventory_on_the_dgx_tree(tmp_path):
    load_dgx_tree().write_tree(str(tmp_path / "dgx"))
    before = digest(tmp_path / "dgx")

    rc, out = preview(tmp_path)
    assert rc == 0, out[-4000:]
    assert "plan                   PASS    fits: tenant-a on node" in out
    # boot: one GRUB edit with the IOMMU in passthrough, the GPUs pre-bound, 1G pages at boot
    assert ('+GRUB_CMDLINE_LINUX="iommu=pt pci-stub.ids=10de:20b0 modprobe.blacklist=nouveau,nvidia,nvidia_drm,nvidia_modeset,'
            'nvidia_uvm,nvidiafb hugepagesz=1G hugepages=1:100,3:100,5:100,7:100"') in out
    # SR-IOV: 4 VFs on each of the 8 compute PFs
    for pf in ("19", "21", "39", "41", "59", "61", "79", "81"):
        assert "+++ after: PF 0000:%s:00.0" % pf in out
    assert out.count('+  "num_vfs": 4,') == 8
    # VFIO: the 8 GPUs leave nvidia for vfio-pci; the VFs to come are named
    assert out.count('-    "driver": "nvidia",') == 8
    assert "the VFs of 0000:19:00.0, 0000:21:00.0" in out and "do not exist yet" in out
    # the GPU host stack: nouveau and the nvidia modules kept off the tenants' GPUs
    assert "+blacklist nouveau" in out and "modprobe.blacklist=nouveau,nvidia" in out
    # tenants: planned on the host as the host stages leave it, and said so
    assert "PREVIEW: the tenants are planned on the host as the boot, SR-IOV and VFIO stages" in out
    tenants = {"tenant-a": 1, "tenant-b": 1, "tenant-c": 2, "tenant-d": 1}
    # all of them in one tenant_domain call (one round trip), a diff per tenant
    assert "every placed tenant's domain (one call)" in out
    for name in tenants:
        assert "+++ after: %s (persistent XML)" % name in out
    assert out.count('+  <os firmware="efi">') == len(tenants)
    # one A100 40GB: 64 GiB BAR1 + 32 MiB BAR3 + headroom -> 128 GiB; two -> 256 GiB
    windows = sorted(int(w) for w in re.findall(r'<qemu:arg value="name=opt/ovmf/X-PciMmio64Mb,string=(\d+)" />', out))
    assert windows == sorted({1: 131072, 2: 262144}[gpus] for gpus in tenants.values())
    assert out.count("<vcpupin ") >= len(tenants) and '<interface type="hostdev" managed="no">' in out
    assert digest(tmp_path / "dgx") == before, "the preview changed the capture"
    # one module call per host stage, each decided on the host, and the gate's read: no stage reads the host again
    assert host_calls(tmp_path) == ["gpuvirt.tenancy.preflight_info", "gpuvirt.tenancy.iommu_grub", "gpuvirt.tenancy.vfio_bind",
                                    "gpuvirt.tenancy.tenant_domain"], host_calls(tmp_path)

    survey = json.dumps({"gpuvirt_survey_tenants": "[{name: huge, gpus: 9, vfs: 1, vcpus: 4, memory_mb: 4096}]"})
    rc, out = preview(tmp_path, "-e", survey)
    assert rc != 0
    assert "ROLLOUT STOPPED" in out and "huge" in out


def domain_xmls(out):
    """Each tenant's domain XML as the preview's diff prints it (a new domain: every line added)."""
    found = {}
    for match in re.finditer(r"\+\+\+ after: (\S+) \(persistent XML\)\n@@[^\n]*\n((?:\+[^\n]*\n)+)", out):
        found[match.group(1)] = "".join(line[1:] + "\n" for line in match.group(2).splitlines())
    return found


def bare_intel_iommu_off(root):
    """A bare Intel host: VT-d on in the BIOS (the DMAR table), the IOMMU off in the kernel (no
    groups, no /sys/class/iommu units), as Ubuntu's kernel leaves it without intel_iommu=on."""
    for folder, dirs, files in os.walk(os.path.join(root, "sys")):
        for name in list(dirs) + files:
            path = os.path.join(folder, name)
            if name in ("iommu_group", "iommu") and os.path.islink(path):
                os.remove(path)
    for path in ("sys/kernel/iommu_groups", "sys/class/iommu"):
        subprocess.run(["rm", "-rf", os.path.join(root, path)], check=True)
    os.makedirs(os.path.join(root, "sys/kernel/iommu_groups"))
    tables = os.path.join(root, "sys/firmware/acpi/tables")
    os.makedirs(tables, exist_ok=True)
    with open(os.path.join(tables, "DMAR"), "wb") as handle:
        handle.write(b"DMAR")
    cpuinfo = os.path.join(root, "proc/cpuinfo")
    text = open(cpuinfo, encoding="utf-8").read().replace("AuthenticAMD", "GenuineIntel")
    with open(cpuinfo, "w", encoding="utf-8") as handle:
        handle.write(text)


def sriov_off_in_firmware(root):
    """SR-IOV off in the ConnectX firmware (SRIOV_EN False, NUM_OF_VFS 0): the PFs expose no
    SR-IOV capability, so sysfs has none of their sriov_* attributes."""
    for folder, _dirs, files in os.walk(os.path.join(root, "sys", "devices")):
        for name in files:
            if name.startswith("sriov_"):
                os.remove(os.path.join(folder, name))


def rhel_family(root):
    """A Rocky Linux 9 host: the boot stage adds dracut's rd.driver.blacklist= too."""
    with open(os.path.join(root, "etc/os-release"), "w", encoding="utf-8") as handle:
        handle.write('NAME="Rocky Linux"\nVERSION_ID="9.4"\nID="rocky"\nID_LIKE="rhel centos fedora"\n')


BARE_HOSTS = {"bare_intel_iommu_off": bare_intel_iommu_off, "sriov_off_in_firmware": sriov_off_in_firmware,
              "rhel_family": rhel_family}


@pytest.mark.parametrize("name", sorted(BARE_HOSTS))
def test_preview_of_bare_hosts_plans_every_stage_and_valid_domains(tmp_path, name):
    """Hosts as they leave the factory: each preview exits 0, shows the boot stage's GRUB edit, the
    SR-IOV/VFIO stage's change (or that it waits for the boot stage's reboot), and a domain XML per
    tenant that libvirt's own schema check (virt-xml-validate) accepts."""
    load_dgx_tree().write_tree(str(tmp_path / "dgx"))
    BARE_HOSTS[name](str(tmp_path / "dgx"))
    rc, out = preview(tmp_path)
    assert rc == 0, out[-4000:]
    grub = re.search(r'\+GRUB_CMDLINE_LINUX="([^"]*)"', out).group(1).split()
    assert "iommu=pt" in grub
    assert ("intel_iommu=on" in grub) == (name == "bare_intel_iommu_off")
    assert any(a.startswith("rd.driver.blacklist=") for a in grub) == (name == "rhel_family")
    if name == "rhel_family":
        assert "+++ after: PF 0000:19:00.0" in out
    else:
        assert "PLANNED AFTER THE BOOT STAGE on dgx01-preview" in out
    xmls = domain_xmls(out)
    assert sorted(xmls) == ["tenant-a", "tenant-b", "tenant-c", "tenant-d"], out[-3000:]
    for tenant, xml in sorted(xmls.items()):
        path = tmp_path / ("%s.xml" % tenant)
        path.write_text(xml, encoding="utf-8")
        check = subprocess.run(["virt-xml-validate", str(path), "domain"], capture_output=True, text=True, check=False)
        assert check.returncode == 0, "%s: %s\n%s" % (tenant, check.stdout + check.stderr, xml)
