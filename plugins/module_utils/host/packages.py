# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which packages of a list are installed on the host, by its family's package database (dpkg on
Debian, rpm on RedHat), read through the host seam's commands. Reads only: installing is the
play's (``ansible.builtin.package``), only for what this says is missing."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

__metaclass__ = type

# ${Status} is "want error status": a package is installed when its files are (status installed, no
# error flag), whether it is wanted as install or held at its version (apt-mark hold: "hold ok
# installed"); "deinstall ok config-files" (removed, its configuration kept) and the half-* states are not
_DPKG_WANTS_INSTALLED = ("install", "hold")


def _dpkg_installed(status):
    """Whether a dpkg ``${Status}`` says the package is installed."""
    words = status.split()
    return len(words) == 3 and words[0] in _DPKG_WANTS_INSTALLED and words[1] == "ok" and words[2] == "installed"


def package_family(host):
    """-> (family, the program that answers for its packages): Debian with dpkg-query, RedHat
    with rpm, else ("unknown", None)."""
    for family, program in (("Debian", "dpkg-query"), ("RedHat", "rpm")):
        path = host.commands.which(program)
        if path:
            return family, path
    return "unknown", None


# one line per package dpkg knows of those asked: its name, its name with the architecture where
# it is Multi-Arch: same (libc6:amd64), its architecture (all, amd64) and its status
_DPKG_FORMAT = "-f=${Package}\t${binary:Package}\t${Architecture}\t${Status}\n"


def not_installed(host, family, program, packages):
    """The packages of ``packages`` (in their order) that are not installed. Debian: one
    ``dpkg-query -W`` for all of them (it prints the packages it knows, sorted, names the others
    on stderr and exits 1 then, so its exit status says nothing of one package); a package asked
    by name or as name:arch is installed when a line of that name (and architecture) says
    ``install ok installed`` or, held with ``apt-mark hold``, ``hold ok installed``.
    RedHat: ``rpm -q`` per package, by its exit status (its output names a package as it is
    installed, not as asked)."""
    packages = list(packages)
    if not packages:
        return []
    if family == "Debian":
        _rc, out, _err = host.commands.run([program, "-W", _DPKG_FORMAT] + packages, check=False)
        found = set()
        for line in out.splitlines():
            fields = [field.strip() for field in line.split("\t")]
            if len(fields) == 4 and _dpkg_installed(fields[3]):
                found.update((fields[0], fields[1], "%s:%s" % (fields[0], fields[2])))
        return [p for p in packages if p not in found]
    return [p for p in packages if host.commands.run([program, "-q", p], check=False)[0] != 0]


def check_packages(by_family, option="packages"):
    """``by_family`` (OS family -> package names) as given, refused naming ``option`` when it is
    not that."""
    if not isinstance(by_family, dict) or not all(
            isinstance(names, list) and all(isinstance(n, str) and n.strip() for n in names) for names in by_family.values()):
        raise InputError("%s: give a dict of OS family (Debian, RedHat) -> a list of package names, e.g. "
                         "{Debian: [rdma-core, ibverbs-utils], RedHat: [rdma-core, libibverbs-utils]}; got %r" % (option, by_family))
    return dict((str(family), list(names)) for family, names in by_family.items())


def missing_packages(host, by_family):
    """{family, wanted, missing} for ``by_family`` (family -> package names; ``default``: the names
    for a family not listed): the host's family's names and those not installed; with no package
    database nothing is wanted (nothing can be said missing)."""
    family, program = package_family(host)
    wanted = list(by_family.get(family, by_family.get("default")) or []) if program else []
    return {"family": family, "wanted": wanted, "missing": not_installed(host, family, program, wanted)}
