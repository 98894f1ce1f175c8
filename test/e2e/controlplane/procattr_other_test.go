//go:build !linux

package controlplane

import "syscall"

// dieWithParent: only Linux has a parent-death signal; elsewhere stop() is all there is.
func dieWithParent() *syscall.SysProcAttr { return nil }
