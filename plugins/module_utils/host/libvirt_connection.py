# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one place that talks to libvirt: the connection, and the live calls on a domain
(define, start, autostart, pin, resize, scheduler and disk limits, shutdown, undefine).

libvirt-python is imported here, guarded, and nowhere else; every libvirt error leaves this
file as a :class:`LibvirtError` (a :class:`StateError` carrying libvirt's message), so the
features say what failed in their own words and the runner reports it. Tests open the same
connection on libvirt's built-in test driver (``test:///default``).
"""

from __future__ import absolute_import, division, print_function

import contextlib
import traceback

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import StateError

try:
    import libvirt
except ImportError:
    libvirt = None
    LIBVIRT_IMPORT_ERROR = traceback.format_exc()
else:
    LIBVIRT_IMPORT_ERROR = None

__metaclass__ = type


class LibvirtError(StateError):
    """A libvirt call failed; the message is libvirt's."""


class NotAnswering(StateError):
    """No connection: libvirt-python is not installed, or libvirt does not answer on the URI."""


def missing_libvirt_message():
    return ("libvirt-python is required (module 'libvirt' could not be imported): install python3-libvirt "
            "(Debian/Ubuntu) or python3-libvirt (RHEL) on the managed host")


def _silence(*_args):
    """libvirt prints every error on stderr unless a handler is registered."""


def _call(method, *args):
    try:
        return method(*args)
    except libvirt.libvirtError as exc:
        raise LibvirtError(str(exc))


def _version_text(number):
    """libvirt's version number (major * 1,000,000 + minor * 1,000 + release) as ``8.0.0``."""
    return "%d.%d.%d" % (number // 1000000, number // 1000 % 1000, number % 1000)


def _cpumap(cpus, length):
    wanted = set(cpus)
    return tuple(cpu in wanted for cpu in range(length))


def _from_map(cpumap):
    return [cpu for cpu, used in enumerate(cpumap) if used]


@contextlib.contextmanager
def connection(uri):
    """A :class:`Connection` to ``uri``, closed when the block ends."""
    if libvirt is None:
        error = NotAnswering(missing_libvirt_message())
        error.details = {"exception": LIBVIRT_IMPORT_ERROR}
        raise error
    libvirt.registerErrorHandler(_silence, None)
    try:
        handle = libvirt.open(uri)
    except libvirt.libvirtError as exc:
        raise NotAnswering("uri: cannot connect to %s: %s; is libvirtd running (gpuvirt.tenancy.libvirt_host)?" % (uri, exc))
    conn = Connection(handle, uri)
    try:
        yield conn
    finally:
        handle.close()


class Connection:
    """An open libvirt connection (``handle``: a ``virConnect``) to ``uri``."""

    def __init__(self, handle, uri):
        self.handle = handle
        self.uri = uri

    def domain(self, name):
        """The :class:`Domain` named ``name``, or None when there is none."""
        try:
            return Domain(self.handle.lookupByName(name))
        except libvirt.libvirtError as exc:
            if exc.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                return None
            raise StateError("name: looking up domain %s on %s failed: %s" % (name, self.uri, exc))

    def domain_names(self):
        """Names of every domain on the connection, defined or running (transient ones too)."""
        return sorted(handle.name() for handle in _call(self.handle.listAllDomains, 0))

    def define(self, xml_text):
        """Define (or redefine) a persistent domain; -> its :class:`Domain`."""
        return Domain(_call(self.handle.defineXML, xml_text))

    def capabilities(self):
        return _call(self.handle.getCapabilities)

    def network(self, name):
        """The :class:`Network` named ``name``, or None when there is none."""
        try:
            return Network(self.handle.networkLookupByName(name))
        except libvirt.libvirtError as exc:
            if exc.get_error_code() == libvirt.VIR_ERR_NO_NETWORK:
                return None
            raise LibvirtError("looking up network %s on %s failed: %s" % (name, self.uri, exc))

    def define_network(self, xml_text):
        """Define a persistent network; -> its :class:`Network`."""
        return Network(_call(self.handle.networkDefineXML, xml_text))

    def keeps_qemu_arguments(self):
        """Whether definitions keep ``<qemu:commandline>``: the QEMU driver's namespace only."""
        return _call(self.handle.getType) == "QEMU"

    def cpu_map_length(self):
        """How many host CPUs a CPU map names."""
        return _call(self.handle.getCPUMap)[0]

    def hypervisor_versions(self):
        """``{libvirt, qemu}`` as ``major.minor.release`` text, the shape of the host model's
        ``hypervisor``: the libvirt the connection reaches, and QEMU's where the driver is QEMU's
        (None on another driver, whose version is not QEMU's)."""
        qemu = _version_text(_call(self.handle.getVersion)) if _call(self.handle.getType) == "QEMU" else None
        return {"libvirt": _version_text(_call(self.handle.getLibVersion)), "qemu": qemu}


class Network:
    """One virtual network (``handle``: a ``virNetwork``)."""

    def __init__(self, handle):
        self.handle = handle

    def definition(self):
        # flags 0: the inactive flag only skips the VF expansion of hostdev networks, and the test
        # driver refuses it
        return _call(self.handle.XMLDesc, 0)

    def is_active(self):
        return bool(_call(self.handle.isActive))

    def autostart(self):
        return bool(_call(self.handle.autostart))

    def set_autostart(self, enabled):
        _call(self.handle.setAutostart, 1 if enabled else 0)

    def start(self):
        _call(self.handle.create)


class Domain:
    """One domain (``handle``: a ``virDomain``): its persistent definition and its running state."""

    def __init__(self, handle):
        self.handle = handle

    def is_active(self):
        return bool(_call(self.handle.isActive))

    def is_persistent(self):
        return bool(_call(self.handle.isPersistent))

    def definition(self):
        """The persistent definition's XML (the running one for a transient domain)."""
        flags = libvirt.VIR_DOMAIN_XML_INACTIVE if self.is_persistent() else 0
        return _call(self.handle.XMLDesc, flags)

    def live_definition(self):
        """The running domain's XML (what it holds now, hot-plugged devices included)."""
        return _call(self.handle.XMLDesc, 0)

    # ------------------------------------------------------------------ pins, live
    def vcpu_pins(self):
        """Host CPUs of each vCPU of the running domain, by vCPU number."""
        return [_from_map(cpumap) for cpumap in _call(self.handle.vcpuPinInfo, libvirt.VIR_DOMAIN_AFFECT_LIVE)]

    def emulator_pin(self):
        return _from_map(_call(self.handle.emulatorPinInfo, libvirt.VIR_DOMAIN_AFFECT_LIVE))

    def numa_nodeset(self):
        """The running domain's NUMA memory nodeset as libvirt writes it (``""`` when unset)."""
        return _call(self.handle.numaParameters, libvirt.VIR_DOMAIN_AFFECT_LIVE).get("numa_nodeset") or ""

    # the domain is running: AFFECT_CURRENT is its live state
    def pin_vcpu(self, index, cpus, map_length):
        _call(self.handle.pinVcpuFlags, index, _cpumap(cpus, map_length), libvirt.VIR_DOMAIN_AFFECT_CURRENT)

    def pin_emulator(self, cpus, map_length):
        _call(self.handle.pinEmulator, _cpumap(cpus, map_length), libvirt.VIR_DOMAIN_AFFECT_CURRENT)

    def set_numa_nodeset(self, nodeset):
        _call(self.handle.setNumaParameters, {"numa_nodeset": nodeset}, libvirt.VIR_DOMAIN_AFFECT_LIVE)

    # ------------------------------------------------------------------ size and QoS, live
    def vcpus(self):
        """(online, most) vCPUs of the running domain."""
        live = libvirt.VIR_DOMAIN_AFFECT_LIVE
        return (_call(self.handle.vcpusFlags, live), _call(self.handle.vcpusFlags, live | libvirt.VIR_DOMAIN_VCPU_MAXIMUM))

    def set_vcpus(self, count):
        _call(self.handle.setVcpusFlags, count, libvirt.VIR_DOMAIN_AFFECT_LIVE)

    def scheduler(self):
        return _call(self.handle.schedulerParametersFlags, libvirt.VIR_DOMAIN_AFFECT_LIVE)

    def set_scheduler(self, params):
        _call(self.handle.setSchedulerParametersFlags, params, libvirt.VIR_DOMAIN_AFFECT_LIVE)

    def block_iotune(self, target):
        return _call(self.handle.blockIoTune, target, libvirt.VIR_DOMAIN_AFFECT_LIVE)

    def set_block_iotune(self, target, params):
        _call(self.handle.setBlockIoTune, target, params, libvirt.VIR_DOMAIN_AFFECT_LIVE)

    # ------------------------------------------------------------------ lifecycle
    def autostart(self):
        """Whether libvirt starts the domain when the host boots."""
        return bool(_call(self.handle.autostart))

    def set_autostart(self, enabled):
        _call(self.handle.setAutostart, 1 if enabled else 0)

    def start(self):
        _call(self.handle.create)

    def shutdown(self):
        """Press the ACPI power button."""
        _call(self.handle.shutdown)

    def destroy(self):
        """Power off."""
        _call(self.handle.destroy)

    def undefine(self, nvram=False):
        """Remove the persistent definition, with a managed save image and snapshot metadata
        (they would block it) and, with ``nvram``, the UEFI variables file."""
        flags = libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE | libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA
        if nvram:
            try:
                self.handle.undefineFlags(flags | libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
                return
            except libvirt.libvirtError as exc:
                # a driver without UEFI variables (the test driver) refuses the flag itself
                if exc.get_error_code() != libvirt.VIR_ERR_INVALID_ARG:
                    raise LibvirtError(str(exc))
        _call(self.handle.undefineFlags, flags)
