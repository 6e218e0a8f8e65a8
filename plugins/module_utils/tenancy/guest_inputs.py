# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A tenant's guest options (``tenant_domain``'s ``image``, ``cloud_init``, ``management`` and
``data_nic``) checked without the host, against what the guest's tools and libvirt take: the
image's source, the cloud-init user, host name, SSH keys and packages, the NICs' networks or
bridges, MACs, VLAN and addresses; the MACs derived for the management and data NICs; which NIC
is the tenant's RDMA NIC. Pure: no I/O (guest_image makes the files from what this accepts)."""

from __future__ import absolute_import, division, print_function

import base64
import hashlib
import ipaddress
import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.mac_address import check_mac
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.ipv4 import check_ipv4

__metaclass__ = type

# The largest qcow2 disk qemu-img makes with its default 64 KiB clusters: the L1 table holds at most 32 MiB of 8-byte
# entries (QCOW_MAX_L1_SIZE, qemu's block/qcow2.h), each an L2 table of 8192 entries of 64 KiB: 2^22 * 2^13 * 2^16 bytes
QCOW2_MAX_GB = (32 * 1024 * 1024 // 8) * (64 * 1024 // 8) * (64 * 1024) // 1024 ** 3
CHECKSUM_RE = re.compile(r"^(sha1|sha224|sha256|sha384|sha512|md5):([0-9a-fA-F]+)$")

# A Linux netdev name (a host bridge): at most 15 bytes (IFNAMSIZ 16 with its NUL), no blank, '/' or ':'
# (dev_valid_name), not '.' or '..'. A libvirt network name: no '/', no blank or control character.
_NETDEV_RE = re.compile(r"^[A-Za-z0-9_.+-]{1,15}$")
_NETWORK_RE = re.compile(r"^[A-Za-z0-9_.+-]{1,64}$")


def nic_mac(name, role):
    """The MAC of tenant ``name``'s ``role`` NIC (management, data): locally administered unicast,
    from SHA-256 over ``gpuvirt.tenancy/<name>/<role>`` (as vf_mac derives the VFs', in another space)."""
    digest = bytearray(hashlib.sha256(("gpuvirt.tenancy/%s/%s" % (name, role)).encode("utf-8")).digest()[:6])
    digest[0] = (digest[0] & 0xFC) | 0x02
    return ":".join("%02x" % byte for byte in digest)


def management_mac(name):
    """The management NIC's MAC of tenant ``name`` (:func:`nic_mac`)."""
    return nic_mac(name, "management")


def data_nic_mac(name):
    """The data NIC's MAC of tenant ``name`` (:func:`nic_mac`)."""
    return nic_mac(name, "data")


def check_addresses(management, rdma_address):
    """The management NIC's gateway inside its address's subnet and not that address; the RDMA
    address not the management address."""
    address = ipaddress.ip_interface(u"%s" % management["address"]) if management.get("address") else None
    if address is not None and management.get("gateway"):
        gateway = ipaddress.ip_address(u"%s" % management["gateway"])
        if gateway not in address.network or gateway == address.ip:
            raise InputError("management.gateway: %s is %s; give the address of the router in %s (the management network's "
                             "host address)" % (gateway, "the tenant's own address" if gateway == address.ip else
                                                "outside the tenant's subnet %s" % address.network, address.network))
    if address is not None and rdma_address and ipaddress.ip_interface(u"%s" % rdma_address).ip == address.ip:
        raise InputError("cloud_init.rdma_address: %s is the management address too; give the RDMA NIC an address of its "
                         "own" % rdma_address)


# useradd's default NAME_REGEX (Debian's adduser is stricter still), its 32-character limit
_USER_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
# a package as apt and dnf name one: Debian policy (lowercase, digits, + - .) and RPM names (also capitals
# and '_'), with an architecture or a version; never starting with '-' (an option)
_PACKAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9+._-]*(:[a-z0-9]+)?(=[A-Za-z0-9.+~:_-]+)?$")
# OpenSSH's public key types (ssh-keygen -Q key, without certificates)
SSH_KEY_TYPES = ("ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
                 "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com", "ssh-dss")
_HOST_LABEL_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


