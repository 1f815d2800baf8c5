// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"testing"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
)

// TestRedact: every host path gloved knows becomes its name in a logged
// error, the innermost name for a path inside another.
func TestRedact(t *testing.T) {
	d := &Daemon{cfg: Config{StoreDir: "/var/lib/glove/store", MaterializationRoot: "/var/lib/glove/mat", KeyFile: "/etc/glove/receipt.key"},
		pol: &policy.Policy{
			PathAliases: []policy.PathAlias{{Alias: "workspace", HostPath: "/srv/ws"}, {Alias: "inner", HostPath: "/srv/ws/inner"}},
			RuntimeTemplates: []policy.RuntimeTemplate{{RuntimeTemplateID: "codex", Launch: policy.Launch{
				ExecutablePath: "/opt/codex/bin/codex", ReadOnlyPaths: []string{"/opt/codex/lib"}}}},
		}}
	for in, want := range map[string]string{
		"mounts[1] /workspace: copy the host tree: open /srv/ws/a: permission denied": "mounts[1] /workspace: copy the host tree: open ALIAS:workspace/a: permission denied",
		"open /srv/ws/inner/x":               "open ALIAS:inner/x",
		"stat /var/lib/glove/mat/bundle-1":   "stat MATERIALIZATION-ROOT/bundle-1",
		"read /etc/glove/receipt.key":        "read RECEIPT-KEY",
		"exec /opt/codex/bin/codex":          "exec EXECUTABLE:codex",
		"open /opt/codex/lib/x.so":           "open READ-ONLY-PATH:codex/x.so",
		"nothing of ours: /usr/lib/x86_64/a": "nothing of ours: /usr/lib/x86_64/a",
	} {
		if got := d.redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}
