// Package build makes compiler command lines.
package build

// WithFlags is base followed by extra, for one command line.
func WithFlags(base []string, extra ...string) []string {
	return append(base, extra...)
}
