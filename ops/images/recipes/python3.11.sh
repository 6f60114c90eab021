# shellcheck shell=bash disable=SC2034
# kiwi/python:3.11: Debian's python3 (3.11), pip, venv, pytest and the headers
# and compiler for sdists; uv, poetry and pipenv from PyPI, each in its own
# virtual environment under /opt/kiwi.
NAME=python3.11
REF=kiwi/python:3.11
RUNTIME=python
VERSION=3.11
DESCRIPTION="Debian python3 3.11 + pip, venv, pytest; uv, poetry, pipenv from PyPI"
APT_PACKAGES=(python3 python3-pip python3-venv python3-pytest python3-dev python-is-python3
  build-essential)
DOWNLOADS=()
# pip as kiwi installs to ~/.local (no root, no sudo here), like a user of the
# official image would expect to be able to "pip install" at all: see
# recipe_install for the EXTERNALLY-MANAGED marker.
IMAGE_ENV=(PATH=/home/kiwi/.local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
CHECKS=(
  "python3|^Python 3\.11\.|python3 -V"
  "python|^Python 3\.11\.|python -V"
  "pip|^pip 2|pip --version"
  "venv|^/tmp/v$|python3 -m venv /tmp/v && /tmp/v/bin/python -c 'import sys; print(sys.prefix)'"
  "pip-install|^ok$|mkdir -p /tmp/p/m && cd /tmp/p && printf 'from setuptools import setup\nsetup(name=\"m\", version=\"1\", packages=[\"m\"])\n' >setup.py && touch m/__init__.py && pip install -q --no-index --no-build-isolation . >log 2>&1 && cd / && python3 -c 'import m; print(\"ok\")'"
  "pytest|^pytest 7\.|pytest --version"
  "uv|^uv 0\.13\.9|uv --version"
  "poetry|^Poetry \(version 2\.5\.1\)|poetry --version"
  "pipenv|^pipenv, version 2026\.10\.3|pipenv --version"
)
recipe_install() {
  pip_tool_install uv uv==0.13.9
  pip_tool_install poetry poetry==2.5.1
  pip_tool_install pipenv pipenv==2026.10.3
  # Debian marks its python3 externally managed (PEP 668); a sandbox is a
  # throwaway container, and repositories' "pip install -r ..." must work as
  # it does in the official python image.
  in_root -- bash -c 'rm -f /usr/lib/python3.11/EXTERNALLY-MANAGED'
}
