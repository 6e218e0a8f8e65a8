# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether libvirt is installed and its daemon enabled and running on the host: the packages of
the host's family (dpkg or rpm) that are missing, and what ``systemctl show`` says of the service.
Read through the host seam's commands (argument lists); reads only, and never fails for a host
where nothing is installed yet (a bare host): that is what the read is for. Whether libvirt
answers is the connection's to tell (``domain_info.tenant_domain_info``)."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.packages import not_installed, package_family
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.systemd import parse_systemctl_show, show_argv

__metaclass__ = type

# libvirtd with the QEMU driver, libvirt-python (the modules' library) and virt-xml-validate, per
# OS family; OVMF (UEFI firmware for x86_64 guests, with the descriptors libvirt's
# <os firmware='efi'> picks from) when a tenant boots with UEFI.
PACKAGES = {
    "Debian": ["libvirt-daemon-system", "qemu-system-x86", "python3-libvirt", "libxml2-utils"],
    "RedHat": ["libvirt-daemon-kvm", "qemu-kvm", "python3-libvirt", "libvirt-client"],
}
FIRMWARE_PACKAGES = {"Debian": ["ovmf"], "RedHat": ["edk2-ovmf"]}

# The options of the read (tenant_domain_info's ``service``).
SERVICE_OPTIONS = dict(
    name=dict(type="str", default="libvirtd"),
    packages=dict(type="list", elements="str"),
    uefi=dict(type="bool", default=False),
)


def wanted_packages(family, packages=None, uefi=False):
    """The packages the host needs: ``packages`` (None: the family's list), and OVMF with ``uefi``."""
    base = list(packages) if packages is not None else list(PACKAGES.get(family, []))
    return base + (list(FIRMWARE_PACKAGES.get(family, [])) if uefi else [])


def unit_state(host, systemctl, name):
    """-> (enabled, active): what ``systemctl is-enabled`` and ``is-active`` would print for the
    unit (``enabled``, ``disabled``, ...; ``active``, ``inactive``, ...), read in one ``systemctl
    show``; a unit that does not exist is ("", "inactive"), as they print it; ("", "") without
    systemctl or where systemd is not running."""
    if systemctl is None:
        return "", ""
    _rc, out, _err = host.commands.run(show_argv(systemctl, [name]), check=False)
    units = parse_systemctl_show(out)
    unit = units[0] if units else {}
    return unit.get("UnitFileState", ""), unit.get("ActiveState", "")


def read_service(host, options):
    """{family, packages (wanted), missing, enabled, active} of the host, for ``options``
    (:data:`SERVICE_OPTIONS`, validated)."""
    family, program = package_family(host)
    wanted = wanted_packages(family, options["packages"], options["uefi"])
    missing = not_installed(host, family, program, wanted) if program else []
    enabled, active = unit_state(host, host.commands.which("systemctl"), options["name"])
    return {"family": family, "packages": wanted, "missing": missing, "enabled": enabled, "active": active}
