# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``tenant_stage_options``: the tenants stage's one M(tenant_domain) call (its ``tenants``
options), built from the tenant_vms role's inputs (the stage's desired state as the inventory
says it). The host model, the domains, the plan and what follows from it are decided by the
module on the host; this only maps inputs to options and leaves unset ones out (ansible-core
2.16 templates a null left in an option as an empty string)."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError

__metaclass__ = type

INPUTS = ("tenants", "policy", "gpus", "vf_pfs", "domain_type", "machine", "firmware", "memory_mode", "live", "priorities",
          "guest_access", "shutdown_timeout", "force_off", "vf_persist", "gpu_ids", "nic_ids", "preview", "preview_wanted")


def tenant_stage_options(inputs):
    """The options of the tenants stage's tenant_domain call for ``inputs`` (the role's
    ``tenant_vms_*`` inputs without the prefix; ``preview_wanted``: the preview's {sriov_pfs,
    hugepages, gpus}, sent only when ``preview`` is true)."""
    name = "gpuvirt.tenancy.tenant_stage_options"
    if not isinstance(inputs, dict):
        raise AnsibleFilterError("%s: expected a dict of the tenant_vms inputs, got %s" % (name, type(inputs).__name__))
    missing = [k for k in INPUTS if k not in inputs]
    if missing:
        raise AnsibleFilterError("%s: inputs %s missing" % (name, ", ".join(missing)))
    for key, kind in (("tenants", list), ("policy", dict), ("priorities", dict), ("guest_access", dict)):
        if inputs[key] is not None and not isinstance(inputs[key], kind):
            raise AnsibleFilterError("%s: %s (tenant_vms_%s) must be a %s, got %s"
                                     % (name, key, key, kind.__name__, type(inputs[key]).__name__))
    policy = dict(inputs["policy"] or {})
    if inputs["gpus"] is not None:
        policy["gpus"] = list(inputs["gpus"])
    if inputs["vf_pfs"]:
        policy["vf_pfs"] = list(inputs["vf_pfs"])
    options = {"tenants": list(inputs["tenants"] or []), "policy": policy, "priorities": dict(inputs["priorities"] or {}),
               "guest_access": dict(inputs["guest_access"] or {}), "vf_persist": bool(inputs["vf_persist"]),
               "gpu_ids": list(inputs["gpu_ids"] or []), "nic_ids": list(inputs["nic_ids"] or [])}
    for key in ("domain_type", "machine", "firmware", "memory_mode"):
        if inputs[key] not in (None, ""):
            options[key] = inputs[key]
    for key in ("live", "force_off"):
        if inputs[key] is not None:
            options[key] = bool(inputs[key])
    if inputs["shutdown_timeout"] is not None:
        options["shutdown_timeout"] = int(inputs["shutdown_timeout"])
    if inputs["preview"]:
        wanted = inputs["preview_wanted"] or {}
        options["preview"] = dict((key, wanted.get(key) or default) for key, default in (
            ("sriov_pfs", []), ("hugepages", []), ("gpus", [])))
    return options


class FilterModule:
    """Tenants stage filter."""

    def filters(self):
        return {"tenant_stage_options": tenant_stage_options}
