# -*- coding: utf-8 -*-
"""What a module imports when it loads: each call compiles that source again on the host
(AnsiballZ imports from a zip, with no bytecode cache; benchmarks/bench_imports.py measures it),
so code only some calls need is imported where it is used. Each case loads the module in a fresh
interpreter and checks which of the collection's module_utils are in sys.modules."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest

from conftest import COLLECTIONS

UTILS = "ansible_collections.gpuvirt.tenancy.plugins.module_utils."


def loaded_utils(module):
    code = ("import json, sys; sys.path.insert(0, %r); import ansible_collections.gpuvirt.tenancy.plugins.modules.%s; "
            "print(json.dumps(sorted(m[%d:] for m in sys.modules if m.startswith(%r))))"
            % (COLLECTIONS, module, len(UTILS), UTILS))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out))


@pytest.mark.parametrize("module, needed, not_loaded", [
    # the gate's read and the domain reader: libvirt and the domain XML, not the VF settings (nor the host model's
    # reader: it is imported where the model is read)
    ("preflight_info", {"libvirt.domain_info", "libvirt.domain_readers", "connectx.mlxconfig"},
     {"sriov_vfio.sriov", "libvirt.tenant_domain_call", "libvirt.tenant_spec", "libvirt.guest_image"}),
    ("tenant_domain_info", {"libvirt.domain_info", "libvirt.domain_readers"},
     {"sriov_vfio.sriov", "libvirt.tenant_domain_call", "libvirt.numa_pin_domain", "libvirt.tenant_spec"}),
    # the tenants stage on the host (the planner, its plan's entries) only with ``tenants``
    # the guests' files and checks and the Fabric Manager's fmpm only for a call that has them (its spec names their
    # options from tenancy/guest_options.py and fabric/manager_options.py)
    ("tenant_domain", {"libvirt.tenant_domain_call", "libvirt.tenant_domain_one", "libvirt.tenant_spec",
                       "fabric.manager_options"},
     {"sriov_vfio.sriov", "libvirt.tenant_stage", "planning.tenant_plan", "libvirt.guest_image", "fabric.partition_call",
      "fabric.fmpm", "tenancy.guest_inputs"}),
    # the SR-IOV/VFIO stage without a Fabric Manager service VM: not its option's checks
    ("vfio_bind", {"sriov_vfio.vfio", "sriov_vfio.stage", "sriov_vfio.sriov"}, {"tenancy.fabric_vm"}),
    # inside a guest there is no ConnectX PF: the firmware tools' parser is left out
    ("mlx_rocev2", {"guest.roce", "guest.nccl_conf", "guest.rdma"}, {"connectx.mlxconfig"}),
])
def test_module_loads_what_every_call_needs_only(module, needed, not_loaded):
    # each name is a file of module_utils: a moved file cannot leave a "not loaded" that holds trivially
    utils_dir = os.path.join(COLLECTIONS, "ansible_collections", "gpuvirt", "tenancy", "plugins", "module_utils")
    missing = [name for name in needed | not_loaded if not os.path.isfile(os.path.join(utils_dir, *name.split(".")) + ".py")]
    assert not missing, "no such module_utils file: %s" % missing
    loaded = loaded_utils(module)
    assert needed <= loaded, "expected %s to import %s" % (module, sorted(needed - loaded))
    assert not loaded & not_loaded, "%s imports %s at load time" % (module, sorted(loaded & not_loaded))


def test_tenant_domain_imports_sriov_when_given_vf_settings():
    # the lazy import still works where it is needed: the options are checked by sriov_vfs's spec
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt import tenant_domain_call
    options = tenant_domain_call.vf_settings_options({"sriov_vfs": {"pfs": []}})
    assert options["pfs"] == []
    assert tenant_domain_call.vf_settings_options({"sriov_vfs": None}) is None


# What a converged host's check does not run, so does not import: the guests' disks, seeds and options' checks (no
# tenant has an image, a guest address or a management network, no removal, no other domain), the Fabric Manager's
# part and its service VM (neither asked), the preview's projection of the host (the host as it is).
NOT_RUN_WHEN_CONVERGED = ("libvirt.guest_image", "libvirt.tenant_fabric", "fabric.partition_call", "fabric.fmpm",
                          "tenancy.fabric_vm", "sriov_vfio.projection", "vocabulary.disk_header", "tenancy.guest_inputs")
CONVERGED_CHECK = r"""
import json, sys
sys.path[:0] = [%(collections)r, %(unit)r]
from fakes.kernel import lab_host
from fakes.live import LiveHost
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import Run, nested_params
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt import tenant_domain_call
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight.stage_checks import check_stages
import libvirt
# the test driver keeps its domains while one connection stays open (tests/unit/conftest.py, libvirt_conn)
libvirt.registerErrorHandler(lambda *_: None, None)
kept = libvirt.open(%(uri)r)
# the driver's own domain "test" (a disk file) is not there: only the tenants' domains, as on the lab host
own = kept.lookupByName("test")
own.destroy()
own.undefine()
tree, kernel = lab_host(%(root)r)
host = LiveHost(tree.root, kernel=kernel)
options = %(options)r
# the stage's call (libvirt's test driver keeps its domains in this process), then the gate's check of it
params = nested_params("tenants", "gpuvirt.tenancy.tenant_domain", tenant_domain_call.TENANT_DOMAIN_ARGS, options)
made = tenant_domain_call.tenant_domain(params, host, Run())
check = check_stages(host, {"tenants": options}, Run())["tenants"]
print(json.dumps({"created": made.get("created"), "changed": check["changed"], "error": check["error"],
                  "loaded": sorted(m for m in sys.modules if m.startswith(%(utils)r))}))
