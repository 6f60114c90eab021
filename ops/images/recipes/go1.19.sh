# shellcheck shell=bash disable=SC2034
# kiwi/go:1.19: Debian's golang-go (bookworm ships Go 1.19) and gcc for cgo.
NAME=go1.19
REF=kiwi/go:1.19
RUNTIME=go
VERSION=1.19
DESCRIPTION="Debian golang-go 1.19 + gcc (cgo, -race)"
APT_PACKAGES=(golang-go gcc libc6-dev pkg-config)
DOWNLOADS=()
IMAGE_ENV=(GOPATH=/home/kiwi/go
  PATH=/home/kiwi/go/bin:/usr/lib/go-1.19/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
CHECKS=(
  "go|^go version go1\.19|go version"
  "gofmt|^ok$|echo 'package x' | gofmt >/dev/null && echo ok"
  "build|^ok$|mkdir -p /tmp/h && cd /tmp/h && printf 'package main\nfunc main(){println(\"ok\")}\n' >m.go && go run m.go"
  "gcc|^gcc|gcc --version"
)
