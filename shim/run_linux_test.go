package shim

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestStartNextKillsOnIncompletePlan: when the plan cannot be completed
// while the next stage starts (stage 0's seccomp export failing), the
// child is killed and reaped before it reads a plan, and the error is
// the completion's. The child here would sleep for 33 s.
func TestStartNextKillsOnIncompletePlan(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep(1)")
	}
	broken := errors.New("export failed")
	t0 := time.Now()
	// argv: glove-shim 30 3, which sleep(1) reads as 33 seconds.
	cmd, ctl, err := startNext(&Plan{}, make([]*os.File, 1), &syscall.SysProcAttr{}, sleep, "30", func() error { return broken })
	if !errors.Is(err, broken) || cmd != nil || ctl != nil {
		t.Fatalf("startNext = %v, %v, %v; want the completion's error", cmd, ctl, err)
	}
	if took := time.Since(t0); took > 20*time.Second {
		t.Errorf("startNext returned after %v: the child was not killed", took)
	}
}
