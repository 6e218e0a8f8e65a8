# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the libvirt host role (the tenants stage's first step) asks of libvirt's service and what
it then does, on the controller (pure): the service question of tenant_domain_info's ``service``
(the preflight gate asks the same one, filter libvirt_gate_query, so that the role takes the
gate's read), whether a read answers it, what is due (install, start, restart, a check that
libvirt answers) and, in a preview under a capture, what the role does on the host, said. Used by
the action ``libvirt_service`` and the action ``stage_result`` (stage libvirt_mounts)."""

from __future__ import absolute_import, division, print_function

from ansible.module_utils.parsing.convert_bool import boolean

__metaclass__ = type

# the package managers whose lists tenant_domain_info's service read knows (dpkg, rpm)
FAMILIES = ("Debian", "RedHat")


class LibvirtServiceError(ValueError):
    """An input the libvirt host role's decisions cannot take: the message names it and the fix."""


def service_query(name, uefi, packages=None):
    """The libvirt service question of tenant_domain_info's ``service``: ``packages`` only when
    set, since ansible-core 2.16 templates a null left in it as an empty string."""
    if not isinstance(name, str) or not name:
        raise LibvirtServiceError("expected the service name (libvirt_host_service), got %r" % (name,))
    try:
        query = {"name": name, "uefi": boolean(uefi, strict=True)}
    except TypeError:
        raise LibvirtServiceError("uefi (libvirt_host_uefi) is %r, not true or false" % (uefi,))
    if packages is not None:
        query["packages"] = packages
    return query


def read_answers(read, query, uri):
    """Whether a libvirt read (tenant_domain_info's result: the gate's ``preflight_libvirt_read``)
    answers the role's question: asked for the same service ``query`` on the same ``uri``, and
    with the service read."""
    read = read if isinstance(read, dict) else {}
    asked = read.get("query") if isinstance(read.get("query"), dict) else {}
    return asked.get("service") == query and asked.get("uri") == uri and isinstance(read.get("service"), dict)


def service_due(service, mounts=None):
    """What the role does to the libvirt service, from the service as read before the role
    (tenant_domain_info's ``service``) and the role's ``hugepages`` result (``mounts``): ``start``
    (and enable at boot) when a package was missing or the service was not enabled or not active;
    ``restart`` when it was active and the run mounted a hugetlbfs mount that was not there before
    (libvirtd finds the mounts when it starts); ``due`` when the service needs the role at all (a
    start, or a check that libvirt answers). On a host where systemd does not run (``enabled`` and
    ``active`` both empty) and libvirt answers with nothing missing, nothing is due: its daemon was
    started by another supervisor."""
    if not isinstance(service, dict):
        raise LibvirtServiceError("expected the service read (tenant_domain_info's service), got %s" % type(service).__name__)
    if mounts is not None and not isinstance(mounts, dict):
        raise LibvirtServiceError("mounts must be the hugepages result, got %s" % type(mounts).__name__)
    new_mounts = [m for m in (mounts or {}).get("mounts") or [] if not (isinstance(m, dict) and m.get("mounted"))]
    if service.get("enabled") == "" and service.get("active") == "" and service.get("answers") and not service.get("missing"):
        # no systemd runs on the host (a container, a test machine): the daemon that answers is started by
        # something else, which this role leaves it to; a new hugetlbfs mount waits for that daemon's restart
        return {"start": False, "restart": False, "due": False}
    active = service.get("active") == "active"
    start = bool(service.get("missing")) or service.get("enabled") != "enabled" or not active
    return {"start": start, "restart": active and bool(new_mounts), "due": start or not service.get("answers")}


def host_plan(service, mounts, host="the host"):
    """What the role does after its read, from the service read (``service``) and the hugetlbfs
    mounts asked (``mounts``): ``install`` (a package missing), ``start``,
    ``check`` (libvirt did not answer: checked again after the start) and ``apply`` (the role has
    anything to do: a mount asked, or the service due); a host whose packages neither dpkg nor rpm
    list is refused, naming the ``host`` and the fix."""
    if not isinstance(mounts, list):
        raise LibvirtServiceError("mounts (libvirt_host_hugetlbfs_mounts) must be a list of {size, path}, got %s"
                                  % type(mounts).__name__)
    due = service_due(service)
    if service.get("family") not in FAMILIES:
        raise LibvirtServiceError("%s has neither dpkg nor rpm: install libvirt, QEMU and libvirt-python by hand, or set "
                                  "libvirt_host_packages and use a Debian- or RedHat-family host" % host)
    return {"install": bool(service.get("missing")), "start": due["start"], "check": not service.get("answers"),
            "apply": bool(mounts) or due["due"]}


def host_preview(uefi, mounts, service="libvirtd"):
    """What the role changes on a host, said in a preview under a capture, which runs none of it
    (the role reads the host's libvirt, which a capture does not answer): one line per hugetlbfs
    mount it makes for the tenants (``mounts``), one for the daemon's start or restart, and OVMF's
    install where a tenant boots with UEFI (``uefi``)."""
    if not isinstance(mounts, list):
        raise LibvirtServiceError("mounts (libvirt_host_hugetlbfs_mounts) must be a list of {size, path}, got %s"
                                  % type(mounts).__name__)
    lines = []
    for mount in mounts:
        lines.append("hugetlbfs %s (pagesize=%s): the libvirt host role (tenants stage) mounts it with a systemd mount unit "
                     "it enables, before %s starts, where the host has no such mount" % (mount.get("path"), mount.get("size"), service))
    if lines:
        lines.append("%s: the libvirt host role restarts it after mounting a hugetlbfs it did not have (running domains keep "
                     "running), or installs and starts it where libvirt is missing or stopped" % service)
    else:
        lines.append("%s: the libvirt host role installs and starts it where libvirt is missing or stopped" % service)
    if boolean(uefi, strict=False):
        lines.append("OVMF: the libvirt host role installs it where it is missing (a tenant boots with UEFI)")
    return lines
