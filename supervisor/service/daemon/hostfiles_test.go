// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/testenv"
)

// TestGlovedHostFiles runs the stand-in harness's "etc" report in three
// sessions: a template with launch.host_files ca_certificates and
// name_service, one with ca_certificates alone, and one with none. Judged
// from the output against the host:
//   - with both: /etc holds the synthetic passwd, group, nsswitch.conf
//     and hosts and ssl (nothing else), the CA bundle is byte for byte
//     the host's and its hashed links resolve, the sandbox's uid resolves
//     to "agent" with home /home/agent, /etc/passwd cannot be written;
//   - with the CA alone: /etc holds ssl alone, and the uid resolves to
//     no user;
//   - with none: there is no /etc;
//   - in every one: none of the host's /etc/shadow, /etc/gshadow,
//     /etc/hostname, /etc/machine-id, /etc/os-release, /etc/resolv.conf,
//     /etc/ssl/private, /etc/ssl/openssl.cnf, /etc/bash.bashrc is there.
func TestGlovedHostFiles(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	bundle, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Skipf("this host has no Debian CA bundle: %v", err)
	}
	hostSum := sha256.Sum256(bundle)
	f := newFixture(t, e, map[string][]string{"both": {"etc"}, "ca": {"etc"}, "none": {"etc"}})
	for i := range f.pol.RuntimeTemplates {
		tm := &f.pol.RuntimeTemplates[i]
		switch tm.RuntimeTemplateID {
		case "both":
			tm.Launch.HostFiles = []string{policy.HostFilesCA, policy.HostFilesNameService}
		case "ca":
			tm.Launch.HostFiles = []string{policy.HostFilesCA}
		}
		tm.AdapterCommandDigest = policy.AdapterDigest(tm)
		f.templates[tm.RuntimeTemplateID] = *tm
	}
	if err := policy.Validate(f.pol); err != nil {
		t.Fatal(err)
	}
	writeProtected(t, filepath.Join(f.dir, "policy.json"), policy.Canonical(f.pol), e.UID, e.GID)
	g := startGloved(t, e, f.args...)
	c := dial(t, g.socket)
	run := func(id, template string) string {
		t.Helper()
		st := f.create(c, id, f.plan(template, "tiny"))
		c.ok("start_session", map[string]any{"session_id": id, "start_token": st}, nil)
		end := attach(t, c, id)
		out := strings.ReplaceAll(end.output, "\r\n", "\n")
		if end.Status != 0 {
			t.Errorf("%s: status %d\n%s\nlog: %s", id, end.Status, out, g.log)
		}
		for _, p := range []string{"/etc/shadow", "/etc/gshadow", "/etc/hostname", "/etc/machine-id", "/etc/os-release", "/etc/resolv.conf", "/etc/ssl/private", "/etc/ssl/openssl.cnf", "/etc/bash.bashrc"} {
			if !strings.Contains(out, "host file absent "+p+"\n") {
				t.Errorf("%s: the host's %s is visible or unchecked:\n%s", id, p, out)
			}
		}
		return out
	}
	expect := func(id, out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w+"\n") {
				t.Errorf("%s: output lacks %q:\n%s", id, w, out)
			}
		}
	}
	caBundle := "ca bundle sha256 " + hex.EncodeToString(hostSum[:])
	both := run("s-etc-both", "both")
	expect("s-etc-both", both, "etc entries [group hosts nsswitch.conf passwd ssl] <nil>", caBundle, "user agent /home/agent", "write /etc/passwd true")
	ca := run("s-etc-ca", "ca")
	expect("s-etc-ca", ca, "etc entries [ssl] <nil>", caBundle, "user open /etc/passwd: no such file or directory", "write /etc/passwd true")
	for id, out := range map[string]string{"s-etc-both": both, "s-etc-ca": ca} {
		var links, resolved int
		for _, l := range strings.Split(out, "\n") {
			if _, err := fmt.Sscanf(l, "ca links %d resolved %d", &links, &resolved); err == nil {
				break
			}
		}
		if links == 0 || resolved != links {
			t.Errorf("%s: %d of the CA directory's %d links resolve, want all (and some)", id, resolved, links)
		}
	}
	none := run("s-etc-none", "none")
	expect("s-etc-none", none, "etc entries [] open /etc: no such file or directory", "ca bundle open /etc/ssl/certs/ca-certificates.crt: no such file or directory")
	g.stop(t)
}
