// SPDX-License-Identifier: Apache-2.0

package session

import (
	"slices"
	"testing"
)

// TestMaskedFor: a hidden host path is masked wherever a bind shows it,
// at its place below the bind's target, and nowhere else.
func TestMaskedFor(t *testing.T) {
	ms := []Mount{
		{Target: "/usr", Kind: ReadOnlyBind, HostPath: "/usr"},
		{Target: "/opt/tools", Kind: ReadOnlyBind, HostPath: "/srv/tools"},
		{Target: "/host", Kind: ReadOnlyBind, HostPath: "/"},
		{Target: "/workspace", Kind: EphemeralCopy, HostPath: "/usr/libexec"},
		{Target: "/tmp", Kind: Tmpfs},
	}
	for _, tc := range []struct {
		hidden []string
		want   []string
	}{
		{[]string{"/usr/libexec/glove"}, []string{"/usr/libexec/glove", "/host/usr/libexec/glove"}},
		{[]string{"/usr/libexec/glove/"}, []string{"/usr/libexec/glove", "/host/usr/libexec/glove"}},
		{[]string{"/srv/tools/glove"}, []string{"/opt/tools/glove", "/host/srv/tools/glove"}},
		{[]string{"/srv/tools"}, []string{"/opt/tools", "/host/srv/tools"}},
		{[]string{"/srv/toolsx/glove"}, []string{"/host/srv/toolsx/glove"}},
		{nil, nil},
	} {
		if got := maskedFor(tc.hidden, ms); !slices.Equal(got, tc.want) {
			t.Errorf("maskedFor(%q) = %q, want %q", tc.hidden, got, tc.want)
		}
	}
	if got := maskedFor([]string{"/usr/libexec/glove"}, ms[3:]); got != nil {
		t.Errorf("a copy or a tmpfs masked: %q", got)
	}
}
