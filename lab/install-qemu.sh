#!/usr/bin/env bash
# Installs the lab's QEMU (qemu-system-x86 10.0 and qemu-utils) from Debian 12's
# bookworm-backports suite, which carries the devices the lab needs and QEMU 7.2 lacks:
# igb (Intel 82576 with SR-IOV), x3130-upstream / xio3130-downstream (a PCIe switch) and
# ivshmem-plain (a large 64-bit BAR). The suite is enabled for the QEMU packages only: an
# apt pin gives bookworm-backports' qemu-* packages and seabios (QEMU 10.0 needs
# seabios > 1.16.3, bookworm has 1.16.2) priority 990, everything else of the suite keeps
# its default (100: never installed unless asked), so QEMU's other dependencies come from
# bookworm and no QEMU module of 7.2 stays next to 10.0's. Safe to re-run:
# nothing is written or installed when all is in place already.
#
# usage: lab/install-qemu.sh [--check]    (--check: exit 1 when something is missing)
# Needs root. GPUVIRT_LAB_MIRROR changes the mirror (default http://deb.debian.org/debian).
set -euo pipefail

MIRROR="${GPUVIRT_LAB_MIRROR:-http://deb.debian.org/debian}"
SOURCES=/etc/apt/sources.list.d/gpuvirt-bookworm-backports.list
PIN=/etc/apt/preferences.d/gpuvirt-qemu-backports
PACKAGES=(qemu-system-x86 qemu-utils)
# The devices the lab's command line uses that QEMU 7.2 lacks.
NEEDED_DEVICES=(igb x3130-upstream xio3130-downstream ivshmem-plain)

die() { echo "install-qemu: $*" >&2; exit 2; }
export PATH="/usr/local/sbin:/usr/sbin:/sbin:$PATH"

devices_ok() {
  command -v qemu-system-x86_64 >/dev/null 2>&1 || return 1
  local list dev
  list="$(qemu-system-x86_64 -device help 2>/dev/null)" || return 1
  for dev in "${NEEDED_DEVICES[@]}"; do
    grep -q "name \"$dev\"" <<<"$list" || return 1
  done
}

files_ok() {
  [[ -f $SOURCES && -f $PIN ]] && grep -q "bookworm-backports" "$SOURCES" && grep -q "^Package: qemu-\* seabios$" "$PIN"
}

if [[ ${1:-} == --check ]]; then
  devices_ok && files_ok && { qemu-system-x86_64 --version | head -n 1; exit 0; }
  echo "install-qemu: the lab's QEMU (bookworm-backports, with ${NEEDED_DEVICES[*]}) is not installed" >&2
  exit 1
fi

if devices_ok && files_ok; then
  echo "install-qemu: $(qemu-system-x86_64 --version | head -n 1) with ${NEEDED_DEVICES[*]}: nothing to do"
  exit 0
fi

[[ $(id -u) -eq 0 ]] || die "must run as root (apt); try: sudo $0"
grep -q '^VERSION_CODENAME=bookworm' /etc/os-release || die "this installs bookworm-backports packages: Debian 12 (bookworm) only"

want_sources="deb $MIRROR bookworm-backports main"
if [[ "$(cat "$SOURCES" 2>/dev/null)" != "$want_sources" ]]; then
  printf '%s\n' "$want_sources" >"$SOURCES"
fi
want_pin="# The lab's QEMU only (lab/install-qemu.sh): qemu-* and the seabios it needs from
# bookworm-backports, nothing else.
Package: qemu-* seabios
Pin: release n=bookworm-backports
Pin-Priority: 990"
if [[ "$(cat "$PIN" 2>/dev/null)" != "$want_pin" ]]; then
  printf '%s\n' "$want_pin" >"$PIN"
fi

echo "install-qemu: apt-get update"
apt-get update -qq
echo "install-qemu: installing ${PACKAGES[*]} from bookworm-backports"
# Every installed qemu-* package moves to the suite with them (the pin), so no 7.2 module
# (qemu-block-extra, qemu-system-modules-*) is left behind.
mapfile -t installed < <(dpkg-query -W -f '${Package} ${db:Status-Status}\n' 'qemu-*' 2>/dev/null | awk '$2 == "installed" {print $1}')
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" "${installed[@]}"
devices_ok || die "qemu-system-x86_64 still lacks one of: ${NEEDED_DEVICES[*]}"
echo "install-qemu: $(qemu-system-x86_64 --version | head -n 1)"
