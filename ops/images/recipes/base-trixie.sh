# shellcheck shell=bash disable=SC2034
# base-trixie: the Debian 13 (trixie) base stage, for the images that need a
# runtime only trixie ships (Python 3.13, OpenJDK 21). The same packages and
# user as base.sh on trixie's minbase. A build stage only: no image is
# imported from it (the images that set BASE=base-trixie start from it).
NAME=base-trixie
REF=kiwi/base:trixie
RUNTIME=base
VERSION='*'
SUITE=trixie
DESCRIPTION="Debian 13 minbase, git, curl, make, user kiwi (build stage)"
APT_PACKAGES=(ca-certificates git bash coreutils procps curl tar gzip xz-utils unzip make
  netbase patch less)
DOWNLOADS=()
IMAGE_ENV=()
CHECKS=(
  "debian|^13\.|cat /etc/debian_version"
  "bash|^GNU bash, version 5\.|bash --version"
  "git|^git version 2\.|git --version"
  "curl|^curl 8\.|curl --version | cut -d' ' -f1-2"
  "make|^GNU Make 4\.|make --version"
  "user|^uid=1000\(kiwi\) gid=1000\(kiwi\)|id"
  "workspace|^kiwi:kiwi$|touch /workspace/.w && rm /workspace/.w && stat -c %U:%G /workspace"
)
