# Sourced by lab/build-image.sh (the lab host's image) and lab/tenant-image.sh (the tenant bench's
# image): the steps both builds share. A build defines die() first, then calls image_need,
# image_work, image_loop, image_chroot_mounts, image_apt_install, image_detach and image_qcow2
# in that order; image_work sets WORK, RAW, LOG, MNT and LOOP and the trap that cleans up.

# image_need HINT TOOL...: root, each tool on PATH (HINT names the packages), loop devices.
image_need() {
  local hint=$1 tool missing=()
  shift
  # debootstrap, sfdisk, losetup, ... live in sbin, which a plain "su" leaves off PATH.
  export PATH="/usr/local/sbin:/usr/sbin:/sbin:$PATH"
  [[ $(id -u) -eq 0 ]] || die "must run as root (debootstrap, loop devices, mount)"
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  ((${#missing[@]} == 0)) || die "missing tools: ${missing[*]} ($hint)"
  [[ -e /dev/loop-control ]] || modprobe loop 2>/dev/null || true
  [[ -e /dev/loop-control ]] || die "no loop device support (/dev/loop-control missing): load the 'loop' kernel module"
}

# image_work OUT: a work directory under OUT (WORK, the raw disk RAW, the root's mount point MNT),
# the build log LOG, and the cleanup at exit.
image_work() {
  mkdir -p "$1"
  WORK="$(mktemp -d "$1/.build.XXXXXX")"
  RAW="$WORK/disk.raw"
  LOG="$1/build.log"
  : >"$LOG"
  MNT="$WORK/root"
  LOOP=""
  trap image_cleanup EXIT
  trap 'exit 130' INT TERM
}

image_cleanup() {
  set +e
  if [[ -d "$MNT" ]]; then
    for m in dev/pts dev proc sys run; do
      mountpoint -q "$MNT/$m" && umount -l "$MNT/$m"
    done
    mountpoint -q "$MNT" && umount "$MNT"
  fi
  if [[ -n "$LOOP" ]]; then
    partx -d "$LOOP" 2>/dev/null
    losetup -d "$LOOP"
  fi
  # Never remove a tree that still has something mounted under it.
  if grep -q " $WORK" /proc/mounts; then
    echo "image build: left $WORK in place: still mounted" >&2
  else
    rm -rf "$WORK"
  fi
}

# image_loop N: RAW on a loop device (LOOP), its partitions known to the kernel; PART is partition N.
image_loop() {
  LOOP="$(losetup --find --show "$RAW")"
  partx -a "$LOOP" 2>/dev/null || partx -u "$LOOP"
  PART="${LOOP}p$1"
  for _ in $(seq 50); do [[ -b "$PART" ]] && break; sleep 0.1; done
  [[ -b "$PART" ]] || die "partition $PART did not appear after partx -a"
}

# image_debootstrap SUITE MIRROR: a minbase system in MNT, the kernel's file systems mounted in it,
# Debian's sources, and no daemon started in the chroot (policy-rc.d, removed by image_detach).
image_debootstrap() {
  local suite=$1 mirror=$2
  debootstrap --variant=minbase --include=ca-certificates "$suite" "$MNT" "$mirror" >>"$LOG" 2>&1 || {
    tail -n 30 "$LOG" >&2
    if [[ -f "$MNT/debootstrap/debootstrap.log" ]]; then tail -n 30 "$MNT/debootstrap/debootstrap.log" >&2; fi
    die "debootstrap failed"
  }
  mount --bind /dev "$MNT/dev"
  mount --bind /dev/pts "$MNT/dev/pts"
  mount -t proc proc "$MNT/proc"
  mount -t sysfs sysfs "$MNT/sys"
  mount -t tmpfs tmpfs "$MNT/run"
  cat >"$MNT/etc/apt/sources.list" <<SRC
deb $mirror $suite main
deb $mirror $suite-updates main
deb http://security.debian.org/debian-security $suite-security main
SRC
  printf '#!/bin/sh\nexit 101\n' >"$MNT/usr/sbin/policy-rc.d"
  chmod 755 "$MNT/usr/sbin/policy-rc.d"
}

# image_apt_install PACKAGE...: into MNT, without recommends, logged.
image_apt_install() {
  chroot "$MNT" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >>"$LOG" 2>&1 || {
    tail -n 30 "$LOG" >&2; die "apt-get update in the image failed"
  }
  chroot "$MNT" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >>"$LOG" 2>&1 || {
    tail -n 40 "$LOG" >&2; die "apt-get install in the image failed"
  }
  chroot "$MNT" apt-get clean
}

# image_detach: MNT unmounted, the loop device gone; RAW holds the disk.
image_detach() {
  rm -f "$MNT/usr/sbin/policy-rc.d"
  for m in dev/pts dev proc sys run; do umount -l "$MNT/$m"; done
  umount "$MNT"
  partx -d "$LOOP" 2>/dev/null || true
  losetup -d "$LOOP"
  LOOP=""
}

# image_qcow2 OUT: RAW converted to OUT/disk.qcow2, under another name until whole.
image_qcow2() {
  qemu-img convert -O qcow2 "$RAW" "$1/disk.qcow2.tmp"
  mv "$1/disk.qcow2.tmp" "$1/disk.qcow2"
}
