# shellcheck shell=bash disable=SC2034
# kiwi/go:1.27: the official Go 1.27 toolchain, as the Go module proxy serves
# it (module golang.org/toolchain, the zip the go command itself fetches for
# GOTOOLCHAIN=go1.27.3), at /usr/local/go, plus gcc for cgo. Debian ships no
# Go newer than 1.19 for bookworm.
#
# The pin: the go command (1.26) downloaded
# golang.org/toolchain@v0.0.1-go1.27.3.linux-amd64 and verified it against
# the checksum database: h1:r0ub+FnqzZxoWm/dSUOI9DcIqYWn/mNYGFJcv7PyBzs=
# (go.mod h1:8wlg68NqwW7eMnI1aABk/C2pDYXj8mrMY4TyRfiLeS0=); the sha512 below
# is that verified zip's.
#
# GOTOOLCHAIN=local, as in the official golang images: a go.mod asking for a
# newer Go is reported ("go.mod requires go >= ..."), never downloaded in a
# sandbox.
#
# The standard library comes compiled: since Go 1.20 the toolchain ships no
# package archives, and every `go test` in a fresh sandbox compiled the
# packages it imports from source (25 s for fmt, net/http and testing on an
# idle core; a minute and more beside other work). `go build std` fills
# /usr/local/go-cache at build time, with the environment a sandbox has
# (CGO_ENABLED by default, gcc present). It is root's and read-only, and no
# GOCACHE names it: a go command cannot work in a cache it cannot write
# (go vet, -cover and -race fail), so Kiwi's Phase B starts the sandbox's
# own cache as links to it (inspect/runtime.c, the Go row's verify_start).
NAME=go1.27
REF=kiwi/go:1.27
RUNTIME=go
VERSION=1.27
DESCRIPTION="Go 1.27.3 (official toolchain from the Go module proxy) + gcc (cgo, -race)"
APT_PACKAGES=(gcc libc6-dev pkg-config)
DOWNLOADS=(
  "go-toolchain-1.27.3.linux-amd64.zip 33045ec1ec3b44abe4b1fc6a5148115a24ed16f27bc0d18e3cf303eedc301810da809882501213dc5459a3dad368ca72fb9ae95d5040b9684869b0c7622cfec2 https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go1.27.3.linux-amd64.zip"
)
IMAGE_ENV=(GOPATH=/home/kiwi/go GOTOOLCHAIN=local
  PATH=/home/kiwi/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
CHECKS=(
  "go|^go version go1\.27\.3 linux/amd64$|go version"
  "gofmt|^ok$|echo 'package x' | gofmt >/dev/null && echo ok"
  "build|^ok$|mkdir -p /tmp/h && cd /tmp/h && printf 'module h\n\ngo 1.27\n' >go.mod && printf 'package main\nfunc main(){ for i := range 1 { _ = i }; println(\"ok\") }\n' >m.go && go run ."
  "cgo|^ok$|mkdir -p /tmp/c && cd /tmp/c && printf 'package main\n// int two(void) { return 2; }\nimport \"C\"\nfunc main(){ if C.two() == 2 { println(\"ok\") } }\n' >c.go && go run c.go"
  "std-compiled|^false$|GOCACHE=/usr/local/go-cache GOFLAGS=-mod=mod go list -f '{{.Stale}}' fmt net/http testing os/user | sort -u | tr -d '\\n'"
  "linked-cache|^ok$|mkdir -p /tmp/gl /tmp/v && cp -rs /usr/local/go-cache/. /tmp/gl/ && cd /tmp/v && printf 'module v\n\ngo 1.27\n' >go.mod && printf 'package v\nimport \"fmt\"\nfunc F() string { return fmt.Sprint(1) }\n' >v.go && GOCACHE=/tmp/gl go vet . && GOCACHE=/tmp/gl go list -f '{{.Stale}}' fmt | grep -qx false && echo ok"
  "cache-read-only|^read-only$|touch /usr/local/go-cache/x 2>/dev/null && echo writable || echo read-only"
  "toolchain-local|GOTOOLCHAIN=local|mkdir -p /tmp/t && cd /tmp/t && printf 'module t\n\ngo 1.99.1\n' >go.mod && ! go list 2>&1"
  "gcc|^gcc|gcc --version"
)
recipe_install() {
  in_root -- bash -euo pipefail -c '
    t=$(mktemp -d)
    unzip -q "/run/kiwi-downloads/$1" -d "$t"
    rm -rf /usr/local/go
    mv "$t/golang.org/toolchain@v0.0.1-go1.27.3.linux-amd64" /usr/local/go
    rm -rf "$t"
    /usr/local/go/bin/go version
    rm -rf /usr/local/go-cache
    GOCACHE=/usr/local/go-cache GOTOOLCHAIN=local GOFLAGS= /usr/local/go/bin/go build std
    chmod -R go-w /usr/local/go-cache
    echo "std compiled: $(du -sh /usr/local/go-cache | cut -f1) in /usr/local/go-cache"' go-install go-toolchain-1.27.3.linux-amd64.zip
}
