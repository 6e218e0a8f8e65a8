# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight_info module: the host model and the ConnectX firmware settings the preflight
report (:mod:`preflight`, on the controller) needs, read on the host in one call, and with
``libvirt`` what tenant_domain_info reads (libvirt's service, the domains), so that the host
stages of a play start from this one read; with ``stage_checks`` each host stage's call, with
this run's inputs, checked in check mode (:mod:`stage_checks`), so that a converged host's
stages need no call of their own. Reads only."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.connectx import mlxconfig as mlx
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_info import TENANT_DOMAIN_INFO_ARGS, tenant_domain_info
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.libvirt_connection import NotAnswering
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.reads import Recorder, record
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import run_nested

__metaclass__ = type

# ATS_ENABLED where the card has it: the fast-tenants setting the boot stage sets (host_boot_firmware_ats)
FIRMWARE_PARAMS = mlx.SRIOV_PARAMS + mlx.LINK_TYPE_PARAMS + (mlx.ATS_PARAM,)


# the module's options (plugins/modules/preflight_info.py documents them); here so that the
# controller-side run of a preview (plugins/action/preflight_info.py) validates the same spec
MODULE_ARGS = dict(
    argument_spec=dict(
        root=dict(type="path", default="/"),
        gpu_ids=dict(type="list", elements="str", default=[]),
        nic_ids=dict(type="list", elements="str", default=[]),
        firmware_tool=dict(type="str", choices=["auto", "mlxconfig", "mstconfig", "none"], default="auto"),
        libvirt=dict(type="dict"),
        stage_checks=dict(type="dict"),
        record_reads=dict(type="bool", default=False),
    ),
)


def preflight_info(params, host, run):
    """The preflight_info module's result fields; with ``record_reads``, also the reads it made of the
    host (``host_reads``: :meth:`host.reads.Recorder.result`), which its action plugin makes again on the
    next run (``host/read_again.py``) to answer that run from this result where they answer the same."""
    if not params.get("record_reads"):
        return gate_result(params, host, run)
    recorder = Recorder()
    with recorder.guard():
        result = gate_result(params, record(host, recorder), run)
    if run.elapsed_s or run.changed:
        recorder.refuse("the run timed or changed something")
    result["host_reads"] = recorder.result()
    return result


def gate_result(params, host, run):
    """The host model, the firmware, libvirt and the stages' checks, read and checked on ``host``."""
    try:
        topology = host.topology(params["gpu_ids"], params["nic_ids"])
    except (InputError, ValueError) as exc:
        raise InputError("gpu_ids/nic_ids: %s" % exc)
    return {"topology": topology, "firmware": query_firmware(topology, host, params["firmware_tool"]),
            "libvirt": libvirt_read(params.get("libvirt"), host, run),
            "stage_checks": stage_checks(params.get("stage_checks"), host, run, params.get("libvirt"))}


def stage_checks(requested, host, run, libvirt=None):
    """The stages' calls checked in this call; {} when none are asked for. The tenants stage's
    call leaves its libvirt ``uri`` to the play's module_defaults: checked here on the ``uri``
    of ``libvirt`` (the gate's own libvirt read) unless the call gives one."""
    if not requested:
        return {}
    # imported here: it imports the stage modules' features, which only a gate with stage_checks runs
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight.stage_checks import check_stages
    uri = (libvirt or {}).get("uri") if isinstance(libvirt, dict) else None
    return check_stages(host, requested, run, {"tenants": {"uri": uri}} if uri else None)


def libvirt_read(options, host, run):
    """tenant_domain_info with ``options`` in this call; {} when not asked (omitted or empty, as a
    role passes its empty default). A libvirt that does not answer is not the preflight's failure:
    ``domains_read`` is false and ``message`` says why (the stage that needs the domains reads
    them itself, and fails there in its own words)."""
    if not options:
        return {}
    try:
        return run_nested("libvirt", "gpuvirt.tenancy.tenant_domain_info", TENANT_DOMAIN_INFO_ARGS, tenant_domain_info,
                          options, host, run)
    except NotAnswering as exc:
        return {"domains_read": False, "message": str(exc)}


def query_firmware(topology, host, tool="auto"):
    """SRIOV_EN / NUM_OF_VFS / LINK_TYPE_P1/P2 / ATS_ENABLED where the card has them (default, current, next) of every ConnectX PF of the host model,
    read with mlxconfig or mstconfig on the host; "tool not found" when neither is there."""
    pfs = sorted(a for a, d in (topology.get("pci_devices") or {}).items() if mlx.is_connectx_pf(d))
    if not pfs or tool == "none":
        return {}
    path = mlx.find_tool(host, tool)
    result = {}
    for pf in pfs:
        if path is None:
            result[pf] = {"status": "tool not found", "tool": None, "params": {},
                          "message": "%s not found: install mstflint (mstconfig) or NVIDIA MFT (mlxconfig) to read "
                                     "SRIOV_EN and NUM_OF_VFS" % " / ".join(mlx.tool_names(tool))}
            continue
        try:
            parsed = mlx.FirmwareConfig(path, pf, host).query()
        except mlx.MlxconfigError as exc:
            result[pf] = {"status": "error", "tool": path, "params": {}, "message": str(exc), "error_kind": exc.kind}
            continue
        result[pf] = {"status": "ok", "tool": path, "message": None,
                      "params": mlx.report(parsed, [p for p in FIRMWARE_PARAMS if p in parsed["params"]])}
    return result
