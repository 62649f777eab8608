package main

import (
	"testing"
)

// A bad configuration stops the binary with exit code 2 before it listens.
func TestBadConfigurationExitsTwo(t *testing.T) {
	t.Setenv("BMCIS_GATEWAY_ADDR", "not-an-address")
	t.Setenv("BMCIS_GATEWAY_CORS_ORIGINS", "*.example.com")
	if code := run(); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
}
