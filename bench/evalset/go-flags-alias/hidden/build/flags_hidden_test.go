package build

import "testing"

func TestWithFlagsLeavesBaseAlone(t *testing.T) {
	base := make([]string, 1, 10)
	base[0] = "-g"
	a := WithFlags(base, "-a")
	b := WithFlags(base, "-b")
	if a[1] != "-a" || b[1] != "-b" {
		t.Errorf("a = %q, b = %q: the results share storage", a, b)
	}
}
