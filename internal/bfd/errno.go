package bfd

import "syscall"

// errAddrInUse is what binding a source port another socket holds fails
// with: the next port is tried.
var errAddrInUse = syscall.EADDRINUSE
