// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/glove-sandbox/glove/supervisor/state/store"
	"golang.org/x/sys/unix"
)

// A session with a local service has a stream audit file in the session
// store, beside the journals: the records of its relays. The file lives
// as long as the session's record: it is removed when a compaction lets
// the session go (a cleaned-up session past the retention window) and,
// at start-up, when no session of the store has its id (a compaction by
// `glove store`, or a gloved that stopped between the two). Threat: a
// controller running sessions for months would otherwise fill the store's
// disk with one file per session, and a session id used again after its
// record left would find the old file and fail to start (the file is
// created exclusive, so that two sessions never share records).
const (
	streamAuditPrefix = "stream-"
	streamAuditSuffix = ".audit"
	// egressAuditPrefix names a session's egress audit file (its egress
	// endpoints' connections, package egress), which lives and goes as
	// the stream audit file does.
	egressAuditPrefix = "egress-"
)

// auditPrefixes are the prefixes of a session's audit files.
var auditPrefixes = []string{streamAuditPrefix, egressAuditPrefix}

// createStreamAudit creates session id's stream audit file, exclusive:
// records of two sessions never share a file.
func (d *Daemon) createStreamAudit(id string) (*os.File, error) {
	return d.createAudit(streamAuditPrefix, id)
}

// createAudit creates session id's audit file of the given prefix,
// exclusive.
func (d *Daemon) createAudit(prefix, id string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(d.cfg.StoreDir, prefix+id+streamAuditSuffix), os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit file: %w", err)
	}
	return f, nil
}

// removeStreamAudits removes the stream audit files of the sessions ids,
// if they have one, and makes the removals durable. Each removal is
// logged; a failure is returned, never skipped.
func (d *Daemon) removeStreamAudits(ids []string, why string) error {
	removed := 0
	var errs []error
	for _, id := range ids {
		for _, prefix := range auditPrefixes {
			err := os.Remove(filepath.Join(d.cfg.StoreDir, prefix+id+streamAuditSuffix))
			switch {
			case errors.Is(err, os.ErrNotExist):
			case err != nil:
				errs = append(errs, fmt.Errorf("remove the stream audit of %s: %w", id, err))
			default:
				removed++
				d.log.WithField("event", "stream_audit_removed").WithField("session_id", id).WithField("file", prefix+"*").WithField("why", why).Info("stream audit removed with its session")
			}
		}
	}
	if removed > 0 {
		if err := syncDir(d.cfg.StoreDir); err != nil {
			errs = append(errs, fmt.Errorf("sync the session store after removing stream audits: %w", err))
		}
	}
	return errors.Join(errs...)
}

// sweepStreamAudits removes, at start-up, every stream audit file whose
// session the store no longer has.
func (d *Daemon) sweepStreamAudits() error {
	entries, err := os.ReadDir(d.cfg.StoreDir)
	if err != nil {
		return fmt.Errorf("list the session store: %w", err)
	}
	var orphans []string
	for _, e := range entries {
		var id string
		ok := false
		for _, prefix := range auditPrefixes {
			if rest, cut := strings.CutPrefix(e.Name(), prefix); cut {
				id, ok = rest, true
			}
		}
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if id, ok = strings.CutSuffix(id, streamAuditSuffix); !ok {
			continue
		}
		if _, err := d.store.Get(id); errors.Is(err, store.ErrNotFound) {
			orphans = append(orphans, id)
		} else if err != nil {
			return fmt.Errorf("look up the session of %s: %w", e.Name(), err)
		}
	}
	return d.removeStreamAudits(orphans, "no session of the store has its id")
}

// syncDir makes the entries of dir durable.
func syncDir(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", filepath.Base(dir), err)
	}
	err = unix.Fsync(fd)
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	return nil
}
