# -*- coding: utf-8 -*-
"""The boot stage's reboot filters: the reboot proven (host_boot_reboot_proof) and the new kernel
settled (host_boot_unsettled)."""

from __future__ import annotations

import base64
import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.filter.host_boot_reboot_proof import FilterModule

from fakes.captured_trees import lab_capture  # pylint: disable=import-error

FILTERS = FilterModule().filters()


def slurp(text):
    return {"content": base64.b64encode(text.encode()).decode(), "encoding": "base64"}


OLD_ID = "5c0b1f8e-2a83-4f5e-9d3a-0d9b3e1c7a11\n"
NEW_ID = "9a2d44c1-7b1e-4c55-8f0e-6e0f4d2b9c20\n"
# the lab host's /proc/cmdline after the boot stage (the capture tests/fixtures/lab/iommu-on.tar)
with open(os.path.join(lab_capture("iommu-on"), "proc", "cmdline"), encoding="utf-8") as _handle:
    CMDLINE = _handle.read()
WANTED = {"args_missing": [arg for arg in CMDLINE.split() if "iommu" in arg], "args_unwanted": ["quiet"]}


@pytest.mark.parametrize("before, after_id, cmdline, result, problems", [
    (OLD_ID, NEW_ID, CMDLINE, WANTED, []),
    (OLD_ID, OLD_ID, CMDLINE, WANTED, ["did not boot again"]),
    ("", NEW_ID, CMDLINE, WANTED, ["no boot id was read"]),
    # an argument matches as written: iommu=pt is not intel_iommu=on's value
    (OLD_ID, NEW_ID, CMDLINE.replace("intel_iommu=on", ""), WANTED, ["lacks intel_iommu=on"]),
    (OLD_ID, NEW_ID, CMDLINE.replace(" ro ", " ro quiet "), WANTED, ["still has quiet"]),
    (OLD_ID, OLD_ID, "ro\n", WANTED, ["did not boot again", "lacks " + " ".join(WANTED["args_missing"])]),
])
def test_the_reboot_is_proven_by_a_new_boot_and_the_wanted_command_line(before, after_id, cmdline, result, problems):
    proof = FILTERS["host_boot_reboot_proof"](slurp(before), {"results": [slurp(after_id), slurp(cmdline)]}, result)
    assert proof["ok"] is (not problems)
    assert len(proof["problems"]) == len(problems)
    for words, found in zip(problems, proof["problems"]):
        assert words in found
    assert cmdline.split()[0] in proof["message"]


@pytest.mark.parametrize("args, words", [
    (({}, {"results": []}, WANTED), "looped slurp"),
    (("text", {"results": [slurp(NEW_ID), slurp(CMDLINE)]}, WANTED), "slurp result"),
    ((slurp(OLD_ID), {"results": [slurp(NEW_ID), slurp(CMDLINE)]}, None), "must be a dict"),
])
def test_the_proofs_inputs_are_named(args, words):
    with pytest.raises(AnsibleFilterError, match=words):
        FILTERS["host_boot_reboot_proof"](*args)


POOL = {"node": 0, "size": "1G", "requested": 8, "allocated": 8, "free": 8, "at_boot": True}


@pytest.mark.parametrize("after, words", [
    ({"changed": False, "reboot_required": False, "hugepages": {"changed": False, "pages": [POOL]}}, []),
    ({"changed": False, "reboot_required": False}, []),
    ({"reboot_required": True, "pending": ["kernel command line"]}, ["a reboot is still required: kernel command line"]),
    ({"hugepages": {"changed": True, "pages": [dict(POOL, allocated=6)]}},
     ["the hugepage pools would still change", "1G pages on node 0: 6 allocated of 8 requested"]),
    ({"failed": True, "msg": "grub_file: missing"}, ["the check failed: grub_file: missing"]),
])
def test_the_new_kernel_is_settled_when_nothing_is_left_to_do(after, words):
    assert FILTERS["host_boot_unsettled"](after) == words
