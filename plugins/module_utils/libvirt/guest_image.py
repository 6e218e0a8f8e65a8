# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A tenant's guest files: its disk (a copy-on-write qcow2 overlay on a base cloud image, or a
full copy) and its cloud-init NoCloud seed (an ISO 9660 volume labelled ``cidata`` holding
``user-data``, ``meta-data`` and ``network-config``), for ``tenant_domain``'s ``image``,
``cloud_init`` and ``management`` options.

Layout under ``guest_dir`` (default under ``/var/lib/libvirt/images``, where libvirt's QEMU may
read and SELinux labels images): ``base/<file>`` for images fetched from a URL (shared by the
tenants, never removed with one), and ``tenants/<name>/`` for what one tenant gets: ``disk.qcow2``,
``seed.iso``, ``seed/`` (the seed's three files, kept to compare the next run with) and
``made.json``, the list of the files this code made there. Removing the tenant deletes the files
that list names and nothing else.

Decide, then act: :func:`plan_guest` reads (the base image's ``qemu-img info --output=json``, what
exists) and refuses bad input before anything is written; :meth:`GuestPlan.apply` makes what is
missing. Every read and change goes through the host seam (``host.path``, ``host.fs``,
``host.files``, ``host.commands``).
"""

from __future__ import absolute_import, division, print_function

import contextlib
import fcntl
import hashlib
import json
import os
from collections import OrderedDict

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.guest_inputs import CHECKSUM_RE, rdma_nic_mac, validate_guest
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.guest_options import GUEST_DIR
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.fabric_vm import fabric_runcmd
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError, labelled, normalised_path
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.disk_header import HEAD_BYTES, disk_contents, not_a_disk
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.domain_name import check_domain_name

__metaclass__ = type

MANIFEST = "made.json"
SEED_FILES = ("user-data", "meta-data", "network-config")
# The ISO builders of Debian/Ubuntu (genisoimage; cloud-image-utils' cloud-localds calls it) and
# RHEL (xorriso's xorrisofs; mkisofs on older releases): the same options for a Joliet + Rock
# Ridge volume with the files at its root.
ISO_TOOLS = ("genisoimage", "xorrisofs", "mkisofs")
ISO_HINT = "install genisoimage (Debian/Ubuntu) or xorriso (RHEL 9)"
QEMU_IMG_HINT = "install qemu-utils (Debian/Ubuntu) or qemu-img (RHEL)"
GIB = 1024 ** 3
# the steps that can take minutes (a download, a full copy): their seconds go to the result's elapsed_s
LONG_STEPS = ("fetch", "copy")


# --------------------------------------------------------------------------- pure
def tenant_paths(guest_dir, name):
    """Host paths of what tenant ``name`` gets; ``guest_dir`` an absolute normalised path (the
    directories made for it are the ones meant, and removal finds what was made)."""
    if not normalised_path(guest_dir, "guest_dir").startswith("/"):
        raise InputError("guest_dir: %s is not an absolute path; give one such as %s" % (guest_dir, GUEST_DIR))
    # a directory of the tenant's own under tenants/, never the one above (a removal deletes what it lists)
    tenant_dir = os.path.join(guest_dir, "tenants", check_domain_name(name))
    return {"dir": tenant_dir, "disk": os.path.join(tenant_dir, "disk.qcow2"), "seed": os.path.join(tenant_dir, "seed.iso"),
            "seed_dir": os.path.join(tenant_dir, "seed"), "manifest": os.path.join(tenant_dir, MANIFEST)}


def console_log_path(name):
    """Where libvirt writes the tenant's serial console (its boot and cloud-init messages)."""
    return "/var/log/libvirt/qemu/%s-console.log" % name


def _document(value):
    # JSON is YAML: cloud-init reads it as it reads YAML, and the text is the same every run. Written as
    # UTF-8 (ensure_ascii off): YAML reads a \u escape pair as two lone surrogates, not one character
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def seed_documents(name, cloud_init, management, rdma_mac):
    """The three NoCloud files (name -> text). user-data: the user with sudo and the SSH keys,
    no password login, the host name in /etc/hosts, the packages; network-config v2: the
    management NIC and the tenant's RDMA NIC (``rdma_mac``: its first network VF, else its data
    NIC), each matched by its MAC, with their static addresses. With ``fabric_manager_address``
    (the Fabric Manager service VM), user-data's ``runcmd`` sets its fabricmanager.cfg and enables
    the unit (tenancy/fabric_vm.fabric_runcmd)."""
    user = {"name": cloud_init["user"], "shell": "/bin/bash", "sudo": "ALL=(ALL) NOPASSWD:ALL", "lock_passwd": True,
            "ssh_authorized_keys": list(cloud_init["ssh_authorized_keys"])}
    # manage_etc_hosts localhost: the host name resolves (sudo asks for it) through one 127.0.1.1 line, and the rest of
    # /etc/hosts (the guest stage's block of RDMA addresses) is kept at every boot
    user_data = {"hostname": cloud_init.get("hostname") or name, "users": [user], "ssh_pwauth": False,
                 "manage_etc_hosts": "localhost"}
    if cloud_init["packages"]:
        user_data["packages"] = list(cloud_init["packages"])
        user_data["package_update"] = True
    if cloud_init.get("fabric_manager_address"):
        # the Fabric Manager service VM: its fabricmanager.cfg in the Shared NVSwitch mode, listening there (fabric_vm)
        user_data["runcmd"] = fabric_runcmd(cloud_init["fabric_manager_address"])
    ethernets = OrderedDict()
    if management is not None:
        nic = {"match": {"macaddress": management["mac"]}, "set-name": "mgmt0"}
        if management.get("address"):
            nic["addresses"] = [management["address"]]
            if management.get("gateway"):
                nic["routes"] = [{"to": "0.0.0.0/0", "via": management["gateway"]}]
            if management.get("dns"):
                nic["nameservers"] = {"addresses": list(management["dns"])}
        else:
            nic["dhcp4"] = True
        ethernets["management"] = nic
    if rdma_mac is not None and cloud_init.get("rdma_address"):
        ethernets["rdma"] = {"match": {"macaddress": rdma_mac}, "addresses": [cloud_init["rdma_address"]]}
    return OrderedDict([
        ("user-data", "#cloud-config\n" + _document(user_data)),
        ("meta-data", _document({"instance-id": name, "local-hostname": cloud_init.get("hostname") or name})),
        ("network-config", _document({"version": 2, "ethernets": ethernets})),
    ])


def image_info(text, what):
    """``qemu-img info --output=json`` text -> {format, virtual_size, backing}."""
    try:
        info = json.loads(text)
        return {"format": str(info["format"]), "virtual_size": int(info["virtual-size"]),
                "backing": info.get("full-backing-filename") or info.get("backing-filename")}
    except (ValueError, KeyError, TypeError):
        raise StateError("qemu-img info of %s did not answer JSON with format and virtual-size: %r" % (what, text[:200]))


def _gib(size):
    return "%.1f GiB" % (float(size) / GIB)


# --------------------------------------------------------------------------- reads
def _exists(host, host_path, option="guest_dir"):
    return host.lexists(host_path, option)


def _read(host, host_path, option="guest_dir"):
    return host.read_text(host_path, option, not_utf8="default")


def seed_addresses(host, files):
    """The guest addresses a domain's seeds give (IPv4, without prefix): for each ``seed.iso``
    among its disk ``files``, the ``network-config`` this collection keeps in ``seed/`` beside it
    (tenant_paths); a seed it did not make, or one it cannot read, gives none."""
    out = []
    for path in files:
        if os.path.basename(path) != "seed.iso":
            continue
        try:
            text = _read(host, os.path.join(os.path.dirname(path), "seed", "network-config"))
            ethernets = json.loads(text)["ethernets"] if text else {}
            for nic in ethernets.values():
                for address in nic.get("addresses") or []:
                    address = str(address).split("/", maxsplit=1)[0]
                    if address not in out:
                        out.append(address)
        except (InputError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return out


def file_checksum(real_path, algorithm):
    digest = hashlib.new(algorithm)
    with open(real_path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def qemu_img(host):
    return host.commands.which("qemu-img", required=True, hint=QEMU_IMG_HINT)


def read_image_info(host, host_path, option="guest_dir"):
    _rc, out, _err = host.commands.run([qemu_img(host), "info", "--output=json", "--force-share", host.path(host_path, option)])
    return image_info(out, host_path)


def backing_chain(host, host_path, option="disks", depth=16):
    """The real paths of ``host_path`` (when it is a file under the root) and of each file its
    image reads through (its backing file, that one's, ...), as qemu-img names them; [] for a path
    that is no file or leads outside the root."""
    try:
        real = host.path(host_path, option)
    except InputError:
        return []
    chain = []
    while real and os.path.isfile(real) and len(chain) < depth and os.path.realpath(real) not in chain:
        real = os.path.realpath(real)
        if not host.fs.contains(real):
            break  # a backing file outside the root: read nothing there
        chain.append(real)
        try:
            _rc, out, _err = host.commands.run([qemu_img(host), "info", "--output=json", "--force-share", real])
            backing = image_info(out, host_path)["backing"]
        except StateError:
            break
        real = os.path.join(os.path.dirname(real), backing) if backing else None
    return chain


def read_manifest(host, paths):
    """The files the collection made for a tenant (host paths), [] without a manifest."""
    text = _read(host, paths["manifest"])
    if text is None:
        return []
    try:
        made = json.loads(text)["made"]
    except (ValueError, KeyError, TypeError):
        raise StateError("%s is not the collection's list of made files ({\"made\": [...]}); move it away or fix it"
                         % paths["manifest"])
    # only paths inside the tenant's own directory are ever deleted
    return [p for p in made if isinstance(p, str) and os.path.dirname(p) in (paths["dir"], paths["seed_dir"])]


class GuestPlan:
    """What one tenant's guest needs made, decided from its options and the host (reads only)."""

    def __init__(self, host, name, options, vf_mac=None, check_mode=False, planned=False):
        self.name = name
        self.notes = []
        self.image, self.cloud_init, self.management, self.data_nic = validate_guest(options, name, planned)
        self.guest_dir = options.get("guest_dir") or GUEST_DIR
        self.paths = tenant_paths(self.guest_dir, name)
        self.steps = []  # (kind, detail) in order
        self.made = []
        self.rdma_mac = rdma_nic_mac(name, vf_mac, self.data_nic, self.cloud_init)
        if self.cloud_init is not None and not self.cloud_init["ssh_authorized_keys"]:
            self.notes.append("%s: its seed gives user %s no SSH key and password login is off: nobody can log in to its guest; "
                              "give gpuvirt_guest_access.ssh_authorized_keys" % (name, self.cloud_init["user"]))
        if self.image is None:
            return
        self.made = read_manifest(host, self.paths)
        self.base = self._base(host, check_mode)
        self._disk(host)
        if self.cloud_init is not None:
            self._seed(host)

    # ------------------------------------------------------------------ decide
    def _base(self, host, check_mode):
        image = self.image
        if image.get("base"):
            base = image["base"]
            if not host.is_file(base, "image.base"):
                raise InputError("image.base: %s is not a file on the host; download the cloud image there first, or give "
                                 "image.url and image.checksum" % base)
            if image.get("checksum"):
                self._verify(host.path(base, "image.base"), image["checksum"], "image.base %s" % base)
            info = read_image_info(host, base, "image.base")
            self._check_disk(host.path(base, "image.base"), info, "image.base: %s" % base)
            return {"path": base, "option": "image.base", "info": info, "fetch": None}
        url = image["url"]
        base = os.path.join(self.guest_dir, "base", url.rsplit("/", 1)[-1])
        verified = base + ".checksum"
        if host.is_file(base, "guest_dir"):
            if (_read(host, verified) or "").strip() != image["checksum"]:
                self._verify(host.path(base, "guest_dir"), image["checksum"], "image %s (downloaded from %s)" % (base, url))
                self.steps.append(("checksum", base))
            info = read_image_info(host, base)
            self._check_disk(host.path(base, "guest_dir"), info, "image.url: %s (downloaded as %s)" % (url, base))
            return {"path": base, "option": "guest_dir", "info": info, "fetch": None}
        self.steps.append(("fetch", base))
        if check_mode:
            self.notes.append("%s: the image %s is not downloaded yet; its size and checksum are checked when it is"
                              % (self.name, url))
        return {"path": base, "option": "guest_dir", "info": None, "fetch": url}

    def _check_disk(self, real_path, info, what, done="Nothing was changed"):
        """A file qemu-img takes as raw is a disk only with a partition table or a filesystem at its
        start (qemu-img reads any file as raw): else an InputError saying what it is instead."""
        if info["format"] != "raw":
            return
        with open(real_path, "rb") as handle:
            head = handle.read(HEAD_BYTES)
        if disk_contents(head) is None:
            raise InputError("%s (tenant %s) is not a disk image: qemu-img reads it as raw, and it is %s. %s. Give the "
                             "tenant's base cloud image (qcow2, or a raw disk with a partition table or a filesystem)"
                             % (what, self.name, not_a_disk(head, os.path.getsize(real_path)), done))

    @staticmethod
    def _verify(real_path, checksum, what, done="nothing was changed"):
        algorithm, want = CHECKSUM_RE.match(checksum).groups()
        have = file_checksum(real_path, algorithm)
        if have.lower() != want.lower():
            raise InputError("image.checksum: %s has %s %s, not %s; %s. Give the checksum the image's "
                             "publisher lists, or the right image" % (what, algorithm, have, want.lower(), done))

    def _disk(self, host):
        info = self.base["info"]
        size_gb = self.image.get("size_gb")
        if info is not None:
            self.check_size(info)
        disk = self.paths["disk"]
        if _exists(host, disk):
            if disk not in self.made:
                raise StateError("%s exists and the collection did not make it (not in %s); move it away or name "
                                 "another guest_dir" % (disk, self.paths["manifest"]))
            have = read_image_info(host, disk)
            if size_gb is not None and have["virtual_size"] < size_gb * GIB:
                self.notes.append("%s: disk %s stays at %s (image.size_gb %d is larger): growing an existing disk is not "
                                  "built; remove the tenant to make it again" % (self.name, disk, _gib(have["virtual_size"]), size_gb))
            backing = have.get("backing")
            if not self.image["copy"] and backing and os.path.normpath(backing) != os.path.normpath(host.path(self.base["path"], self.base["option"])):
                self.notes.append("%s: disk %s is an overlay on %s, not on %s: the disk is kept"
                                  % (self.name, disk, backing, self.base["path"]))
            return
        self.steps.append(("copy" if self.image["copy"] else "overlay", disk))

    def check_size(self, info):
        size_gb = self.image.get("size_gb")
        if size_gb is not None and size_gb * GIB < info["virtual_size"]:
            raise InputError("image.size_gb: %d GiB is smaller than the virtual size of %s (%s); give at least %d"
                             % (size_gb, self.base["path"], _gib(info["virtual_size"]), -(-info["virtual_size"] // GIB)))

    def _seed(self, host):
        self.documents = seed_documents(self.name, self.cloud_init, self.management, self.rdma_mac)
        self.seed_before = OrderedDict((n, _read(host, os.path.join(self.paths["seed_dir"], n)) or "") for n in SEED_FILES)
        for path in [self.paths["seed"]] + [os.path.join(self.paths["seed_dir"], n) for n in SEED_FILES]:
            if _exists(host, path) and path not in self.made:
                raise StateError("%s exists and the collection did not make it (not in %s); move it away or name another "
                                 "guest_dir" % (path, self.paths["manifest"]))
        if self.seed_before != self.documents or not _exists(host, self.paths["seed"]):
            self.steps.append(("seed", self.paths["seed"]))
            iso_tool(host)

    @property
    def changed(self):
        return bool(self.steps)

    def diff(self):
        if self.image is None:
            return []
        header = "%s (guest files)" % self.name
        lines = ["%s %s\n" % step for step in self.steps]
        entries = [{"before_header": header, "after_header": header, "before": "", "after": "".join(lines)}] if lines else []
        if self.cloud_init is not None and self.seed_before != self.documents:
            for name in SEED_FILES:
                if self.seed_before[name] != self.documents[name]:
                    path = os.path.join(self.paths["seed_dir"], name)
                    entries.append({"before_header": path, "after_header": path, "before": self.seed_before[name],
                                    "after": self.documents[name]})
        return entries

    # ------------------------------------------------------------------ for the domain
    def domain_disk(self):
        """The tenant's disk as a ``disks`` entry (the first), or None."""
        return {"path": self.paths["disk"], "format": "qcow2"} if self.image is not None else None

    def seed_cdrom(self):
        return self.paths["seed"] if self.cloud_init is not None else None

    # ------------------------------------------------------------------ act
    def apply(self, host, run, kinds=None):
        """Make what the plan found missing (only the steps of ``kinds`` when given: the
        downloads of every tenant go first). Each step holds a lock on its file (a download's
        base image, a tenant's own directory): two runs at once on one host wait for each other,
        and the second finds the file made instead of making it again under the first."""
        for kind, path in self.steps:
            if kinds is not None and kind not in kinds:
                continue
            existed = self._existing(host, kind, path)
            try:
                self._step(host, run, kind, path)
            except (InputError, StateError) as exc:
                raise self._undone(host, kind, path, existed, exc)
            run.changed = True

    def _step(self, host, run, kind, path):
        host.files.makedirs(host.path(os.path.dirname(path), "guest_dir"))
        with file_lock(host, self.guest_dir, path), run.timed("%s %s" % (kind, path) if kind in LONG_STEPS else None):
            if kind in ("fetch", "overlay", "copy") and self._made_meanwhile(host, kind, path):
                return
            if kind == "fetch":
                self._fetch(host, path)
            elif kind == "checksum":
                host.files.write(host.path(path + ".checksum", "guest_dir"), self.image["checksum"] + "\n")
            elif kind in ("overlay", "copy"):
                self._make_disk(host, kind, path, run)
            elif kind == "seed":
                self._make_seed(host, run)

    # ------------------------------------------------------------------ a step that fails
    def _step_files(self, kind, path):
        """(the files a step makes, the directories it makes, the lock files it takes), host paths."""
        files = [path, path + ".part"] + ([path + ".checksum"] if kind == "fetch" else [])
        dirs = []
        directory = os.path.dirname(path)
        while directory not in ("/", ""):  # makedirs makes each missing one
            dirs.append(directory)
            directory = os.path.dirname(directory)
        locks = [path]
        if kind in ("overlay", "copy", "seed"):
            files.append(self.paths["manifest"])
            locks.append(self.paths["manifest"])
        if kind == "seed":
            files += [os.path.join(self.paths["seed_dir"], n) for n in SEED_FILES]
            dirs.append(self.paths["seed_dir"])
        lock_dir = os.path.join(self.guest_dir, ".locks")
        lock_files = [os.path.join(lock_dir, os.path.relpath(p, self.guest_dir).replace("/", "%") + ".lock") for p in locks]
        return files, dirs + [lock_dir], lock_files

    def _existing(self, host, kind, path):
        """Which of the paths a step may make exist before it runs."""
        files, dirs, locks = self._step_files(kind, path)
        return set(p for p in files + dirs + locks if _exists(host, p))

    def _undone(self, host, kind, path, existed, exc):
        """After a step failed: what it made of the tenant's own is removed (its partial or made
        files, their lines in the tenant's list of made files, the tenant's directories it made,
        when empty); the error then says exactly what of it stays (directories shared with other
        tenants, lock files another run may be waiting on). -> the error to raise."""
        files, dirs, locks = self._step_files(kind, path)
        new = [p for p in files if p not in existed and p != self.paths["manifest"] and _exists(host, p)]
        for made in new:
            if kind != "fetch" or made not in (path, path + ".checksum"):  # a download that passed its checksum is kept
                host.files.remove(host.path(made, "guest_dir"))
        if kind != "fetch" and _exists(host, self.paths["manifest"]):
            with file_lock(host, self.guest_dir, self.paths["manifest"]):
                made = [p for p in read_manifest(host, self.paths) if p != self.paths["manifest"]]
                kept = [p for p in made if p not in files or _exists(host, p)]
                if not kept and self.paths["manifest"] not in existed:
                    host.files.remove(host.path(self.paths["manifest"], "guest_dir"))
                elif kept != made:
                    text = json.dumps({"made": kept + [self.paths["manifest"]]}, indent=2) + "\n"
                    host.files.write(host.path(self.paths["manifest"], "guest_dir"), text)
        for directory in (self.paths["seed_dir"], self.paths["dir"]):
            real = host.path(directory, "guest_dir")
            if directory in dirs and directory not in existed and os.path.isdir(real) and not os.listdir(real):
                os.rmdir(real)
        stays = [p for p in sorted(set(files + dirs + locks)) if p not in existed and _exists(host, p)]
        said = ("left on the host: %s" % ", ".join(stays)) if stays else "nothing of it is left on the host"
        error = type(exc)("%s. The %s step of tenant %s stopped; what it made of the tenant's own was removed, %s"
                          % (str(exc).rstrip("."), kind, self.name, said)) if isinstance(exc, InputError) else \
            StateError("%s. The %s step of tenant %s stopped; what it made of the tenant's own was removed, %s"
                       % (str(exc).rstrip("."), kind, self.name, said))
        error.details = getattr(exc, "details", None)
        return error

    def _made_meanwhile(self, host, kind, path):
        """Whether another run made the file this step makes after this one decided (under the
        step's lock, so the other run is done with it): a base image whose checksum it verified,
        or this tenant's disk in its list of made files."""
        if not host.is_file(path, "guest_dir"):
            return False
        if kind == "fetch":
            if (_read(host, path + ".checksum") or "").strip() != self.image["checksum"]:
                return False
            self.base["info"] = read_image_info(host, path)
            self.check_size(self.base["info"])
            return True
        return path in read_manifest(host, self.paths)

    def _record(self, host, paths):
        """Add ``paths`` to the tenant's list of made files, read again under its lock: another
        run at once may have added its own since this one read the list."""
        host.files.makedirs(host.path(self.paths["dir"], "guest_dir"))
        with file_lock(host, self.guest_dir, self.paths["manifest"]):
            self.made = [p for p in read_manifest(host, self.paths) if p != self.paths["manifest"]]
            for path in paths:
                if path not in self.made:
                    self.made.append(path)
            made = json.dumps({"made": self.made + [self.paths["manifest"]]}, indent=2) + "\n"
            host.files.write(host.path(self.paths["manifest"], "guest_dir"), made)

    def _fetch(self, host, base):
        # this run's own partial file: another run's download is never written into it
        part_path = "%s.part.%d" % (base, os.getpid())
        part = host.path(part_path, "guest_dir")
        url = self.image["url"]
        if host.commands.which("curl"):
            argv = [host.commands.which("curl"), "-fsSL", "--retry", "3", "-o", part, url]
        elif host.commands.which("wget"):
            argv = [host.commands.which("wget"), "-q", "-O", part, url]
        else:
            raise StateError("neither curl nor wget is on the host to download %s; install curl, or put the image on the "
                             "host and give image.base" % url)
        try:
            host.commands.run(argv)
            self._verify(part, self.image["checksum"], "the download of %s" % url, done="the download was removed")
            self._check_disk(part, read_image_info(host, part_path), "image.url: %s" % url, done="The download was removed")
        except (InputError, StateError):
            host.files.remove(part)
            raise
        os.rename(part, host.path(base, "guest_dir"))
        host.files.write(host.path(base + ".checksum", "guest_dir"), self.image["checksum"] + "\n")
        self.base["info"] = read_image_info(host, base)
        self.check_size(self.base["info"])

    def _make_disk(self, host, kind, disk, run):
        base, base_option, info = self.base["path"], self.base["option"], self.base["info"]
        size_gb = self.image.get("size_gb")
        self._record(host, [disk, disk + ".part"])
        tool = qemu_img(host)
        # made under another name, then renamed: a disk stopped half-way is never taken for made
        partial = host.path(disk + ".part", "guest_dir")
        host.files.remove(partial)
        if kind == "overlay":
            argv = [tool, "create", "-q", "-f", "qcow2", "-F", info["format"], "-b", host.path(base, base_option), partial]
            if size_gb is not None:
                argv.append("%dG" % size_gb)
            host.commands.run(argv)
        else:
            host.commands.run([tool, "convert", "-f", info["format"], "-O", "qcow2", host.path(base, base_option), partial])
            if size_gb is not None and size_gb * GIB > info["virtual_size"]:
                host.commands.run([tool, "resize", "-q", partial, "%dG" % size_gb])
        os.rename(partial, host.path(disk, "guest_dir"))
        run.changed = True

    def _make_seed(self, host, run):
        seed_dir = self.paths["seed_dir"]
        host.files.makedirs(host.path(seed_dir, "guest_dir"))
        files = [os.path.join(seed_dir, n) for n in SEED_FILES]
        self._record(host, files + [self.paths["seed"], self.paths["seed"] + ".part"])
        for path in files:
            host.files.write(host.path(path, "guest_dir"), self.documents[os.path.basename(path)], mode=0o600)
        tool = iso_tool(host)
        partial = host.path(self.paths["seed"] + ".part", "guest_dir")
        host.commands.run([tool, "-quiet", "-output", partial, "-volid", "cidata", "-joliet", "-rock"]
                          + [host.path(p, "guest_dir") for p in files])
        os.rename(partial, host.path(self.paths["seed"], "guest_dir"))
        run.changed = True


@contextlib.contextmanager
def file_lock(host, guest_dir, path):
    """An exclusive lock on ``path`` (a host path under ``guest_dir``), held while the caller makes
    that file: ``<guest_dir>/.locks/<path relative to guest_dir, '/' as '%'>.lock``, apart from the
    tenants' directories (a removal leaves them empty), flock (released when the process ends,
    whatever ends it)."""
    locks = host.path(os.path.join(guest_dir, ".locks"), "guest_dir")
    host.files.makedirs(locks)
    name = os.path.relpath(path, guest_dir).replace("/", "%")
    with open(os.path.join(locks, name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def iso_tool(host):
    """The first ISO builder on the host's PATH, or StateError naming what to install."""
    for name in ISO_TOOLS:
        path = host.commands.which(name)
        if path:
            return path
    raise StateError("no ISO builder (%s) on the host for the cloud-init seed; %s; nothing was changed"
                     % (", ".join(ISO_TOOLS), ISO_HINT))


def plan_guest(host, name, options, vf_mac=None, check_mode=False, label=None, planned=False):
    with labelled(label):
        return GuestPlan(host, name, options, vf_mac=vf_mac, check_mode=check_mode, planned=planned)


# --------------------------------------------------------------------------- removal
class GuestRemoval:
    """The files the collection made for a removed tenant (its ``made.json``), to delete."""

    def __init__(self, host, name, guest_dir):
        self.name = name
        self.paths = tenant_paths(guest_dir or GUEST_DIR, name)
        made = read_manifest(host, self.paths)
        self.files = [p for p in made if host.is_file(p, "guest_dir") or host.is_link(p, "guest_dir")]

    @property
    def changed(self):
        return bool(self.files)

    def diff(self):
        if not self.files:
            return []
        header = "%s (guest files)" % self.name
        return [{"before_header": header, "after_header": header, "before": "".join(p + "\n" for p in self.files),
                 "after": ""}]

    def apply(self, host, run):
        for path in self.files:
            if path != self.paths["manifest"]:
                host.files.remove(host.path(path, "guest_dir"))
                run.changed = True
        host.files.remove(host.path(self.paths["manifest"], "guest_dir"))
        for directory in (self.paths["seed_dir"], self.paths["dir"]):
            real = host.path(directory, "guest_dir")
            if os.path.isdir(real) and not os.listdir(real):
                os.rmdir(real)
