#!/usr/bin/env bash
# The nested tenants' guest (lab/nested.py): the smallest real Linux that shows VF passthrough from
# inside. Everything comes from the lab image itself (its kernel, the igbvf and rdma_rxe modules with
# their dependencies, libibverbs with the rxe provider, ibv_rc_pingpong, ibv_devices and iproute2's
# rdma with the libraries each needs), plus this machine's static busybox as the shell and
# lab/nested-init.sh as /init.
#
# Booted directly (libvirt's <kernel>/<initrd>/<cmdline>), as an uncompressed ELF vmlinux through
# QEMU's PVH entry and an uncompressed initramfs: under nested TCG every instruction counts, and the
# bzImage's own xz decompression took most of a boot (measured: docs/lab.md). Written to OUT_DIR:
#   vmlinux       the lab kernel, out of its bzImage, stripped
#   initrd.cpio   the initramfs (newc, uncompressed)
#   cmdline       the kernel command line
#   guest.raw     the tenants' image base for the collection's image path (an overlay and a NoCloud
#                 seed per tenant): 8 MiB, one FAT partition holding the same kernel version's name;
#                 the guest never mounts it
#
#   nested-guest.sh OUT_DIR LAB_IMAGE TENANT_TABLE
# TENANT_TABLE: lines "mac name address/prefix role peer-address/prefix" (lab/nested.py writes it).
set -euo pipefail

OUT="${1:?usage: nested-guest.sh OUT_DIR LAB_IMAGE TENANT_TABLE}"
LAB_IMAGE="${2:?lab image (qcow2)}"
TABLE="${3:?tenant table}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The guest's console: the lab's tenant domains log their serial port (ttyS0).
# no_timer_check: the kernel's check of the 8254 timer waits on ticks that nested TCG delivers late.
CMDLINE="console=ttyS0,115200 panic=5 quiet loglevel=4 mitigations=off no_timer_check"

die() { echo "nested guest: $*" >&2; exit 2; }
source "$HERE/image-lib.sh"
image_need "Debian: apt-get install busybox-static mtools fdisk qemu-utils binutils python3, or run scripts/bootstrap.sh" \
  busybox mformat mcopy sfdisk losetup partx qemu-img chroot mount umount strip python3

image_work "$OUT"
STAGE="$WORK/initramfs"
echo "nested guest: reading the lab image $LAB_IMAGE"
qemu-img convert -O raw "$LAB_IMAGE" "$RAW"
image_loop 1
mkdir -p "$MNT"
mount -o ro "$PART" "$MNT"

kver="$(ls "$MNT/lib/modules" | sort -V | tail -n 1)"
[[ -n $kver && -f "$MNT/boot/vmlinuz-$kver" ]] || die "no kernel in the lab image (lib/modules: ${kver:-none})"
mkdir -p "$STAGE"/{bin,sbin,usr/bin,usr/sbin,etc/nested,lib/modules,proc,sys,dev,tmp,run}

# Modules in load order, each after what it needs: the image's own modprobe over its modules.dep.
# crc32_generic: rdma_rxe asks the crypto API for "crc32" when a link is added (its ICRC); the kernel
# would load it on demand, which an initramfs without modprobe's index cannot
chroot "$MNT" modprobe -S "$kver" --show-depends -a igbvf rdma_rxe crc32_generic 2>>"$LOG" | awk '$1 == "insmod" {print $2}' |
  awk '!seen[$0]++' >"$WORK/modules" || die "modprobe --show-depends failed (log: $LOG)"
[[ -s "$WORK/modules" ]] || die "modprobe found neither igbvf nor rdma_rxe in the lab image's kernel $kver"
: >"$STAGE/etc/nested/modules"
while read -r path; do
  rel="${path#/lib/modules/}"; rel="${rel#/usr/lib/modules/}"; path="$MNT$path"
  mkdir -p "$STAGE/lib/modules/$(dirname "$rel")"
  case "$rel" in
    *.ko.xz) xz -dc "$path" >"$STAGE/lib/modules/${rel%.xz}"; rel="${rel%.xz}" ;;
    *.ko.zst) zstd -qdc "$path" >"$STAGE/lib/modules/${rel%.zst}"; rel="${rel%.zst}" ;;
    *) cp "$path" "$STAGE/lib/modules/$rel" ;;
  esac
  echo "$rel" >>"$STAGE/etc/nested/modules"
