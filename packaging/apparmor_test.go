// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"os"

	"github.com/glove-sandbox/glove/packaging/apparmor"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// apparmorProfiles are the shipped AppArmor profile files.
func apparmorProfiles(t *testing.T) []string {
	t.Helper()
	all, err := filepath.Glob("apparmor/*")
	var files []string
	for _, f := range all {
		if !strings.HasSuffix(f, ".go") { // the embedding package
			files = append(files, f)
		}
	}
	if err != nil || len(files) == 0 {
		t.Fatalf("no profile in packaging/apparmor: %v", err)
	}
	return files
}

// TestAppArmorProfilesParse: apparmor_parser accepts every shipped
// profile (-Q: compile, load nothing; -K: no cache). The userns rule needs
// AppArmor 4.0: an older parser is no judge and the test skips, saying so
// (the VM lane's hardened cell, Debian 13, runs it with 4.1).
func TestAppArmorProfilesParse(t *testing.T) {
	parser, err := exec.LookPath("apparmor_parser")
	if err != nil {
		t.Skip("no apparmor_parser on this host (the VM lane's hardened cell has AppArmor 4.1)")
	}
	out, err := exec.Command(parser, "--version").Output()
	if err != nil {
		t.Fatalf("apparmor_parser --version: %v", err)
	}
	m := regexp.MustCompile(`version (\d+)\.`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("apparmor_parser --version: no version in %q", out)
	}
	if major, _ := strconv.Atoi(string(m[1])); major < 4 {
		t.Skipf("apparmor_parser %s is older than 4.0, which the userns rule needs (the VM lane's hardened cell has 4.1)", strings.TrimSpace(string(out)))
	}
	// The embedded copy (TestAppArmorEmbedded holds it to the file): the
	// VM lane's guests have no source tree.
	f := filepath.Join(t.TempDir(), "glove-shim")
	if err := os.WriteFile(f, []byte(apparmor.ShimProfile), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(parser, "-Q", "-K", f).CombinedOutput(); err != nil {
		t.Errorf("apparmor_parser -Q -K %s: %v\n%s", f, err, out)
	}
}

// TestAppArmorProfileRules holds glove-shim's profile to its purpose by
// reading it (a parser cannot say what a profile is for): glove-shim may
// create user namespaces, the program it executes gets glove-sandbox
// stacked (no_new_privs allows no other transition), which may not, and
// glove-sandbox keeps itself for what the program executes.
func TestAppArmorProfileRules(t *testing.T) {
	b := []byte(apparmor.ShimProfile)
	profiles := map[string]string{}
	var name string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "#") || l == "" {
			continue
		}
		if f := strings.Fields(l); f[0] == "profile" {
			name = f[1]
			continue
		}
		if l == "}" {
			name = ""
			continue
		}
		if name != "" {
			profiles[name] += l + "\n"
		}
	}
	shim, sandbox := profiles["glove-shim"], profiles["glove-sandbox"]
	if shim == "" || sandbox == "" {
		t.Fatalf("want profiles glove-shim and glove-sandbox, have %v", profiles)
	}
	for _, want := range []string{"userns,\n", "px -> glove-shim//&glove-sandbox,\n", "/usr/{,local/}libexec/glove/glove-shim ix,\n"} {
		if !strings.Contains(shim, want) {
			t.Errorf("glove-shim's profile lacks %q", want)
		}
	}
	if strings.Contains(sandbox, "userns") || regexp.MustCompile(`(?m)^(allow )?all,`).MatchString(sandbox) {
		t.Errorf("glove-sandbox may create user namespaces:\n%s", sandbox)
	}
	if regexp.MustCompile(`[pc]x\b|\bux\b`).MatchString(sandbox) || !strings.Contains(sandbox, "rwlkmix,") {
		t.Errorf("glove-sandbox must keep itself (ix) for what the program executes:\n%s", sandbox)
	}
	if !strings.Contains(apparmor.ShimProfile, "profile glove-shim "+apparmor.InstalledShim+" ") {
		t.Errorf("glove-shim's profile does not attach to %s", apparmor.InstalledShim)
	}
}

// TestAppArmorEmbedded: the profiles built into package apparmor are the
// shipped file, and it is the only profile file (the package and the RPM
// install packaging/apparmor/glove-shim by name).
func TestAppArmorEmbedded(t *testing.T) {
	files := apparmorProfiles(t)
	if len(files) != 1 || filepath.Base(files[0]) != "glove-shim" {
		t.Fatalf("packaging/apparmor holds %v; debian/rules and the RPM spec install glove-shim alone", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != apparmor.ShimProfile {
		t.Errorf("package apparmor's copy differs from %s", files[0])
	}
}
