# shellcheck shell=bash disable=SC2034
# kiwi/python:3.13: Debian 13's python3 (3.13), pip, venv, pytest and the
# headers and compiler for sdists; uv, poetry and pipenv from PyPI, each in
# its own virtual environment under /opt/kiwi. Bookworm has no 3.13, so this
# image starts from the trixie base stage (all of it from Debian's archive,
# with apt's signature checks, like every other image). Trixie's python3-pip no
# longer pulls in setuptools and wheel (bookworm's does): they are named, so a
# "pip install --no-build-isolation" works as it does in the 3.11 image.
NAME=python3.13
REF=kiwi/python:3.13
RUNTIME=python
VERSION=3.13
BASE=base-trixie
DESCRIPTION="Debian 13 python3 3.13 + pip, venv, pytest; uv, poetry, pipenv from PyPI"
APT_PACKAGES=(python3 python3-pip python3-setuptools python3-wheel python3-venv python3-pytest python3-dev python-is-python3
  build-essential)
DOWNLOADS=()
IMAGE_ENV=(PATH=/home/kiwi/.local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
CHECKS=(
  "python3|^Python 3\.13\.|python3 -V"
  "python|^Python 3\.13\.|python -V"
  "pip|^pip 2|pip --version"
  "venv|^/tmp/v$|python3 -m venv /tmp/v && /tmp/v/bin/python -c 'import sys; print(sys.prefix)'"
  "pip-install|^ok$|mkdir -p /tmp/p/m && cd /tmp/p && printf 'from setuptools import setup\nsetup(name=\"m\", version=\"1\", packages=[\"m\"])\n' >setup.py && touch m/__init__.py && pip install -q --no-index --no-build-isolation . >log 2>&1 && cd / && python3 -c 'import m; print(\"ok\")'"
  "new-in-3.13|^ok$|python3 -c 'import copy, warnings; print(\"ok\" if hasattr(copy, \"replace\") and hasattr(warnings, \"deprecated\") else \"no\")'"
  "pytest|^pytest 8\.|pytest --version"
  "uv|^uv 0\.13\.9|uv --version"
  "poetry|^Poetry \(version 2\.5\.1\)|poetry --version"
  "pipenv|^pipenv, version 2026\.10\.3|pipenv --version"
)
recipe_install() {
  pip_tool_install uv uv==0.13.9
  pip_tool_install poetry poetry==2.5.1
  pip_tool_install pipenv pipenv==2026.10.3
  # See python3.11.sh: pip as kiwi installs to ~/.local, as in the official
  # image.
  in_root -- bash -c 'rm -f /usr/lib/python3.13/EXTERNALLY-MANAGED'
}
