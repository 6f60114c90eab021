# shellcheck shell=bash disable=SC2034
# kiwi/base:bookworm: Debian bookworm minbase (debootstrap) and the tools every
# repository command expects. Every other image starts from this one.
NAME=base
REF=kiwi/base:bookworm
RUNTIME=base
VERSION='*'
DESCRIPTION="Debian 12 minbase, git, curl, make, user kiwi"
APT_PACKAGES=(ca-certificates git bash coreutils procps curl tar gzip xz-utils unzip make
  netbase patch less)
DOWNLOADS=()
IMAGE_ENV=()
CHECKS=(
  "debian|^12\.|cat /etc/debian_version"
  "bash|^GNU bash, version 5\.|bash --version"
  "git|^git version 2\.|git --version"
  "curl|^curl 7\.|curl --version | cut -d' ' -f1-2"
  "make|^GNU Make 4\.|make --version"
  "user|^uid=1000\(kiwi\) gid=1000\(kiwi\)|id"
  "workspace|^kiwi:kiwi$|touch /workspace/.w && rm /workspace/.w && stat -c %U:%G /workspace"
)
