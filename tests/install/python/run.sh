#!/usr/bin/env bash
# Python: a clean virtualenv outside the repository, `pip install --no-index --find-links
# dist/python queuebox-inbox` (the abi3 wheel; no Rust toolchain involved), then the
# README quick start against PostgreSQL. When dist/python holds the aarch64 wheel
# (QB_PACKAGE_TARGETS naming aarch64-unknown-linux-gnu), the same with Debian's arm64
# CPython under qemu-user: its pip picks the wheel by its tags from the same folder.
set -euo pipefail
source tests/install/lib.sh
unset PIP_FIND_LINKS # only dist/python: nothing else may satisfy the install
install_dir=$(install_workdir python)
trap install_cleanup EXIT
python3 -m venv "$install_dir/venv"
cp tests/install/python/quickstart.py "$install_dir/"
cd "$install_dir"
venv/bin/pip install -q --disable-pip-version-check --no-index --find-links "$dist/python" --only-binary :all: queuebox-inbox
venv/bin/pip show queuebox-inbox | sed -n 's/^\(Name\|Version\|Location\): /  /p'
install_db python
venv/bin/python quickstart.py migrate "$install_db_url"
install_seed "$install_db_url"
venv/bin/python quickstart.py work "$install_db_url"
install_verify "$install_db_url" python
ffi_drop_db "$install_db_name"; install_db_name=

# arm64_python: a Debian bookworm arm64 tree holding python3 and pip (mmdebstrap, unpacked
# only: 93 MB, about 30 s the first time; kept in $QB_ARM64_PYTHON_ROOT for later runs),
# printed as the command that runs its python3 under qemu-user. Returns 1 when it cannot be
# had (then say "not run").
arm64_python() {
  local root=${QB_ARM64_PYTHON_ROOT:-/tmp/queuebox-arm64-python}
  ffi_need_apt qemu-aarch64 qemu-user >&2 || return 1
  if [ ! -x "$root/usr/bin/python3" ]; then
    ffi_need_apt mmdebstrap mmdebstrap >&2 || return 1
    rm -rf "$root.tmp"
    mmdebstrap --quiet --arch=arm64 --variant=extract --include=python3,python3-pip bookworm "$root.tmp" \
      http://deb.debian.org/debian >&2 || return 1
    mv "$root.tmp" "$root"
  fi
  echo "qemu-aarch64 -L $root $root/usr/bin/python3"
}

whl=$(ls "$dist"/python/queuebox_inbox-*-manylinux*aarch64.whl 2>/dev/null || true)
[ -n "$whl" ] || exit 0
if ! py=$(arm64_python); then
  echo "install-python (aarch64): $(basename "$whl") packaged; not run (no qemu-user or arm64 Python tree here)"
  exit 0
fi
# pip --target: a venv of the tree's python would link back to its /usr/bin/python3, which
# only qemu's -L prefix resolves; the directory on PYTHONPATH is what a venv's site is.
$py -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-index --find-links "$dist/python" --only-binary :all: \
  --target "$install_dir/arm64-site" queuebox-inbox
got=$(ls "$install_dir"/arm64-site/queuebox_inbox/_native*.so)
readelf -h "$got" | grep -q 'Machine: *AArch64' || { echo "install-python (aarch64): pip installed $got, not the aarch64 wheel" >&2; exit 1; }
echo "  aarch64: $(basename "$(ls -d "$install_dir"/arm64-site/queuebox_inbox-*.dist-info)") ($($py -c 'import platform, sys; print(platform.machine(), sys.version.split()[0])'))"
install_db python_arm64
PYTHONPATH="$install_dir/arm64-site" $py quickstart.py migrate "$install_db_url"
install_seed "$install_db_url"
PYTHONPATH="$install_dir/arm64-site" $py quickstart.py work "$install_db_url"
install_verify "$install_db_url" "python (aarch64 under qemu-user)"
