#!/usr/bin/env bash
# Installs what the collection's jobs and tests need on a Debian 12 machine:
# Debian packages (as root), a virtualenv in .venv with requirements.txt, and the
# collection linked into .build/collections/ansible_collections/gpuvirt/tenancy.
# Safe to run again: each step is skipped when already done.
#   scripts/bootstrap.sh                 what every stage but `oldest` and `newest` needs
#   scripts/bootstrap.sh oldest          that, and the virtualenvs of the oldest ansible-core
#   scripts/bootstrap.sh newest          that, and the virtualenvs of the newest ansible-core
#   scripts/bootstrap.sh oldest newest   both
#   scripts/bootstrap.sh galaxy          that, and the virtualenv of Galaxy's importer
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${GPUVIRT_VENV:-$REPO_ROOT/.venv}"
BUILD="$REPO_ROOT/.build"

APT_PACKAGES=(
  python3 python3-venv python3-dev gcc pkg-config libvirt-dev
  qemu-system-x86 qemu-utils debootstrap e2fsprogs fdisk dosfstools
  openssh-client rsync libxml2-utils libvirt-clients git systemd genisoimage
  # the tenant bench (lab/tenant_bench.py): libvirt's daemon with QEMU, UEFI for the tenants, the
  # networks' dnsmasq, and the tenant image's EFI system partition and GRUB (lab/tenant-image.sh)
  libvirt-daemon-system libvirt-daemon-driver-qemu ovmf python3-libvirt dnsmasq-base
  mtools grub-efi-amd64-bin iproute2
  # the nested stage's guest (lab/nested-guest.sh): busybox as its shell, the kernel's ELF taken
  # out of its bzImage and stripped
  busybox-static binutils
  # the guest image tests' raw bases made by the real tools (XFS, btrfs, squashfs, LUKS)
  xfsprogs btrfs-progs squashfs-tools cryptsetup-bin
  # the GRUB quoting tests: grub-script-check, /etc/grub.d/10_linux and grub-mkconfig_lib
  grub-common
)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "bootstrap: missing Debian packages: ${missing[*]}" >&2
    echo "bootstrap: run as root, or install them: apt-get install ${missing[*]}" >&2
    exit 2
  fi
  echo "bootstrap: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The lab's QEMU 10.0 from bookworm-backports (igb, a PCIe switch, ivshmem: docs/lab.md), the
# suite pinned to the QEMU packages only; nothing is done when it is in place already.
if [[ $(id -u) -eq 0 ]]; then
  bash "$REPO_ROOT/lab/install-qemu.sh"
elif ! bash "$REPO_ROOT/lab/install-qemu.sh" --check >/dev/null 2>&1; then
  echo "bootstrap: the lab needs QEMU 10.0 from bookworm-backports: run lab/install-qemu.sh as root" >&2
fi

# udevadm verify (systemd 254 or later), with which the unit tests check the udev rules the
# collection writes: Debian 12's udev 252 has no verify. bookworm-backports' udev is downloaded,
# not installed, and extracted into .build/udev-verify; its udevadm needs only libraries Debian 12
# has (readelf -d: no libsystemd-shared, no RUNPATH), so the machine's systemd stays as it is.
UDEV_VERIFY="$BUILD/udev-verify"
if ! "$UDEV_VERIFY/bin/udevadm" verify --help >/dev/null 2>&1; then
  echo "bootstrap: extracting udevadm $UDEV_VERIFY/bin/udevadm from bookworm-backports' udev"
  udev_tmp="$(mktemp -d)"
  if ! (cd "$udev_tmp" && apt-get download -qq -o APT::Sandbox::User="$(id -un)" udev/bookworm-backports); then
    rm -rf "$udev_tmp"
    echo "bootstrap: cannot download udev from bookworm-backports: enable the suite (lab/install-qemu.sh does, as root)" >&2
    exit 2
  fi
  rm -rf "$UDEV_VERIFY"
  dpkg-deb -x "$udev_tmp"/udev_*.deb "$udev_tmp/root"
  mkdir -p "$BUILD"
  mv "$udev_tmp/root" "$UDEV_VERIFY"
  rm -rf "$udev_tmp"
  "$UDEV_VERIFY/bin/udevadm" verify --help >/dev/null
fi

