// SPDX-License-Identifier: Apache-2.0

package usermode

import (
	"errors"

	"github.com/glove-sandbox/glove/testenv"
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
		{"glove-shim's profile refusing", Facts{ShimProfile: "enforce", MaxUserNamespaces: "7880"}, eperm, unused, "", "AppArmor mediates"},
		{"AppArmor mediating, profiles unreadable", Facts{AppArmorUserns: "yes", MaxUserNamespaces: "7880"}, eperm, unused, "", "not readable"},
		{"Debian switch with the profile loaded", Facts{UnprivilegedClone: "0", ShimProfile: "enforce", MaxUserNamespaces: "7880"}, eperm, ok, Helper, ""},
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

// TestProbe: on a host without a switch, glove-shim's probe passes for
// an unprivileged user (root probing for the test's service user, as
// glove status does). Its failure is the VM lane's hardened cell's to
// show, and the probe's own steps are glove-shim's tests'.
func TestProbe(t *testing.T) {
	f := ReadFacts("/proc/sys")
	if f.UnprivilegedClone == "0" || f.AppArmorRestrict == "1" || f.MaxUserNamespaces == "0" {
		t.Skipf("this host restricts user namespaces (%+v): the probe's success is not expected", f)
	}
	e := testenv.Get(t)
	if err := ProbeAs(e.HelperPath("glove-shim"), uint32(e.UID), uint32(e.GID)); err != nil {
		t.Errorf("probe as the service user: %v", err)
	}
	// A path that is no glove-shim: the failure is an error, not a pass.
	if err := ProbeAs("/nonexistent/glove-shim", uint32(e.UID), uint32(e.GID)); err == nil {
		t.Errorf("a probe with no shim passed")
	}
}

func TestShimProfile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "profiles")
	for body, want := range map[string]string{
		"glove-sandbox (enforce)\nglove-shim (enforce)\n": "enforce",
		"glove-shim (complain)\n":                         "complain",
		"glove-shim-x (enforce)\nunconfined\n":            "",
		"":                                                "",
	} {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := shimProfile(p); got != want {
			t.Errorf("%q: %q, want %q", body, got, want)
		}
	}
	if got := shimProfile(filepath.Join(dir, "none")); got != "" {
		t.Errorf("no list: %q", got)
	}
}
