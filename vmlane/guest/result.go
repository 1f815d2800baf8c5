// SPDX-License-Identifier: Apache-2.0

// Package guest is the in-guest agent of Glove's VM lane: run as root on
// every boot of a lane guest (vmlane/run.sh), it installs the package
// under test, drives Glove as an operator and as a controller would, and
// checks every effect from the host side of the guest. Its verdict is
// /lane/result: "pass" or "fail", then one line per check ("ok NAME" or
// "FAIL NAME: reason"); the evidence of each check is in
// /lane/evidence/NAME.txt.
package guest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Outcome is one check's verdict.
type Outcome struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
}

// maxReason bounds a reason on the result line.
const maxReason = 600

// Line is the outcome's line in the result file.
func (o Outcome) Line() string {
	if o.OK {
		return "ok " + o.Name
	}
	return "FAIL " + o.Name + ": " + OneLine(o.Reason, maxReason)
}

// OneLine folds s into one line of at most n bytes: line breaks become
// " | ", runs of blanks one space.
func OneLine(s string, n int) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			parts = append(parts, l)
		}
	}
	s = strings.Join(parts, " | ")
	if s == "" {
		s = "(no reason given)"
	}
	if len(s) > n {
		cut := n - len(" …")
		for cut > 0 && (s[cut]&0xc0) == 0x80 { // not inside a UTF-8 sequence
			cut--
		}
		s = s[:cut] + " …"
	}
	return s
}

// FormatResult is the result file: "pass" when there is at least one
// outcome and every outcome is ok, else "fail"; then one line each.
func FormatResult(outs []Outcome) []byte {
	var b bytes.Buffer
	pass := len(outs) > 0
	for _, o := range outs {
		pass = pass && o.OK
	}
	if pass {
		b.WriteString("pass\n")
	} else {
		b.WriteString("fail\n")
	}
	for _, o := range outs {
		b.WriteString(o.Line())
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// RebootInfo is what phase 1 leaves for phase 2 about the session that
// was running when the guest rebooted.
type RebootInfo struct {
	SessionID    string `json:"session_id"`
	State        string `json:"state"`
	Image        string `json:"image"`         // file name in the materialization root
	LaunchDigest string `json:"launch_digest"` // session_status's before the reboot
	ShimPIDs     []int  `json:"shim_pids"`     // the session cgroup's processes before the reboot
	Loop         string `json:"loop"`          // the loop device backing the image before the reboot
	BootID       string `json:"boot_id"`
	Mode         string `json:"mode"` // how the guest was rebooted
}

// State is /lane/state.json: what survives a reboot.
type State struct {
	Version   int       `json:"version"`
	Phase     string    `json:"phase"` // PhaseFirst, PhaseRebooting, PhaseSecond, PhaseDone
	Boots     int       `json:"boots"`
	StartedAt time.Time `json:"started_at"` // the global deadline counts from here
	RunTag    string    `json:"run_tag"`    // makes session ids unique per run
	Anchor    string    `json:"anchor"`     // the controller's receipt anchor
	GloveUID  int       `json:"glove_uid"`
	GloveGID  int       `json:"glove_gid"`
	Results   []Outcome `json:"results"`
	// PreExisting is every path of the package that existed before
	// dpkg -i (directories such as /usr/bin); DpkgList is dpkg -L glove.
	PreExisting map[string]bool `json:"pre_existing,omitempty"`
	// PreGroup: a group glove existed before the install (the package
	// adopts it and purge leaves it); PreVarLib: /var/lib/glove's entries.
	PreGroup  bool     `json:"pre_group,omitempty"`
	PreVarLib []string `json:"pre_var_lib,omitempty"`
	DpkgList  []string `json:"dpkg_list,omitempty"`
	// AckedSeq and AckedMAC are the receipt head the controller
	// acknowledged; Sessions maps each session id to its template.
	AckedSeq uint64            `json:"acked_seq"`
	AckedMAC string            `json:"acked_mac,omitempty"`
	Sessions map[string]string `json:"sessions,omitempty"`
	Reboot   *RebootInfo       `json:"reboot,omitempty"`
}

// Phases.
const (
	PhaseFirst     = "phase1"
	PhaseRebooting = "rebooting"
	PhaseSecond    = "phase2"
	PhaseDone      = "done"
)

// StateVersion is State.Version.
const StateVersion = 1

// LoadState reads the state file; a missing file is (nil, nil).
func LoadState(path string) (*State, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if st.Version != StateVersion {
		return nil, fmt.Errorf("%s: version %d, want %d", path, st.Version, StateVersion)
	}
	return &st, nil
}

// Save writes the state file atomically and durably.
func (st *State) Save(path string) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileSync(path, append(data, '\n'), 0o644)
}

// Outcome returns the named check's outcome, if it was recorded.
func (st *State) Outcome(name string) (Outcome, bool) {
	for _, o := range st.Results {
		if o.Name == name {
			return o, true
		}
	}
	return Outcome{}, false
}

// WriteFileSync writes path through a temporary file in its directory,
// fsyncs it, renames it over path and fsyncs the directory.
func WriteFileSync(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
