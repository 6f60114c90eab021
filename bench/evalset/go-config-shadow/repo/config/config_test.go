package config

import "testing"

func TestParse(t *testing.T) {
	cfg, err := Parse("# svc\nname = api\nport = 9000\nverbose = true\n")
	if err != nil || cfg.Name != "api" || cfg.Port != 9000 || !cfg.Verbose {
		t.Fatalf("Parse = %+v, %v", cfg, err)
	}
}

func TestUnknownKey(t *testing.T) {
	if _, err := Parse("colour = blue\n"); err == nil {
		t.Fatal("an unknown key was accepted")
	}
}

func TestBadPortIsAnError(t *testing.T) {
	cfg, err := Parse("port = 80a\n")
	if err == nil {
		t.Fatalf("port 80a was accepted: %+v", cfg)
	}
}
