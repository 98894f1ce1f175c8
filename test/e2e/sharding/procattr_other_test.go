//go:build !linux

package sharding

import "syscall"

// dieWithParent: only Linux has a parent-death signal; elsewhere stop() is all there is.
func dieWithParent() *syscall.SysProcAttr { return nil }
