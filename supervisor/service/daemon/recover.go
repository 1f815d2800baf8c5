// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/cgwire"
	"github.com/glove-sandbox/glove/helpers/wire/loopwire"
	"github.com/glove-sandbox/glove/helpers/wire/wirecall"
	"github.com/glove-sandbox/glove/supervisor/engine/session"
	"github.com/glove-sandbox/glove/supervisor/internal/cgleaf"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/supervisor/state/store"
	"github.com/sirupsen/logrus"
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
//
// This version records no starting state (a session it was starting is
// still preparing in the store) and records the runtime with running;
// starting, with or without a runtime, is in stores of earlier versions
// only. All are handled alike: whatever the state, the runtime, if there
// is one, decides between killed and gone, and the clean-up is the same.
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
	d.sweepCgroups()
	return nil
}

// maxSweep bounds the entries the sweep reads from the delegated parent.
// Threat: the service user's own processes can fill it to slow every
// start of gloved.
const maxSweep = 4096

// sweepCgroups removes the empty session cgroups that no session needs
// any more: those of sessions the store records as terminal, and those
// whose name is no session of the store's, left by a helper that died
// before it could remove them (and whose replacement could not either)
// or by a gloved killed between a session's end and its clean-up.
//
// What makes it safe:
//   - only the supervisor's delegated parent is read: the parent of the
//     leaf this gloved lives in (cgleaf), found through the kernel's own
//     /proc/self/cgroup and mountinfo, opened without following any link,
//     and checked to be a cgroup2 directory owned by the service user;
//     nothing is resolved from a name anyone else supplies;
//   - only subdirectories named as session ids are candidates, never the
//     supervisor's leaf;
//   - sessions of the store that are not terminal are left (recovery has
//     just finished those that a previous gloved left running);
//   - glove-cgroup removes each with cgwire RemoveEmpty, which never kills and
//     which the kernel refuses for a cgroup holding a process or a child
//     cgroup (the check and the removal are one rmdir), so another
//     supervisor's session being started, or anything else in use, is
//     left as it is.
//
// A failure is logged and the start goes on: a left-over empty cgroup
// bounds nothing and grants nothing, and the next start tries again.
func (d *Daemon) sweepCgroups() {
	log := d.log.WithField("event", "cgroup_sweep")
	names, why, err := d.sweepCandidates()
	if err != nil {
		log.WithField("error", err.Error()).Warn("left-over session cgroups not swept")
		return
	}
	if why != "" {
		log.WithField("why", why).Info("left-over session cgroups not swept")
		return
	}
	if len(names) == 0 {
		return
	}
	cg, err := d.startHelper(session.HelperCgroup)
	if err != nil {
		log.WithField("error", err.Error()).Warn("left-over session cgroups not swept")
		return
	}
	for _, name := range names {
		_, files, err := wirecall.Call(cgwire.RemoveEmpty, cg.Client, &cgwire.RemoveEmptyRequest{Session: name}, nil)
		for _, f := range files {
			f.Close()
		}
		var we *wire.Error
		switch {
		case errors.As(err, &we) && we.Code == wire.ErrRefused:
			// In use (a process or a child cgroup in it): not a
			// left-over, or not yet; it stays as it is.
			log.WithFields(logrus.Fields{"cgroup": name, "why": we.Message}).Info("session cgroup in use left as it is")
			continue
		case err != nil:
			log.WithFields(logrus.Fields{"cgroup": name, "error": err.Error()}).Warn("left-over session cgroup not removed")
			continue
		}
		log.WithField("cgroup", name).Info("left-over session cgroup removed")
	}
	if err := cg.Close(); err != nil {
		log.WithField("error", err.Error()).Warn("glove-cgroup of the sweep did not exit cleanly")
	}
}