# user_wheels VENV REQUIREMENTS: the wheels of what a user installs (ansible-core and libvirt-python
# at REQUIREMENTS' pins, and what they need) in VENV/wheelhouse, built by VENV's pip. The
# installed-collection tests make a fresh virtualenv from them at every run, outside the checkout
# and without the network (tests/unit/built_collection.py).
user_wheels() {
  local dir=$1 requirements=$2 want
  want="$(sha256sum "$requirements" | cut -d' ' -f1)"
  if [[ "$(cat "$dir/wheelhouse/.stamp" 2>/dev/null)" != "$want" ]]; then
    rm -rf "$dir/wheelhouse"
    "$dir/bin/pip" wheel -q -w "$dir/wheelhouse" "$(grep '^ansible-core==' "$requirements")" "$(grep '^libvirt-python==' "$requirements")"
    echo "$want" >"$dir/wheelhouse/.stamp"
  fi
}

stamp="$VENV/.requirements.sha256"
want="$(sha256sum "$REPO_ROOT/requirements.txt" | cut -d' ' -f1)"
if [[ ! -x "$VENV/bin/python" || ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "bootstrap: creating virtualenv $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q -r "$REPO_ROOT/requirements.txt"
  echo "$want" >"$stamp"
fi
user_wheels "$VENV" "$REPO_ROOT/requirements.txt"

# ansible-test sanity runs with --local in its own virtualenv holding ansible-test's
# pinned tool versions (its --venv mode downloads a pip bootstrap from a host that
# these machines cannot reach).
#   sanity_venv DIR CORE_VENV REQUIREMENTS PYTHON: DIR, made with PYTHON, gets the ansible-core that
#   REQUIREMENTS pins and the sanity tools that CORE_VENV's ansible-test pins; the pip bootstrap
#   stand-in goes where that ansible-test looks for it.
sanity_venv() {
  local dir=$1 core_venv=$2 requirements=$3 python=$4
  local reqs want
  reqs="$("$core_venv/bin/python" -c 'import ansible_test, os; print(os.path.dirname(ansible_test.__file__))')/_data/requirements"
  want="$(cat "$requirements" "$reqs"/sanity.*.txt | sha256sum | cut -d' ' -f1)"
  if [[ ! -x "$dir/bin/python" || "$(cat "$dir/.stamp" 2>/dev/null)" != "$want" ]]; then
    echo "bootstrap: creating sanity virtualenv $dir"
    rm -rf "$dir"
    "$python" -m venv "$dir"
    "$dir/bin/pip" install -q --upgrade pip
    "$dir/bin/pip" install -q "$(grep '^ansible-core==' "$requirements")" \
      $(for f in "$reqs"/sanity.*.txt; do printf -- '-r %s ' "$f"; done)
    echo "$want" >"$dir/.stamp"
  fi
  local pip_version get_pip
  pip_version="$(grep -oP "pip='\K[0-9.]+" "$("$dir/bin/python" -c 'import ansible_test, os; print(os.path.dirname(ansible_test.__file__))')/_internal/python_requirements.py" | head -1)"
  get_pip="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
  if [[ -n "$pip_version" ]] && ! cmp -s "$REPO_ROOT/scripts/get_pip_offline.py" "$get_pip"; then
    mkdir -p "$(dirname "$get_pip")"
    cp "$REPO_ROOT/scripts/get_pip_offline.py" "$get_pip"
  fi
}
sanity_venv "${GPUVIRT_SANITY_VENV:-$REPO_ROOT/.build/sanity-venv}" "$VENV" "$REPO_ROOT/requirements.txt" python3

# core_venvs NAME DIR SANITY_DIR REQUIREMENTS PYTHON: the virtualenv of one more ansible-core line
# (REQUIREMENTS, on PYTHON) for the unit tests, and its sanity virtualenv with that ansible-core's
# own sanity tool pins. Both from PyPI.
core_venvs() {
  local name=$1 dir=$2 sanity_dir=$3 requirements=$4 python=$5 want
  want="$(sha256sum "$requirements" | cut -d' ' -f1)"
  if [[ ! -x "$dir/bin/python" || "$(cat "$dir/.stamp" 2>/dev/null)" != "$want" ]]; then
    echo "bootstrap: creating virtualenv $dir ($name ansible-core, $("$python" --version))"
    rm -rf "$dir"
    "$python" -m venv "$dir"
    "$dir/bin/pip" install -q --upgrade pip
    "$dir/bin/pip" install -q -r "$requirements"
    echo "$want" >"$dir/.stamp"
  fi
  user_wheels "$dir" "$requirements"
  sanity_venv "$sanity_dir" "$dir" "$requirements" "$python"
}

# ---- The oldest ansible-core the collection claims (scripts/test.sh oldest), only when asked.
if [[ " $* " == *" oldest "* ]]; then
  core_venvs oldest "${GPUVIRT_OLDEST_VENV:-$REPO_ROOT/.build/oldest-venv}" \
    "${GPUVIRT_OLDEST_SANITY_VENV:-$REPO_ROOT/.build/oldest-sanity-venv}" "$REPO_ROOT/requirements-oldest.txt" python3
fi

# ---- The newest ansible-core the collection claims (scripts/test.sh newest), only when asked. That
# line needs Python 3.12 or later on the controller, which Debian 12 does not have: pyenv's newest
# 3.12 (~/.pyenv/versions/3.12.*), or GPUVIRT_NEWEST_PYTHON.
newest_python() {
  if [[ -n "${GPUVIRT_NEWEST_PYTHON:-}" ]]; then echo "$GPUVIRT_NEWEST_PYTHON"; return; fi
  local found
  found="$(ls -d "$HOME"/.pyenv/versions/3.12.* 2>/dev/null | sort -V | tail -1)"
  [[ -n "$found" ]] && echo "$found/bin/python3"
}
if [[ " $* " == *" newest "* ]]; then
  python_newest="$(newest_python)"
  if [[ -z "$python_newest" || ! -x "$python_newest" ]]; then
    echo "bootstrap: the newest ansible-core needs Python 3.12: install it with pyenv (pyenv install 3.12)" >&2
    echo "bootstrap: or give its path in GPUVIRT_NEWEST_PYTHON" >&2
    exit 2
  fi
  core_venvs newest "${GPUVIRT_NEWEST_VENV:-$REPO_ROOT/.build/newest-venv}" \
    "${GPUVIRT_NEWEST_SANITY_VENV:-$REPO_ROOT/.build/newest-sanity-venv}" "$REPO_ROOT/requirements-newest.txt" "$python_newest"
fi

# ---- Galaxy's importer (scripts/test.sh galaxy), only when asked: galaxy-importer from PyPI in its
# own virtualenv, as its pins (ansible-lint, attrs, flake8) are not the test virtualenv's.
if [[ " $* " == *" galaxy "* ]]; then
  GALAXY_VENV="${GPUVIRT_GALAXY_VENV:-$REPO_ROOT/.build/galaxy-venv}"
  galaxy_want="$(sha256sum "$REPO_ROOT/requirements-galaxy.txt" | cut -d' ' -f1)"
  if [[ ! -x "$GALAXY_VENV/bin/python" || "$(cat "$GALAXY_VENV/.stamp" 2>/dev/null)" != "$galaxy_want" ]]; then
    echo "bootstrap: creating virtualenv $GALAXY_VENV (galaxy-importer)"
    rm -rf "$GALAXY_VENV"
    python3 -m venv "$GALAXY_VENV"
    "$GALAXY_VENV/bin/pip" install -q --upgrade pip
    "$GALAXY_VENV/bin/pip" install -q -r "$REPO_ROOT/requirements-galaxy.txt"
    echo "$galaxy_want" >"$GALAXY_VENV/.stamp"
  fi
fi

# Ansible finds the collection through this path (a link, so edits take effect).
mkdir -p "$BUILD/collections/ansible_collections/gpuvirt"
ln -sfn "$REPO_ROOT" "$BUILD/collections/ansible_collections/gpuvirt/tenancy"

# ---- Fleet use: the awx.awx collection, for the syntax check and lint of awx/job_templates.yml.
# No Galaxy server is reachable: it comes from the `ansible` package on PyPI, which carries it.
# Only the wheel is downloaded (no dependencies, about 54 MB, a few seconds) and only
# ansible_collections/awx/awx (about 1.3 MB) is extracted into .build/collections.
AWX_FROM_ANSIBLE=12.3.0
awx_dir="$BUILD/collections/ansible_collections/awx/awx"
if [[ "$(cat "$awx_dir/.from-ansible" 2>/dev/null)" != "$AWX_FROM_ANSIBLE" ]]; then
  echo "bootstrap: extracting awx.awx from ansible==$AWX_FROM_ANSIBLE"
  awx_tmp="$(mktemp -d)"
  "$VENV/bin/pip" download -q --no-deps "ansible==$AWX_FROM_ANSIBLE" -d "$awx_tmp"
  rm -rf "$awx_dir"
  "$VENV/bin/python" - "$awx_tmp"/ansible-"$AWX_FROM_ANSIBLE"-*.whl "$BUILD/collections" <<'PY'
import sys
import zipfile

wheel, target = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as archive:
    members = [name for name in archive.namelist() if name.startswith("ansible_collections/awx/awx/")]
    if not members:
        sys.exit("bootstrap: %s holds no ansible_collections/awx/awx" % wheel)
    archive.extractall(target, members=members)
PY
  rm -rf "$awx_tmp"
  echo "$AWX_FROM_ANSIBLE" >"$awx_dir/.from-ansible"
fi
