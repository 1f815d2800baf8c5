package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/supervisor/receipt"
	"github.com/glove-sandbox/glove/supervisor/session"
	"github.com/glove-sandbox/glove/supervisor/store"
	"golang.org/x/sys/unix"
)

// Recovery reasons, recorded as the failed session's reason.
const (
	// RecoveredGone: the session's processes no longer exist (or a
	// process with its pid is not the one that was started).
	RecoveredGone = "recovered:gone"
	// RecoveredKilled: its processes were still there and were killed
	// through the session's cgroup.
	RecoveredKilled = "recovered:killed"
)

// recoverSessions finishes, as failed, every session a previous gloved
// left between preparing and stopping (it was killed, or the host
// rebooted). For each one, in order:
//
//  1. it decides whether the session's processes still exist, by the boot
//     id, the shim's pid and start time, and the session's cgroup inode
//     recorded before the program was released (never by a bare pid: a
//     pid may since belong to anything, and a mismatch has no effect);
//  2. glove-cgroup removes the session's cgroups, killing what is left in
//     them (that is the only way anything is ever killed here);
//  3. retained images of the session are attached read-write (ext4
//     replays its journal), frozen read-only and released, so the staged
//     change is consistent; ephemeral copies were tmpfs held only by the
//     dead processes' descriptors and are already gone;
//  4. the bundle directories it left are removed;
//  5. its terminal receipt (failed) is made durable if it was reserved,
//     and only then is the session recorded as failed.
//
// Sessions still created were never started and are left as they are.
func (d *Daemon) recoverSessions() error {
	boot, err := session.BootID()
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	ids := d.store.List()
	sort.Strings(ids)
	outstanding := map[string]bool{}
	for _, id := range d.receipts.Outstanding() {
		outstanding[id] = true
	}
	for _, id := range ids {
		sess, err := d.store.Get(id)
		if err != nil {
			return fmt.Errorf("recover %s: %w", id, err)
		}
		switch sess.State {
		case store.Preparing, store.Starting, store.Running, store.Stopping:
		default:
			continue
		}
		reason := RecoveredGone
		if alive(sess.Runtime, boot) {
			reason = RecoveredKilled
		}
		if err := d.recoverOne(sess, outstanding[id], reason); err != nil {
			return fmt.Errorf("recover %s: %w", id, err)
		}
		d.log.WithField("session_id", id).WithField("event", "recovered").WithField("reason", reason).Warn("session left by a previous gloved ended as failed")
	}
	return nil
}

// alive reports whether the process the runtime identity names still
// exists as that same process: same boot, same pid, same start time, and
// still in a cgroup whose directory has the recorded inode.
func alive(rt *store.Runtime, boot string) bool {
	if rt == nil || rt.BootID != boot {
		return false
	}
	t, err := session.StartTicks(rt.PID)
	if err != nil || t != rt.StartTicks {
		return false
	}
	ino, err := cgroupInode(rt.PID)
	return err == nil && ino == rt.CgroupInode
}

// cgroupInode returns the inode of the v2 cgroup directory process pid is
// in, found through the cgroup2 mount of this mount namespace.
func cgroupInode(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return 0, err
	}
	var rel string
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			rel = p
		}
	}
	mount, err := cgroup2Mount()
	if err != nil || rel == "" {
		return 0, errors.New("no cgroup v2 membership")
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(mount, rel), &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

func cgroup2Mount() (string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		for i, x := range f {
			if x == "-" && i+1 < len(f) && f[i+1] == "cgroup2" {
				return f[4], nil
			}
		}
	}
	return "", errors.New("no cgroup2 mount")
}

func (d *Daemon) recoverOne(sess store.Session, reserved bool, reason string) error {
	cg, err := d.startHelper("glove-cgroup")
	if err != nil {
		return err
	}
	_, _, err = cg.Client.Call(&wire.CgRemove{Session: sess.ID}, nil)
	_ = cg.Close()
	if err != nil {
		return fmt.Errorf("remove the session's cgroups: %w", err)
	}
	if err := d.freezeImages(sess.ID); err != nil {
		return err
	}
	// Bundles: the session engine's private directories, named after it.
	if m, err := filepath.Glob(filepath.Join(d.cfg.MaterializationRoot, "bundle-"+sess.ID+"-*")); err == nil {
		for _, b := range m {
			if err := os.RemoveAll(b); err != nil {
				return fmt.Errorf("remove a bundle: %w", err)
			}
		}
	}
	if reserved {
		now := time.Now().UnixMilli()
		started := sess.CreatedAt.UnixMilli()
		if _, err := d.receipts.Finalize(receipt.Body{SessionID: sess.ID, ControllerPlanDigest: sess.ControllerPlanDigest,
			PlanContentDigest: sess.PlanContentDigest, PolicyRevision: d.pol.Revision, Termination: "failed",
			LaunchDigest: launchDigestOf(sess),
			StartedAtMS:  max(started, 1), EndedAtMS: max(now, started, 1)}); err != nil {
			return fmt.Errorf("seal the terminal receipt: %w", err)
		}
	}
	if _, err := d.store.Transition(sess.ID, store.Failed, reason); err != nil {
		return fmt.Errorf("record the failure: %w", err)
	}
	return nil
}

// launchDigestOf is the recorded managed-launch digest, if the session got
// as far as recording it.
func launchDigestOf(sess store.Session) string {
	if sess.Runtime == nil {
		return ""
	}
	return sess.Runtime.LaunchDigest
}

// freezeImages re-attaches and freezes the session's retained images in
// the materialization root (session.ImageName's "<session>_" prefix).
func (d *Daemon) freezeImages(id string) error {
	m, _ := filepath.Glob(filepath.Join(d.cfg.MaterializationRoot, id+"_*.img"))
	if len(m) == 0 {
		return nil
	}
	lx, err := d.startHelper("glove-loopext4")
	if err != nil {
		return err
	}
	defer lx.Close()
	root, err := unix.Openat2(unix.AT_FDCWD, d.cfg.MaterializationRoot, &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return fmt.Errorf("open the materialization root: %w", err)
	}
	defer unix.Close(root)
	for _, img := range m {
		_, files, err := lx.Client.Call(&wire.Attach{Name: filepath.Base(img)}, []int{root})
		if err != nil {
			return fmt.Errorf("attach a retained image: %w", err)
		}
		if len(files) != 1 {
			for _, f := range files {
				f.Close()
			}
			return errors.New("attach a retained image: no mount")
		}
		_, more, ferr := lx.Client.Call(&wire.Freeze{}, []int{int(files[0].Fd())})
		for _, f := range append(files, more...) {
			f.Close()
		}
		if ferr != nil {
			return fmt.Errorf("freeze a retained image: %w", ferr)
		}
	}
	return nil
}