"""


def test_a_converged_tenants_check_imports_no_code_it_does_not_run(tmp_path):
    """The gate's check of the tenants stage's call on a host where it changes nothing (a fresh interpreter: the
    tenants stage's call defines the tenant on libvirt's test driver, then the gate checks the same call): none of
    NOT_RUN_WHEN_CONVERGED is imported (each module call compiles again what it imports)."""
    utils_dir = os.path.join(COLLECTIONS, "ansible_collections", "gpuvirt", "tenancy", "plugins", "module_utils")
    missing = [name for name in NOT_RUN_WHEN_CONVERGED if not os.path.isfile(os.path.join(utils_dir, *name.split(".")) + ".py")]
    assert not missing, "no such module_utils file: %s" % missing
    unit = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    options = {"uri": "test:///default", "domain_type": "test", "policy": {"emulator": "vcpus"}, "gpu_ids": ["1234:11e8"],
               "vf_persist": False, "live": True,
               "tenants": [{"name": "st-a", "vcpus": 1, "memory_mb": 64, "hugepage_size": "none", "firmware": "bios",
                            "state": "running"}]}
    code = CONVERGED_CHECK % {"collections": COLLECTIONS, "unit": unit, "root": str(tmp_path / "root"), "options": options,
                              "utils": UTILS, "uri": options["uri"]}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    assert answer["created"] == ["st-a"] and answer["error"] is None and answer["changed"] is False, answer
    loaded = set(name[len(UTILS):] for name in answer["loaded"])
    # the check ran the stage: the planner and the domain's definition are there
    assert {"libvirt.tenant_stage", "planning.tenant_plan", "placement.planner", "libvirt.domain_builder"} <= loaded
    assert not loaded & set(NOT_RUN_WHEN_CONVERGED), sorted(loaded & set(NOT_RUN_WHEN_CONVERGED))


def shipped_utils(module):
    """The module_utils a module's AnsiballZ zip holds: every file reached through an import of the
    collection, those inside functions included (ansible-core's finder reads the source, not what
    runs; benchmarks/bench_payload.py measures the zip with the finder itself)."""
    root = os.path.join(COLLECTIONS, "ansible_collections", "gpuvirt", "tenancy", "plugins")
    prefix = "ansible_collections.gpuvirt.tenancy.plugins."

    def source(name):
        path = os.path.join(root, *name.split(".")) + ".py"
        return path if os.path.isfile(path) else None

    found, todo = set(), ["modules." + module]
    while todo:
        name = todo.pop()
        with open(source(name)) as handle:
            tree = ast.parse(handle.read())
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith(prefix)):
                continue
            base = node.module[len(prefix):]
            # "from package import module" names files; "from module import name" the file itself
            targets = [base + "." + alias.name for alias in node.names if source(base + "." + alias.name)] or [base]
            for target in targets:
                if source(target) and target not in found:
                    found.add(target)
                    todo.append(target)
    return set(name[len("module_utils."):] for name in found if name.startswith("module_utils."))


SEARCH = {"placement.planner", "placement.search", "placement.lagrange", "placement.allocation", "placement.counts",
          "placement.spread", "placement.existing", "placement.dominance"}


@pytest.mark.parametrize("module, shipped, not_shipped_packages, not_shipped", [
    # the SR-IOV/VFIO stage reads the IOMMU groups of the planner's index, not its search
    ("vfio_bind", {"placement.pool_groups", "placement.index", "sriov_vfio.stage"}, {"libvirt", "boot", "planning"}, SEARCH),
    ("iommu_grub", {"boot.grub", "connectx.mlxconfig", "restore.files"}, {"sriov_vfio", "libvirt", "placement", "planning"},
     set()),
    # inside a guest: none of the host stages
    ("mlx_rocev2", {"guest.roce", "connectx.mlxconfig"}, {"boot", "sriov_vfio", "libvirt", "placement", "planning", "restore"},
     set()),
    ("fabric_partition", {"fabric.fmpm", "fabric.partition_call"},
     {"boot", "sriov_vfio", "libvirt", "placement", "planning", "restore", "connectx", "guest"}, set()),
    ("guest_nvlink", {"guest.nvlink_driver"}, {"boot", "sriov_vfio", "libvirt", "placement", "planning", "restore", "connectx"},
     set()),
    ("nccl_env", {"guest.nccl_conf"}, {"boot", "sriov_vfio", "libvirt", "placement", "planning", "restore", "connectx"}, set()),
    ("sriov_vfs", {"sriov_vfio.sriov", "restore.script"}, {"boot", "libvirt", "planning"}, SEARCH),
    # the gate checks every stage in its one call: it ships them all
    ("preflight_info", {"boot.grub", "sriov_vfio.vfio", "libvirt.tenant_domain_call", "planning.tenant_plan"} | SEARCH, set(),
     set()),
])
def test_module_ships_what_its_calls_import(module, shipped, not_shipped_packages, not_shipped):
    found = shipped_utils(module)
    assert shipped <= found, "expected %s to ship %s" % (module, sorted(shipped - found))
    assert not found & not_shipped, "%s ships %s" % (module, sorted(found & not_shipped))
    packages = set(name.split(".")[0] for name in found)
    assert not packages & not_shipped_packages, "%s ships %s" % (
        module, sorted(name for name in found if name.split(".")[0] in not_shipped_packages))
