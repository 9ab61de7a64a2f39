package pgwire

import "syscall"

// syscallEMFILE is retried by Serve: running out of descriptors is
// temporary, like net/http treats it.
var syscallEMFILE = syscall.EMFILE
