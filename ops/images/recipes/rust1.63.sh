# shellcheck shell=bash disable=SC2034
# kiwi/rust:1.63: Debian's rustc (bookworm ships 1.63) and cargo.
NAME=rust1.63
REF=kiwi/rust:1.63
RUNTIME=rust
VERSION=1.63
DESCRIPTION="Debian rustc 1.63 + cargo"
APT_PACKAGES=(rustc cargo gcc libc6-dev pkg-config)
DOWNLOADS=()
IMAGE_ENV=(CARGO_HOME=/home/kiwi/.cargo
  PATH=/home/kiwi/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
CHECKS=(
  "rustc|^rustc 1\.63\.|rustc --version"
  "cargo|^cargo 1\.|cargo --version"
  "build|^Hello, world!$|cd /tmp && cargo new -q --offline hello && cd hello && cargo run -q --offline"
)
