// SPDX-License-Identifier: Apache-2.0

package shim_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/packaging/apparmor"
	"github.com/glove-sandbox/glove/testenv"
)

// requireAppArmorUserns skips unless this host can judge the package's
// profiles: root, AppArmor enabled, its parser 4.0 or later (the userns
// rule) and a kernel that mediates user-namespace creation
// (features/namespaces/mask: userns_create). The VM lane's hardened cell
// has all of them and runs the test there, where a skip fails the cell.
func requireAppArmorUserns(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loading AppArmor profiles needs root")
	}
	if b, err := os.ReadFile("/sys/module/apparmor/parameters/enabled"); err != nil || strings.TrimSpace(string(b)) != "Y" {
		t.Skipf("AppArmor is not enabled here (%q, %v)", strings.TrimSpace(string(b)), err)
	}
	if b, err := os.ReadFile("/sys/kernel/security/apparmor/features/namespaces/mask"); err != nil || !strings.Contains(string(b), "userns_create") {
		t.Skipf("this kernel's AppArmor does not mediate user-namespace creation (%q, %v)", strings.TrimSpace(string(b)), err)
	}
	parser, err := exec.LookPath("apparmor_parser")
	if err != nil {
		t.Skip("no apparmor_parser")
	}
	out, err := exec.Command(parser, "--version").Output()
	m := regexp.MustCompile(`version (\d+)\.`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("apparmor_parser --version: %q %v", out, err)
	}
	if major, _ := strconv.Atoi(string(m[1])); major < 4 {
		t.Skipf("apparmor_parser is older than 4.0 (%s), which the userns rule needs", strings.TrimSpace(string(out)))
	}
	return parser
}

// loadShimProfile loads the package's profiles attached to the shim at
// path (an AppArmor path expression), and unloads them when the test ends.
func loadShimProfile(t *testing.T, parser, path string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "glove-shim")
	if err := os.WriteFile(f, []byte(apparmor.ShimProfileFor(path)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(parser, "-r", "-K", f).CombinedOutput(); err != nil {
		t.Fatalf("apparmor_parser -r %s: %v\n%s", f, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(parser, "-R", "-K", f).CombinedOutput(); err != nil {
			t.Errorf("apparmor_parser -R %s: %v\n%s", f, err, out)
		}
	})
}

// alternation is an AppArmor path expression matching a and b (absolute
// paths): their common directory, then {restA,restB}.
func alternation(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	cut := strings.LastIndex(a[:i], "/") + 1
	return a[:cut] + "{" + a[cut:] + "," + b[cut:] + "}"
}

// allowNesting lifts Debian's kernel.unprivileged_userns_clone=0 for the
// test and puts it back: under it no process can nest a user namespace
// (root included), which would hide what AppArmor's rule does.
func allowNesting(t *testing.T) {
	t.Helper()
	const sw = "/proc/sys/kernel/unprivileged_userns_clone"
	b, err := os.ReadFile(sw)
	if err != nil || strings.TrimSpace(string(b)) != "0" {
		return
	}
	if err := os.WriteFile(sw, []byte("1\n"), 0o644); err != nil {
		t.Fatalf("lift %s: %v", sw, err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(sw, []byte("0\n"), 0o644); err != nil {
			t.Errorf("restore %s to 0: %v", sw, err)
		}
	})
}

// TestShimAppArmor judges the package's AppArmor profiles
// (packaging/apparmor/glove-shim) on a kernel that enforces them, attached
// to this test's shims:
//   - the sandbox is built under profile glove-shim (the positive controls
//     of the attack table run), and its program runs under glove-sandbox
//     stacked on it;
//   - with every layer of the shim off but the profiles (the table's base
//     configuration), the program's unshare(CLONE_NEWUSER) and clone with
//     it succeed without the profiles and are refused with them: the
//     profile alone stops the attack seccomp stops (the table's row);
//   - the production shim under its profile stops both too.
func TestShimAppArmor(t *testing.T) {
	parser := requireAppArmorUserns(t)
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	allowNesting(t)
	probeDir := buildProbe(t, e)
	layers, prod := e.LayersShim(t), e.HelperPath("glove-shim")
	base := attackConfig{name: "base", layer: true}
	production := attackConfig{name: "production", prod: true}
	userns := []attackCase{{name: "unshare-userns"}, {name: "clone-newuser"}}
	label := attackCase{name: "apparmor-label", control: true}

	for _, c := range userns {
		if r := runAttack(t, e, probeDir, layers, base, c); r.stopped {
			t.Fatalf("%s without the profiles, every layer off: stopped (%s); the baseline must succeed for the profile's effect to show", c.name, r.evidence)
		}
	}
	// One load for both shims (the profiles have one name each): the
	// attachment an alternation of the two paths after their common
	// directory (an attachment may not start with "{", which opens the
	// profile's body).
	loadShimProfile(t, parser, alternation(layers, prod))
	for _, cfg := range []struct {
		shim string
		cfg  attackConfig
	}{{layers, base}, {prod, production}} {
		if r := runAttack(t, e, probeDir, cfg.shim, cfg.cfg, label); !strings.Contains(r.evidence, "glove-sandbox") {
			t.Errorf("%s: the program's AppArmor label: %s; want glove-sandbox", cfg.cfg.name, r.evidence)
		}
		for _, c := range userns {
			r := runAttack(t, e, probeDir, cfg.shim, cfg.cfg, c)
			if !r.stopped {
				t.Errorf("%s under the profiles, %s: not stopped (%s)", c.name, cfg.cfg.name, r.evidence)
			}
			t.Logf("%s, %s: %s", cfg.cfg.name, c.name, r.evidence)
		}
		for _, c := range attackCases {
			if c.control {
				if r := runAttack(t, e, probeDir, cfg.shim, cfg.cfg, c); r.stopped {
					t.Errorf("positive control %s under the profiles, %s: stopped (%s)", c.name, cfg.cfg.name, r.evidence)
				}
			}
		}
	}
}

func TestAlternation(t *testing.T) {
	for _, c := range [][3]string{
		{"/lane/tests/prebuilt/layers-shim/glove-shim", "/lane/tests/prebuilt/prefix/libexec/glove/glove-shim", "/lane/tests/prebuilt/{layers-shim/glove-shim,prefix/libexec/glove/glove-shim}"},
		{"/a/x", "/b/x", "/{a/x,b/x}"},
		{"/t/glove-shim", "/t/glove-shim2", "/t/{glove-shim,glove-shim2}"},
	} {
		if got := alternation(c[0], c[1]); got != c[2] {
			t.Errorf("alternation(%q, %q) = %q, want %q", c[0], c[1], got, c[2])
		}
	}
}
