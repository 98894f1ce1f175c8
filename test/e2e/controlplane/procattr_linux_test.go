package controlplane

import "syscall"

// dieWithParent has the kernel kill the child when the test binary dies, however it dies (a
// timeout's SIGQUIT, SIGKILL), so that no operator outlives the tests.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
