# shellcheck shell=bash disable=SC2034
# kiwi/rust:1.96: Debian 12's rustc-web and cargo-web (1.96, from
# bookworm-security: the toolchain Debian keeps current for Firefox and
# Chromium), with a cargo that reaches crates.io through the sparse index
# (stable since 1.68, the default since 1.70). They conflict with rustc and
# cargo, hence an image of their own.
NAME=rust1.96
REF=kiwi/rust:1.96
RUNTIME=rust
VERSION=1.96
DESCRIPTION="Debian rustc-web 1.96 + cargo-web (sparse index)"
APT_PACKAGES=(rustc-web cargo-web gcc libc6-dev pkg-config)
DOWNLOADS=()
IMAGE_ENV=(CARGO_HOME=/home/kiwi/.cargo
  PATH=/home/kiwi/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
CHECKS=(
  "rustc|^rustc 1\.96\.|rustc --version"
  "cargo|^cargo 1\.96\.|cargo --version"
  "build|^Hello, world!$|cd /tmp && cargo new -q --offline hello && cd hello && cargo run -q --offline"
)
