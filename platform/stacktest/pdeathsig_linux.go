package stacktest

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes a service end with the test process even when
// the test binary is killed before its clean-ups run.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
