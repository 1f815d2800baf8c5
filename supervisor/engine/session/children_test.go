package session

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

// TestOwnChildren: the kernel's children lists name exactly the children
// a scan of every process finds (reapOrphans relies on it to find the
// orphans re-parented to gloved), and a child that ends and is reaped
// leaves them.
func TestOwnChildren(t *testing.T) {
	var cmds []*exec.Cmd
	for range 3 {
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	defer func() {
		for _, c := range cmds {
			if err := c.Process.Kill(); err != nil {
				t.Errorf("kill %d: %v", c.Process.Pid, err)
			}
			_ = c.Wait() // the kill's own status
		}
	}()
	got, err := ownChildren()
	if err != nil {
		t.Fatal(err)
	}
	scan, err := childrenOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(scan)
	if !slices.Equal(got, scan) {
		t.Errorf("children lists %v, scan of /proc %v", got, scan)
	}
	for _, c := range cmds {
		if !slices.Contains(got, c.Process.Pid) {
			t.Errorf("child %d not listed in %v", c.Process.Pid, got)
		}
	}
	last := cmds[2]
	cmds = cmds[:2]
	if err := last.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = last.Wait() // the kill's own status
	got, err = ownChildren()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(got, last.Process.Pid) {
		t.Errorf("reaped child %d still listed in %v", last.Process.Pid, got)
	}
}