def check_ssh_key(key, option):
    """One OpenSSH public key line, ``TYPE BASE64 [comment]``, whose blob decodes and names the
    same type (the key's wire format starts with its type as a length-prefixed string)."""
    words = key.split() if isinstance(key, str) and "\n" not in key.strip() and "\r" not in key else []
    blob = None
    if len(words) >= 2 and words[0] in SSH_KEY_TYPES:
        try:
            blob = base64.b64decode(words[1].encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError):
            blob = None
    ok = blob is not None and len(blob) > 4 and blob[4:4 + int.from_bytes(blob[:4], "big")] == words[0].encode("ascii")
    if not ok:
        raise InputError("%s: not one OpenSSH public key line (TYPE BASE64 comment, TYPE one of %s, its key data base64 "
                         "of that type, no line break); give the line of the key's .pub file" % (option, ", ".join(SSH_KEY_TYPES)))
    return key.strip()


def check_hostname(name, option):
    """A host name the guest takes (hostname(7), RFC 1123): labels of letters, digits and '-' (not
    at either end), 1-63 each, at most 64 characters (the kernel's limit)."""
    if not isinstance(name, str) or len(name) > 64 or not all(_HOST_LABEL_RE.match(label) for label in name.split(".")):
        raise InputError("%s: %r is not a host name (RFC 1123 labels: letters, digits and '-', not at either end, joined by "
                         "'.', at most 64 characters)" % (option, name))
    return name


def rdma_nic_mac(name, vf_mac, data_nic, cloud_init):
    """The MAC of tenant ``name``'s RDMA NIC, which the seed gives ``cloud_init.rdma_address``:
    its first network VF (``vf_mac``), else its data NIC; None without either. A tenant with both
    is refused (which of them carries RDMA would be a guess), and so is an ``rdma_address`` with
    neither (it would be dropped)."""
    if vf_mac is not None and data_nic is not None:
        raise InputError("data_nic: tenant %s has a network VF too; its RDMA NIC is the VF or the data NIC: give the data NIC "
                         "to tenants without a VF (vfs: 0), or drop data_nic" % name)
    mac = vf_mac if vf_mac is not None else (data_nic or {}).get("mac")
    if mac is None and cloud_init and cloud_init.get("rdma_address"):
        raise InputError("cloud_init.rdma_address: tenant %s has no network VF and no data_nic to carry %s; give it a VF (vfs) "
                         "or a data_nic, or leave the address out" % (name, cloud_init["rdma_address"]))
    return mac


def _check_nic_source(nic, option):
    """A NIC's ``network`` or ``bridge``, one of them, with a name libvirt and the kernel take."""
    if bool(nic.get("network")) == bool(nic.get("bridge")):
        raise InputError("%s: give network (a libvirt network) or bridge (a host bridge), one of them" % option)
    if nic.get("bridge") and (not _NETDEV_RE.match(nic["bridge"]) or nic["bridge"] in (".", "..")):
        raise InputError("%s.bridge: %r is not a Linux bridge name (1 to 15 letters, digits, '_', '-', '.', '+'); give the "
                         "bridge's name as `ip link` shows it" % (option, nic["bridge"]))
    if nic.get("network") and not _NETWORK_RE.match(nic["network"]):
        raise InputError("%s.network: %r is not a libvirt network name (letters, digits, '_', '-', '.', '+'); give the "
                         "name `virsh net-list --all` shows" % (option, nic["network"]))


def validate_data_nic(data_nic, name, planned=False):
    """A tenant's ``data_nic``, checked, with its MAC (given, or derived from ``name``): -> the NIC.
    ``planned``: its MAC is the tenant record's, checked there."""
    _check_nic_source(data_nic, "data_nic")
    data_nic = dict(data_nic)
    if data_nic.get("mac"):
        data_nic["mac"] = data_nic["mac"] if planned else check_mac(str(data_nic["mac"]), "data_nic.mac")
    else:
        data_nic["mac"] = data_nic_mac(name)
    if data_nic.get("vlan") is not None and not 1 <= data_nic["vlan"] <= 4094:
        raise InputError("data_nic.vlan: %r is not a VLAN ID; give 1 to 4094, or leave it out (untagged)" % data_nic["vlan"])
    return data_nic


