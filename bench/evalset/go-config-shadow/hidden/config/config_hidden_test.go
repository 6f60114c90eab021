package config

import (
	"strings"
	"testing"
)

func TestBadPortNamesTheValue(t *testing.T) {
	_, err := Parse("name = x\nport = http\n")
	if err == nil || !strings.Contains(err.Error(), "http") {
		t.Fatalf("err = %v", err)
	}
	if cfg, err := Parse("port = 1234"); err != nil || cfg.Port != 1234 {
		t.Fatalf("Parse = %+v, %v", cfg, err)
	}
}
