package loopext4format

// This file holds every system call of glove-loopext4-format but
// close(2) (the ones os/exec makes to start and wait for the formatting
// child aside). It holds no capability.

import "golang.org/x/sys/unix"

// closeAbove closes every descriptor above fd (close_range).
func closeAbove(fd int) error { return unix.CloseRange(uint(fd)+1, ^uint(0), 0) }

func noNewPrivs() (int, error) { return unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) }

// execEmptyEnv executes exe with argv and an empty environment.
func execEmptyEnv(exe string, argv []string) error { return unix.Exec(exe, argv, []string{}) }
