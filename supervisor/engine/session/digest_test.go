// SPDX-License-Identifier: Apache-2.0

package session

import (
	"regexp"
	"strings"
	"testing"
)

func TestLaunchDigest(t *testing.T) {
	l, _ := streamLaunch(t, nil)
	tr := func() *Transport {
		return &Transport{Kind: "inherited-stream-v1", FDs: map[string]int{"sage": 3},
			Guest: EndpointID{Dev: 9, Ino: 100, UID: 1000}, Upstream: EndpointID{Dev: 8, Ino: 200, UID: 1000},
			Manifest: []ManifestEntry{{Alias: "sage", Socket: "/run/sage/s.sock"}}}
	}
	cred := Credential{Handle: "codex-token", Destination: "/home/agent/.codex/auth.json", MaxBytes: 4096, LeaseID: strings.Repeat("ab", 16), Version: 1}
	base := LaunchDigest(l, "d1", tr())
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(base) {
		t.Fatalf("digest %q", base)
	}
	if again := LaunchDigest(l, "d1", tr()); again != base {
		t.Fatal("the digest is not deterministic")
	}
	changes := map[string]func(*Launch, *Transport) *Transport{
		"adapter":         func(l *Launch, t *Transport) *Transport { return t },
		"no transport":    func(l *Launch, t *Transport) *Transport { return nil },
		"descriptor map":  func(l *Launch, t *Transport) *Transport { t.FDs = map[string]int{"sage": 4}; return t },
		"alias":           func(l *Launch, t *Transport) *Transport { t.FDs = map[string]int{"other": 3}; return t },
		"guest endpoint":  func(l *Launch, t *Transport) *Transport { t.Guest.Ino++; return t },
		"upstream inode":  func(l *Launch, t *Transport) *Transport { t.Upstream.Ino++; return t },
		"upstream uid":    func(l *Launch, t *Transport) *Transport { t.Upstream.UID = 0; return t },
		"manifest":        func(l *Launch, t *Transport) *Transport { t.Manifest[0].Socket = "/run/x.sock"; return t },
		"argument":        func(l *Launch, t *Transport) *Transport { l.Args = []string{"x"}; return t },
		"environment":     func(l *Launch, t *Transport) *Transport { l.Env = append(l.Env, "A=b"); return t },
		"mount read-only": func(l *Launch, t *Transport) *Transport { l.Mounts[1].ReadOnly = true; return t },
		"limit":           func(l *Launch, t *Transport) *Transport { l.Limits.Pids++; return t },
		"egress policy":   func(l *Launch, t *Transport) *Transport { l.EgressPolicyIDs = []string{"no-network"}; return t },
		"tool policy":     func(l *Launch, t *Transport) *Transport { l.ToolPolicyIDs = []string{"sage-readonly"}; return t },
		"credential":      func(l *Launch, t *Transport) *Transport { l.Credentials = []Credential{cred}; return t },
		"lease version": func(l *Launch, t *Transport) *Transport {
			c := cred
			c.Version++
			l.Credentials = []Credential{c}
			return t
		},
		"lease identity": func(l *Launch, t *Transport) *Transport {
			c := cred
			c.LeaseID = strings.Repeat("cd", 16)
			l.Credentials = []Credential{c}
			return t
		},
	}
	for name, change := range changes {
		l2, _ := streamLaunch(t, nil)
		l2.Mounts = append([]Mount(nil), l2.Mounts...)
		adapter := "d1"
		if name == "adapter" {
			adapter = "d2"
		}
		if got := LaunchDigest(l2, adapter, change(l2, tr())); got == base {
			t.Errorf("%s: the digest did not change", name)
		}
		if name == "lease version" || name == "lease identity" {
			l1, _ := streamLaunch(t, nil)
			l1.Credentials = []Credential{cred}
			if LaunchDigest(l1, "d1", tr()) == LaunchDigest(l2, "d1", tr()) {
				t.Errorf("%s: the digest did not change against the same credential at its first version", name)
			}
		}
	}
}
