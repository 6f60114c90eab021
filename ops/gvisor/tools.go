//go:build tools

// Package gvisor pins the gVisor module whose runsc ops/setup.sh builds.
package gvisor

import _ "gvisor.dev/gvisor/runsc"
