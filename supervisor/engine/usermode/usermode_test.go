// SPDX-License-Identifier: Apache-2.0

package usermode

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestChoose(t *testing.T) {
	eperm := errors.New("fork/exec /bin/true: operation not permitted")
	ok := func() error { return nil }
	off := func() error { return errors.New("wire: refused (2): glove-userns is not enabled") }
	unused := func() error { t.Error("the helper was tried where it cannot help"); return nil }
	cases := []struct {
		name   string
		f      Facts
		probe  error
		helper func() error
		mode   string
		reason string
	}{
		{"unrestricted host", Facts{UnprivilegedClone: "1", MaxUserNamespaces: "7880"}, nil, unused, Unprivileged, ""},
		{"no Debian switch", Facts{MaxUserNamespaces: "7880"}, nil, unused, Unprivileged, ""},
		{"Debian switch off, helper enabled", Facts{UnprivilegedClone: "0", MaxUserNamespaces: "7880"}, eperm, ok, Helper, ""},
		{"Debian switch off, helper not enabled", Facts{UnprivilegedClone: "0", MaxUserNamespaces: "7880"}, eperm, off, "", "kernel.unprivileged_userns_clone=0"},
		{"no namespaces at all", Facts{UnprivilegedClone: "0", MaxUserNamespaces: "0"}, errors.New("no space left on device"), unused, "", "max_user_namespaces=0"},
		{"AppArmor restriction", Facts{AppArmorRestrict: "1", MaxUserNamespaces: "7880"}, eperm, unused, "", "AppArmor"},
		{"something else", Facts{MaxUserNamespaces: "7880"}, eperm, unused, "", "cannot create a user namespace"},
	}
	for _, c := range cases {
		mode, err := Choose(c.f, c.probe, c.helper)
		var r *Refusal
		switch {
		case c.reason == "" && (err != nil || mode != c.mode):
			t.Errorf("%s: %q, %v; want %q", c.name, mode, err, c.mode)
		case c.reason != "" && (!errors.As(err, &r) || !strings.Contains(r.Reason, c.reason) || r.Fix == "" || mode != ""):
			t.Errorf("%s: %q, %v; want a refusal naming %q with a fix", c.name, mode, err, c.reason)
		}
		if r != nil && strings.Contains(r.Reason+r.Fix, "\n") {
			t.Errorf("%s: the refusal is more than one line: %q", c.name, r.Error())
		}
	}
}

func TestReadFacts(t *testing.T) {
	dir := t.TempDir()
	for name, v := range map[string]string{"kernel/unprivileged_userns_clone": "0\n", "user/max_user_namespaces": "7880\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if f := ReadFacts(dir); f != (Facts{UnprivilegedClone: "0", MaxUserNamespaces: "7880"}) {
		t.Errorf("facts %+v", f)
	}
}

// TestProbe: on a host without a switch, the probe makes a namespace,
// also for an unprivileged user (root probing for nobody, as glove
// status does). Its failure is the VM lane's hardened cell's to show.
func TestProbe(t *testing.T) {
	f := ReadFacts("/proc/sys")
	if f.UnprivilegedClone == "0" || f.AppArmorRestrict == "1" || f.MaxUserNamespaces == "0" {
		t.Skipf("this host restricts user namespaces (%+v): the probe's success is not expected", f)
	}
	if err := Probe(); err != nil {
		t.Errorf("probe: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("ProbeAs needs root to drop to another user")
	}
	if err := ProbeAs(65534, 65534); err != nil {
		t.Errorf("probe as nobody: %v", err)
	}
}
