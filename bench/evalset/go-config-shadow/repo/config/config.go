// Package config reads the service's `key = value` configuration.
package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Config of the service.
type Config struct {
	Name    string
	Port    int
	Verbose bool
}

// Default is the configuration before any file.
func Default() Config { return Config{Name: "svc", Port: 8000} }

// Parse reads `key = value` lines over Default; # starts a comment.
func Parse(text string) (Config, error) {
	cfg := Default()
	var err error
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return cfg, fmt.Errorf("line %d: no '='", n+1)
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		switch key {
		case "name":
			cfg.Name = value
		case "port":
			port, err := strconv.Atoi(value)
			if err == nil {
				cfg.Port = port
			}
		case "verbose":
			cfg.Verbose, err = strconv.ParseBool(value)
		default:
			err = fmt.Errorf("line %d: unknown key %q", n+1, key)
		}
		if err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}
