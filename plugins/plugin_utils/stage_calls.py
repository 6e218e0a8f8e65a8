# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each host stage's one module call, built on the controller from its role's inputs (the stage's
desired state as the inventory says it): the role inputs -> module options mapping of each stage,
written once. An input is the role's variable without its prefix; an input that is an option of the
stage's module is taken with that option's type, read from the module's own argument spec (the
same spec the module validates the call with); the few inputs that are not options say where they
go. Nothing about the host is decided here: the module decides on the host.

Used by the actions ``stage_options`` (the call for the preflight gate), ``gate_check`` (the gate's
check of exactly this call) and ``stage_call`` (the call itself, where the gate did not answer it)."""

from __future__ import absolute_import, division, print_function

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight.stage_checks import STAGE_MODULES, stage_feature
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.plain_data import plain

__metaclass__ = type

# a key of the options left out: unset, the module's own default applies
UNSET = object()
EMPTY = {"list": list, "dict": dict, "bool": bool}


class StageInputError(ValueError):
    """A role input the stage's call cannot take: the message names the input and the fix."""


def _option(role, name, value, spec, always):
    """``value`` of input ``name`` as the option of type ``spec['type']``; unset (None, or "": how
    ansible-core 2.16 templates a variable set to none) is UNSET, or with ``always`` the type's
    empty value (an option the stage always sends)."""
    kind = spec.get("type", "str")
    variable = "%s_%s" % (role, name)
    if value is None or value == "":
        if always and kind in EMPTY:
            return EMPTY[kind]()
        return UNSET
    if kind in ("list", "dict"):
        wanted = list if kind == "list" else dict
        if not isinstance(value, wanted):
            raise StageInputError("%s (%s) must be a %s, got %s: give %s as a YAML %s"
                                  % (name, variable, wanted.__name__, type(value).__name__, variable,
                                     "list" if kind == "list" else "mapping"))
        return wanted(value)
    try:
        if kind == "bool":
            return boolean(value, strict=True)
        if kind == "int":
            if isinstance(value, bool):
                raise TypeError(value)
            return int(value)
    except (TypeError, ValueError):
        raise StageInputError("%s (%s) must be a%s, got %r: give %s %s"
                              % (name, variable, "n integer" if kind == "int" else " boolean", value, variable,
                                 "a whole number" if kind == "int" else "true or false"))
    return value


def _inputs(stage, role, inputs, names):
    """``inputs`` checked: a dict of exactly ``names``."""
    if not isinstance(inputs, dict):
        raise StageInputError("inputs: give the %s stage's inputs as a dict (the %s role's inputs without the prefix), "
                              "got %s" % (stage, role, type(inputs).__name__))
    missing = sorted(set(names) - set(inputs))
    unknown = sorted(set(inputs) - set(names))
    if missing or unknown:
        raise StageInputError("inputs: the %s stage takes the inputs %s; %s" % (
            stage, ", ".join(sorted(names)), "; ".join(
                ([("missing: %s" % ", ".join(missing))] if missing else [])
                + ([("not an input of the stage: %s" % ", ".join(unknown))] if unknown else []))))
    return plain(inputs)


def _tenants(inputs):
    """The tenants stage's tenant_domain call with ``tenants``: the stage's own options always sent
    (an unset one empty), every tenant's settings (module_utils tenant_domain_call
    TENANT_STAGE_SETTINGS) left out when unset; the GPU pool (``gpus``: none is every GPU, [] none)
    and the PFs whose VFs are given (``vf_pfs``) into ``policy``; in a preview (``preview`` true)
    what the earlier stages will leave (``preview_wanted``) as ``preview``."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt import tenant_domain_call as call

    spec = call.TENANT_DOMAIN_ARGS["argument_spec"]
    always = [name for name in sorted(call.TENANT_STAGE_OPTIONS) if name != "preview"]
    folded = ("gpus", "vf_pfs", "preview", "preview_wanted")
    given = _inputs("tenants", "tenant_vms", inputs, always + list(call.TENANT_STAGE_SETTINGS) + list(folded))
    options = {}
    for name in always + list(call.TENANT_STAGE_SETTINGS):
        value = _option("tenant_vms", name, given[name], spec[name], name in always)
        if value is not UNSET:
            options[name] = value
    if given["gpus"] not in (None, ""):
        options["policy"]["gpus"] = _option("tenant_vms", "gpus", given["gpus"], {"type": "list"}, True)
    if given["vf_pfs"]:
        options["policy"]["vf_pfs"] = _option("tenant_vms", "vf_pfs", given["vf_pfs"], {"type": "list"}, True)
    if _option("tenant_vms", "preview", given["preview"], {"type": "bool"}, True):
        wanted = _option("tenant_vms", "preview_wanted", given["preview_wanted"], {"type": "dict"}, True)
        options["preview"] = dict((key, wanted.get(key) or list(sub.get("default") or []))
                                  for key, sub in sorted(spec["preview"]["options"].items()))
    return options


STAGE_OPTIONS = {"tenants": _tenants}


def stage_module(stage):
    """The module of ``stage``'s call (module_utils stage_checks STAGE_MODULES: the gate checks the same)."""
    if stage not in STAGE_OPTIONS:
        raise StageInputError("stage: %r is not a host stage whose call is built here; give one of %s"
                              % (stage, ", ".join(sorted(STAGE_OPTIONS))))
    return "gpuvirt.tenancy." + STAGE_MODULES[stage]


def stage_options(stage, inputs):
    """The options of ``stage``'s one call for the role's ``inputs``; StageInputError names a bad input."""
    stage_module(stage)
    return STAGE_OPTIONS[stage](inputs)

