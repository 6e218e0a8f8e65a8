# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``tenant_domain_info`` module feature: what the named domains (and the others, foreign)
hold, and with ``service`` whether libvirt is installed, enabled and running."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_readers import held_resources, read_assignment
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.change import LIBVIRT_OPTIONS, _live_xml, _persistent_xml
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.libvirt_connection import NotAnswering
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.service import SERVICE_OPTIONS, read_service

__metaclass__ = type


# --------------------------------------------------------------------------- what tenants hold
def domain_assignments(conn, names):
    """name -> read_assignment(...) plus ``active``, for the names that are defined."""
    found = {}
    for name in names:
        domain = conn.domain(name)
        if domain is None:
            continue
        assignment = read_assignment(_persistent_xml(domain, name))
        assignment["active"] = domain.is_active()
        found[name] = assignment
    return found


def foreign_domains(conn, names):
    """name -> held_resources(...) plus ``active``, for every domain on the connection whose name
    is not in ``names`` (not a listed tenant)."""
    found = {}
    listed = set(names)
    for name in conn.domain_names():
        if name in listed:
            continue
        domain = conn.domain(name)
        if domain is None:
            continue
        active = domain.is_active()
        held = held_resources(_persistent_xml(domain, name), _live_xml(domain, name) if active else None)
        held["active"] = active
        found[name] = held
    return found


# tenant_domain_info's argument spec (plugins/modules/tenant_domain_info.py), here so that another
# module can run it inside its own call (runner.run_nested: preflight_info's ``libvirt``).
TENANT_DOMAIN_INFO_ARGS = dict(
    argument_spec=dict(
        LIBVIRT_OPTIONS,
        names=dict(type="list", elements="str", required=True),
        foreign=dict(type="bool", default=True),
        service=dict(type="dict", options=SERVICE_OPTIONS),
    ),
)


def tenant_domain_info(params, host, run):  # pylint: disable=unused-argument
    """The tenant_domain_info module: what the named domains (and, with ``foreign``, the others)
    hold; with ``service`` also whether libvirt is installed, enabled and running, and then a
    libvirt that does not answer (not installed or not started yet) is an answer, not a failure:
    ``domains_read`` is false and ``service.message`` says why."""
    service = read_service(host, params["service"]) if params["service"] else None
    # the service options as asked, without the ones left unset (a role compares them to its own)
    asked = dict((key, value) for key, value in params["service"].items() if value is not None) if params["service"] else None
    query = {"names": list(params["names"]), "foreign": params["foreign"], "uri": params["uri"], "service": asked}
    result = {"domains": {}, "foreign": {}, "domains_read": False, "service": service, "query": query}
    try:
        with host.libvirt(params["uri"]) as conn:
            result["domains"] = domain_assignments(conn, params["names"])
            result["foreign"] = foreign_domains(conn, params["names"]) if params["foreign"] else {}
            result["domains_read"] = True
    except NotAnswering as exc:
        if service is None:
            raise
        service.update(answers=False, message=str(exc))
        return result
    if service is not None:
        service.update(answers=True, message=None)
    return result


# tenant_domain's argument spec (plugins/modules/tenant_domain.py), here so that the preflight gate
# can check this stage's call inside its own (stage_checks).
