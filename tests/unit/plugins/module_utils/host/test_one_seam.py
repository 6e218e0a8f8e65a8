# -*- coding: utf-8 -*-
"""Every read of the machine goes through the host seam (``host/``): the module tests of the host
stages and of the guest's file edits, run again with ``fakes.seam_audit`` watching the filesystem
calls, find none made from elsewhere in ``module_utils``. A reader of the host that stands in for
the machine (a test's fake root, a captured tree) then sees every read. Left to the image code
(``libvirt/guest_image.py``): a guest image's own bytes (its checksum, its qcow2 header and backing
chain), read at the real path the seam gave it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import UNIT_DIR  # pylint: disable=import-error

# the stages' modules and the gate, each over fake roots with recorded commands and libvirt's test driver
SCENARIOS = [
    "plugins/modules/test_iommu_grub.py",
    "plugins/modules/test_hugepages.py",
    "plugins/modules/test_vfio_bind.py",
    "plugins/modules/test_tenant_domain_stage.py",
    "plugins/modules/test_guest_nvlink.py",
    "plugins/modules/test_nccl_env.py",
    "plugins/module_utils/preflight/test_stage_checks.py",
    "plugins/module_utils/boot/test_stage.py",
]


def test_the_stages_read_the_machine_through_the_host_seam_only(tmp_path):
    report = tmp_path / "found.json"
    env = dict(os.environ, GPUVIRT_SEAM_AUDIT=str(report))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "fakes.seam_audit",
                          "-x"] + [os.path.join(UNIT_DIR, path) for path in SCENARIOS],
                         cwd=UNIT_DIR, env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    found = json.loads(report.read_text())
    assert found == [], "reads of the machine outside host/: %s" % found


def test_the_audit_finds_a_read_that_passes_the_seam_by(tmp_path):
    """The audit itself: a module_utils file outside host/ that opens a file is found (the image
    code hashing an image at the real path the seam gave it); a helper of vocabulary/common.py
    called by a test, and a test's own reads, are not."""
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "import os\n"
        "from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary import common\n"
        "from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt import guest_image\n"
        "def test_probe(tmp_path):\n"
        "    path = tmp_path / 'f'\n"
        "    path.write_text('x')\n"
        "    assert common.read_text(str(path)) == 'x' and os.path.isfile(str(path))\n"
        "    assert len(guest_image.file_checksum(str(path), 'sha256')) == 64\n")
    report = tmp_path / "found.json"
    env = dict(os.environ, GPUVIRT_SEAM_AUDIT=str(report))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "fakes.seam_audit",
                          "--rootdir", str(tmp_path), "-c", os.devnull, str(probe)],
                         cwd=UNIT_DIR, env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    found = json.loads(report.read_text())
    assert [call for call, _place in found] == ["open"], found
    assert found[0][1].startswith("libvirt/guest_image.py:") and found[0][1].endswith(" file_checksum"), found