done <"$WORK/modules"
grep -q igbvf "$STAGE/etc/nested/modules" || die "igbvf is not a module of the lab's kernel $kver"
grep -q rdma_rxe "$STAGE/etc/nested/modules" || die "rdma_rxe is not a module of the lab's kernel $kver"

# Programs and the libraries each needs, as the image's own loader resolves them.
provider="$(cd "$MNT" && compgen -G 'usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so' | head -n 1 || true)"
[[ -n $provider ]] || die "no rxe verbs provider in the lab image (lab/packages.txt: ibverbs-providers)"
files=(usr/bin/ibv_rc_pingpong usr/bin/ibv_devices "$provider" etc/libibverbs.d/rxe.driver)
rdma_tool=""
for candidate in usr/bin/rdma usr/sbin/rdma sbin/rdma bin/rdma; do
  [[ -z $rdma_tool && -f "$MNT/$candidate" && ! -L "$MNT/$candidate" ]] && rdma_tool=$candidate
done
[[ -n $rdma_tool ]] || die "no rdma tool (iproute2) in the lab image"
files+=("$rdma_tool")
for file in "${files[@]}"; do
  [[ -e "$MNT/$file" ]] || die "the lab image has no /$file"
  mkdir -p "$STAGE/$(dirname "$file")"
  cp -L "$MNT/$file" "$STAGE/$file"
  [[ $file == etc/* ]] && continue
  chroot "$MNT" ldd "/$file" 2>>"$LOG" | awk '/=> \// {print $3} /^\t\/[^ ]+ \(/ {print $1}'
done | sort -u | while read -r lib; do
  mkdir -p "$STAGE/$(dirname "$lib")"
  cp -L "$MNT$lib" "$STAGE$lib"
done
[[ -e "$STAGE/lib64/ld-linux-x86-64.so.2" ]] || die "the dynamic loader was not found by ldd in the lab image"
ln -s ../lib/x86_64-linux-gnu "$STAGE/usr/lib64" 2>/dev/null || true

cp "$(command -v busybox)" "$STAGE/bin/busybox"
ln -s busybox "$STAGE/bin/sh"
install -m 755 "$HERE/nested-init.sh" "$STAGE/init"
install -m 644 "$TABLE" "$STAGE/etc/nested/tenants"
(cd "$STAGE" && find . | busybox cpio -o -H newc 2>/dev/null) >"$WORK/initrd.cpio"
# The ELF inside the bzImage: its xz stream, from its magic on (Linux's scripts/extract-vmlinux does the same).
python3 - "$MNT/boot/vmlinuz-$kver" "$WORK/vmlinux" <<'PY' || die "no xz-compressed vmlinux in the lab kernel's bzImage"
import lzma
import sys
data = open(sys.argv[1], "rb").read()
start = data.find(b"\xfd7zXZ\x00")
if start < 0:
    sys.exit(1)
elf = lzma.LZMADecompressor().decompress(data[start:])
if not elf.startswith(b"\x7fELF"):
    sys.exit(1)
open(sys.argv[2], "wb").write(elf)
PY
strip -o "$WORK/vmlinux.stripped" "$WORK/vmlinux"
umount "$MNT"

echo "nested guest: kernel $kver ($(du -k "$WORK/vmlinux.stripped" | cut -f1) KiB), initramfs $(du -k "$WORK/initrd.cpio" | cut -f1) KiB"
disk="$WORK/guest.raw"
truncate -s 8M "$disk"
echo 'label: dos
start=2048, type=6' | sfdisk -q "$disk"
offset=$((2048 * 512))
mformat -i "$disk@@$offset" -T $(((8 * 1024 * 1024 - offset) / 512)) -h 64 -s 32 -v NESTED ::
echo "$kver" >"$WORK/kernel"
mcopy -i "$disk@@$offset" "$WORK/kernel" ::/kernel.txt
echo "$CMDLINE" >"$OUT/cmdline"
mv "$WORK/kernel" "$OUT/kernel"
mv "$WORK/vmlinux.stripped" "$OUT/vmlinux"
mv "$WORK/initrd.cpio" "$OUT/initrd.cpio"
mv "$disk" "$OUT/guest.raw"
echo "nested guest: $OUT/{vmlinux,initrd.cpio,cmdline,guest.raw}"
