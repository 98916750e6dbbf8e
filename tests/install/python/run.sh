#!/usr/bin/env bash
# Python: a clean virtualenv outside the repository, `pip install --no-index --find-links
# dist/python queuebox-inbox` (the abi3 wheel; no Rust toolchain involved), then the
# README quick start against PostgreSQL.
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
