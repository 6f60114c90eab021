package build

import (
	"reflect"
	"testing"
)

func TestOneTarget(t *testing.T) {
	got := Commands([]string{"app"}, false)
	want := [][]string{{"-O2", "-o", "app", "app.c"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Commands = %q, want %q", got, want)
	}
}

func TestTwoTargets(t *testing.T) {
	got := Commands([]string{"app", "tool"}, true)
	want := [][]string{{"-O2", "-v", "-o", "app", "app.c"}, {"-O2", "-v", "-o", "tool", "tool.c"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Commands = %q, want %q", got, want)
	}
}