// sweepCandidates lists the empty session cgroups sweepCgroups removes,
// or says why there is nothing to sweep ("why"), or fails.
func (d *Daemon) sweepCandidates() (names []string, why string, err error) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, "", fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	own := cgleaf.ParseSelfCgroup(self)
	if own == "" || path.Base(own) != cgleaf.Leaf {
		return nil, "gloved is not in a delegated cgroup's supervisor leaf", nil
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, "", fmt.Errorf("read mountinfo: %w", err)
	}
	mnt := cgleaf.ParseV2Mount(info)
	if mnt == "" {
		return nil, "no cgroup2 hierarchy mounted", nil
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, path.Join(mnt, path.Dir(own)), &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, "", fmt.Errorf("open the delegated cgroup: %w", err)
	}
	parent := os.NewFile(uintptr(fd), "delegated-cgroup")
	defer parent.Close()
	var sf unix.Statfs_t
	var st unix.Stat_t
	if err := unix.Fstatfs(fd, &sf); err != nil {
		return nil, "", fmt.Errorf("statfs the delegated cgroup: %w", err)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, "", fmt.Errorf("stat the delegated cgroup: %w", err)
	}
	if sf.Type != unix.CGROUP2_SUPER_MAGIC || int(st.Uid) != os.Geteuid() {
		return nil, "the supervisor leaf's parent is not a cgroup2 directory of the service user", nil
	}
	ents, err := parent.ReadDir(maxSweep)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, "", fmt.Errorf("list the delegated cgroup: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || name == cgleaf.Leaf || !store.ValidSessionID(name) {
			continue
		}
		sess, err := d.store.Get(name)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return nil, "", fmt.Errorf("look up session %s: %w", name, err)
		case !sess.State.Terminal():
			continue
		}
		names = append(names, name)
	}
	return names, "", nil
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
	if m := cgleaf.ParseV2Mount(b); m != "" {
		return m, nil
	}
	return "", errors.New("no cgroup2 mount")
}

func (d *Daemon) recoverOne(sess store.Session, reserved bool, reason string) error {
	cg, err := d.startHelper("glove-cgroup")
	if err != nil {
		return err
	}
	_, files, err := wirecall.Call(cgwire.Remove, cg.Client, &cgwire.RemoveRequest{Session: sess.ID}, nil)
	for _, f := range files {
		f.Close()
	}
	if cerr := cg.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("glove-cgroup exit: %w", cerr))
	}
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
		// The revision the session was started under, recorded with its
		// reservation: the operator may have replaced the policy since
		// (a reservation older than that record names none, and the
		// current revision stands in).
		revision := d.pol.Revision
		if rev, ok := d.receipts.Reservation(sess.ID); ok && rev != 0 {
			revision = rev
		}
		if _, err := d.receipts.Finalize(receipt.Body{SessionID: sess.ID, ControllerPlanDigest: sess.ControllerPlanDigest,
			PlanContentDigest: sess.PlanContentDigest, PolicyRevision: revision, Termination: "failed",
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
func (d *Daemon) freezeImages(id string) (err error) {
	m, _ := filepath.Glob(filepath.Join(d.cfg.MaterializationRoot, id+"_*.img"))
	if len(m) == 0 {
		return nil
	}
	lx, err := d.startHelper("glove-loopext4")
	if err != nil {
		return err
	}
	defer func() {
		if cerr := lx.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("glove-loopext4 exit: %w", cerr))
		}
	}()
	root, err := unix.Openat2(unix.AT_FDCWD, d.cfg.MaterializationRoot, &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return fmt.Errorf("open the materialization root: %w", err)
	}
	defer unix.Close(root)
	for _, img := range m {
		_, files, err := wirecall.Call(loopwire.Attach, lx.Client, &loopwire.AttachRequest{Name: filepath.Base(img)}, []int{root})
		if err != nil {
			return fmt.Errorf("attach a retained image: %w", err)
		}
		if len(files) != 1 {
			for _, f := range files {
				f.Close()
			}
			return errors.New("attach a retained image: no mount")
		}
		_, more, ferr := wirecall.Call(loopwire.Freeze, lx.Client, &loopwire.FreezeRequest{}, []int{int(files[0].Fd())})
		for _, f := range append(files, more...) {
			f.Close()
		}
		if ferr != nil {
			return fmt.Errorf("freeze a retained image: %w", ferr)
		}
	}
	return nil
}
