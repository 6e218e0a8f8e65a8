# -*- coding: utf-8 -*-
"""Stage records: the digest, the record file under a fake root (written whole, other stages
kept, an equal record not written again, unset and default options left out) and the decision
a stage takes from the gate's check (check_result), case by case."""

from __future__ import annotations

import json
import os

import pytest

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpuvirt.tenancy.plugins.module_utils import stage_record
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt_domain import TENANT_DOMAIN_ARGS
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.runner import nested_params

SPEC = {"devices": {"type": "list", "default": []}, "force": {"type": "bool", "default": False},
        "sriov": {"type": "dict"}, "root": {"type": "path", "default": "/"}, "record": stage_record.RECORD_OPTION}


def record_file(tmp_path):
    return json.loads((tmp_path / stage_record.RECORDS_PATH.lstrip("/")).read_text(encoding="utf-8"))


def test_digest_ignores_key_order_and_sees_values():
    first = stage_record.options_digest({"a": 1, "b": [1, 2], "c": {"x": True, "y": None}})
    assert first == stage_record.options_digest({"c": {"y": None, "x": True}, "b": [1, 2], "a": 1})
    assert first != stage_record.options_digest({"a": 1, "b": [2, 1], "c": {"x": True, "y": None}})
    assert first != stage_record.options_digest({"a": "1", "b": [1, 2], "c": {"x": True, "y": None}})
    assert len(first) == 64


def test_write_keeps_set_options_other_stages_and_skips_an_equal_record(tmp_path):
    host = Host(str(tmp_path))
    params = {"devices": ["0000:82:00.0"], "force": False, "sriov": None, "root": str(tmp_path),
              "record": {"stage": "sriov_vfio", "digest": "d1"}}
    assert stage_record.write_record(host, "vfio_bind", params, SPEC) is True
    written = record_file(tmp_path)
    assert written == {"format": 1, "stages": {"sriov_vfio": {"module": "vfio_bind", "digest": "d1",
                                                              "params": {"devices": ["0000:82:00.0"]}}}}
    boot = {"devices": ["x"], "force": True, "record": {"stage": "boot", "digest": "d2"}}
    assert stage_record.write_record(host, "iommu_grub", boot, SPEC) is True
    stages = record_file(tmp_path)["stages"]
    assert sorted(stages) == ["boot", "sriov_vfio"] and stages["boot"]["params"] == {"devices": ["x"], "force": True}
    path = tmp_path / stage_record.RECORDS_PATH.lstrip("/")
    before = os.stat(path).st_mtime_ns, os.stat(path).st_ino
    assert stage_record.write_record(host, "iommu_grub", boot, SPEC) is False
    assert (os.stat(path).st_mtime_ns, os.stat(path).st_ino) == before
    assert stage_record.read_records(host)["boot"]["digest"] == "d2"


@pytest.mark.parametrize("content", ["", "{not json", "[]", '{"format": 2, "stages": {}}', '{"format": 1, "stages": []}'])
def test_unreadable_or_foreign_file_is_no_record(tmp_path, content):
    path = tmp_path / stage_record.RECORDS_PATH.lstrip("/")
    path.parent.mkdir(parents=True)
    path.write_text(content, encoding="utf-8")
    assert stage_record.read_records(Host(str(tmp_path))) == {}


def test_tenant_domain_record_validates_again():
    """What tenant_domain validated (its single-domain options at their defaults next to
    `domains`, which excludes them) comes back from the record without the exclusion firing."""
    sent = {"domains": [{"name": "tenant-a", "state": "running", "vcpus": 4, "memory_mb": 8192}],
            "record": {"stage": "tenants", "digest": "d"}}
    validated = ArgumentSpecValidator(TENANT_DOMAIN_ARGS["argument_spec"],
                                      mutually_exclusive=TENANT_DOMAIN_ARGS["mutually_exclusive"]).validate(sent)
    assert not validated.error_messages
    kept = dict((key, value) for key, value in validated.validated_parameters.items()
                if key not in stage_record.NOT_RECORDED and value is not None
                and value != (TENANT_DOMAIN_ARGS["argument_spec"].get(key) or {}).get("default"))
    again = nested_params("stage_checks", "gpuvirt.tenancy.tenant_domain", TENANT_DOMAIN_ARGS, kept)
    assert again["domains"] == validated.validated_parameters["domains"]
    assert dict((k, v) for k, v in again.items() if k != "record") == dict(
        (k, v) for k, v in validated.validated_parameters.items() if k not in ("record", "root"))


OPTIONS = {"devices": ["0000:82:00.0"]}
DIGEST = stage_record.options_digest(OPTIONS)
RESULT = {"changed": False, "devices": []}


@pytest.mark.parametrize("check, expected", [
    ({}, {}),
    (None, {}),
    ({"recorded": False, "digest": None, "changed": None, "result": None, "error": None}, {}),
    ({"recorded": True, "digest": DIGEST, "changed": False, "result": RESULT, "error": "InputError: x"}, {}),
    ({"recorded": True, "digest": DIGEST, "changed": True, "result": dict(RESULT, changed=True), "error": None}, {}),
    ({"recorded": True, "digest": "0" * 64, "changed": False, "result": RESULT, "error": None}, {}),
    ({"recorded": True, "digest": DIGEST, "changed": None, "result": RESULT, "error": None}, {}),
    ({"recorded": True, "digest": DIGEST, "changed": False, "result": RESULT, "error": None}, RESULT),
], ids=["empty", "none", "no-record", "error", "would-change", "other-options", "changed-unknown", "answers"])
def test_check_result(check, expected):
    assert stage_record.check_result(check, OPTIONS) == expected