def validate_guest(options, name, planned=False):
    """The guest options of one domain, checked without the host: -> (image, cloud_init,
    management, data_nic), each None when not given. ``planned``: an entry of the tenants stage,
    whose management address and MAC, RDMA address and data NIC MAC are the tenant record's
    (``guest``, ``data_nic``), checked there once; the rest is checked here."""
    image, cloud_init, management = options.get("image"), options.get("cloud_init"), options.get("management")
    data_nic = validate_data_nic(options["data_nic"], name, planned) if options.get("data_nic") is not None else None
    if image is not None:
        if bool(image.get("base")) == bool(image.get("url")):
            raise InputError("image: give base (a qcow2 image on the host) or url (with checksum), one of them")
        if image.get("url"):
            match = re.match(r"^(https?|ftp)://([^/]+)/(.*/)?([^/]+)$", image["url"])
            if match and "@" in match.group(2):
                # never echoed: the URL's user part may hold a password
                raise InputError("image.url: the URL names a user (and perhaps a password) before its host; they would be "
                                 "printed in logs and kept on the host: give a URL without them, or put the image on the host "
                                 "and give image.base")
            if not match or match.group(4) in (".", "..") or any(c.isspace() or ord(c) < 32 for c in image["url"]):
                raise InputError("image.url: %r is not an http(s) or ftp URL of a file (its last part names the file the "
                                 "image is kept as)" % image["url"])
            if not image.get("checksum"):
                raise InputError("image.checksum: required with image.url (sha256:HEX, as the image's SHA256SUMS says)")
        if image.get("checksum") and not CHECKSUM_RE.match(image["checksum"]):
            raise InputError("image.checksum: %r is not ALGORITHM:HEX (sha256:..., sha512:...)" % image["checksum"])
        if image.get("size_gb") is not None and image["size_gb"] < 1:
            raise InputError("image.size_gb: %d; give the disk size in GiB (at least the image's virtual size)" % image["size_gb"])
        if image.get("size_gb") is not None and image["size_gb"] > QCOW2_MAX_GB:
            raise InputError("image.size_gb: %d GiB is more than qemu-img makes a qcow2 disk of (%d GiB, 2 PiB, with its default "
                             "64 KiB clusters); give at most %d" % (image["size_gb"], QCOW2_MAX_GB, QCOW2_MAX_GB))
    if cloud_init is not None:
        if image is None:
            raise InputError("cloud_init: needs image (the seed is read by the cloud image's cloud-init)")
        if not _USER_RE.match(cloud_init["user"]) or cloud_init["user"] == "root":
            raise InputError("cloud_init.user: %r is not a user name useradd takes for a new user (a lowercase letter or '_', "
                             "then lowercase letters, digits, '_' or '-', at most 32, not root)" % cloud_init["user"])
        for index, key in enumerate(cloud_init["ssh_authorized_keys"]):
            check_ssh_key(key, "cloud_init.ssh_authorized_keys[%d]" % index)
        # the guest's host name: the tenant's name unless given
        check_hostname(cloud_init.get("hostname") or name, "cloud_init.hostname" if cloud_init.get("hostname") else
                       "cloud_init.hostname (left out: the tenant's name; give one)")
        for index, package in enumerate(cloud_init["packages"]):
            if not _PACKAGE_RE.match(package or ""):
                raise InputError("cloud_init.packages[%d]: %r is not a package name (Debian or RPM: letters, digits, '+', '.', "
                                 "'_', '-', starting with a letter or digit, optionally :ARCH or =VERSION); an apt or dnf "
                                 "option is not a package" % (index, package))
        if cloud_init.get("rdma_address") and not planned:
            check_ipv4(cloud_init["rdma_address"], "cloud_init.rdma_address", True)
        if cloud_init.get("fabric_manager_address"):
            check_ipv4(cloud_init["fabric_manager_address"], "cloud_init.fabric_manager_address", False)
    if management is not None:
        _check_nic_source(management, "management")
        management = dict(management)
        if not management.get("mac"):
            management["mac"] = management_mac(name)
        elif not planned:
            management["mac"] = check_mac(str(management["mac"]), "management.mac")
        if management.get("address") and not planned:
            check_ipv4(management["address"], "management.address", True)
        if management.get("gateway"):
            check_ipv4(management["gateway"], "management.gateway", False)
        for index, server in enumerate(management.get("dns") or []):
            check_ipv4(server, "management.dns[%d]" % index, False)
        check_addresses(management, (cloud_init or {}).get("rdma_address"))
        if data_nic is not None and data_nic["mac"] == management["mac"]:
            raise InputError("data_nic.mac: %s is the management NIC's MAC too; give each NIC its own MAC, or leave both "
                             "out (each is derived from the tenant's name)" % data_nic["mac"])
    return image, cloud_init, management, data_nic
