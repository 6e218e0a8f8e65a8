# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tenant contract's rule over files, pure: no tenant is given a file
another tenant or domain owns or reads. A tenant's files are known once its guest's paths are
derived (its disks, its seed, the base image its overlay reads), so the domain code applies it
(``tenant_domain``, with ``domains`` or ``tenants``) before anything changes."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, labelled

__metaclass__ = type


def check_tenant_files(present, names, holdings):
    """``present``: [(name, label, own files, base or None)] of the tenants that stay, in list
    order; ``names``: every tenant of the call (those it removes too); ``holdings``: {domain:
    (devices, MACs, files)} of the domains on the host (libvirt domain_holdings). A tenant's disks
    and seed belong to it alone (not another entry's disk, seed or base image, not a disk of
    another domain on the host), and the base image its overlay reads is no other tenant's or
    domain's disk (which that one writes). A tenant the call redefines or removes is compared as
    the call leaves it. InputError naming both and the fix."""
    owners, readers = {}, {}
    for name, label, own, base in present:
        for path in own:
            other = owners.get(path) or readers.get(path)
            if other is not None and other != name:
                with labelled(label):
                    raise InputError("%s is also a file of tenant %s; a tenant's disk or seed is its own: give it another "
                                     "path, or leave disks out and give it an image (its own overlay)" % (path, other))
            owners[path] = name
        if base is not None:
            if owners.get(base) not in (None, name):
                with labelled(label):
                    raise InputError("image.base: %s is a disk of tenant %s, which writes it; give the base cloud image "
                                     "(read only, shared by the overlays)" % (base, owners[base]))
            readers.setdefault(base, name)
    for domain, (_devices, _macs, files) in holdings.items():
        if domain in names:
            continue
        for _name, label, own, base in present:
            taken = [f for f in own + ([base] if base else []) if f in files]
            if taken:
                with labelled(label):
                    raise InputError("%s is a disk of domain %s, which reads or writes it; a tenant's files are its own: give "
                                     "another path (for image.base, the base cloud image)" % (taken[0], domain))
