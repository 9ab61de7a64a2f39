package server

import "syscall"

type syscallStatfs struct{ syscall.Statfs_t }

func statfs(path string, st *syscallStatfs) error { return syscall.Statfs(path, &st.Statfs_t) }

// free is the bytes an unprivileged writer may still use.
func (st *syscallStatfs) free() int { return int(st.Bavail) * int(st.Bsize) }
