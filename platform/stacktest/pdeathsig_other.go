//go:build !linux

package stacktest

import "os/exec"

func setParentDeathSignal(*exec.Cmd) {}
