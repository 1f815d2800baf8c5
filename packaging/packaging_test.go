// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/captable/captext"
	"github.com/glove-sandbox/glove/helpers/cgroup"
	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/loopext4"
	"github.com/glove-sandbox/glove/helpers/mounter"
	"github.com/glove-sandbox/glove/helpers/streamproxy"
	"github.com/glove-sandbox/glove/helpers/userns"
)

// helperLine is how the generated postinst names a helper; parsed
// independently of HelperLines so that a change to either shows here.
var helperLine = regexp.MustCompile(`^\s*glove_helper (\S+) (\S+)\s*$`)

func generatedPostinst(t *testing.T) string {
	t.Helper()
	tmpl, err := os.ReadFile("../debian/glove.postinst.in")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Postinst(string(tmpl), "/usr")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPostinstMatchesTable fails when the postinst the package ships
// and the capability table disagree: every helper row, and only those,
// gets exactly one glove_helper line with its path and setcap text, and
// nothing else in the script runs setcap or grants a mode.
func TestPostinstMatchesTable(t *testing.T) {
	got := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(generatedPostinst(t)))
	for sc.Scan() {
		l := sc.Text()
		if m := helperLine.FindStringSubmatch(l); m != nil {
			if _, dup := got[m[1]]; dup {
				t.Errorf("postinst names %s twice", m[1])
			}
			got[m[1]] = m[2]
			continue
		}
		code := strings.TrimSpace(l)
		if strings.HasPrefix(code, "#") {
			continue
		}
		if strings.Contains(code, "setcap ") && code != `setcap "$2" "$1"` {
			t.Errorf("postinst runs setcap outside glove_helper: %q", l)
		}
		if strings.Contains(code, "chmod") && code != `chmod 0750 "$1"` {
			t.Errorf("postinst changes a mode outside glove_helper: %q", l)
		}
		if strings.Contains(code, Marker) {
			t.Errorf("postinst still holds the marker: %q", l)
		}
	}
	want := map[string]string{}
	for _, e := range captable.Table {
		if !e.Helper {
			continue
		}
		caps := captext.SetcapText(e)
		if caps == "" {
			caps = NoCaps
		}
		want[filepath.Join("/usr", e.Dir, e.Binary)] = caps
	}
	for p, c := range want {
		if got[p] != c {
			t.Errorf("postinst: %s gets %q, the table says %q", p, got[p], c)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("postinst: %s is not a helper row of the table", p)
		}
	}
}

func TestPostinstMarker(t *testing.T) {
	for _, tmpl := range []string{"a\nb\n", "#@GLOVE_HELPERS@\n#@GLOVE_HELPERS@\n", "x #@GLOVE_HELPERS@\n"} {
		if _, err := Postinst(tmpl, "/usr"); err == nil {
			t.Errorf("Postinst(%q) accepted", tmpl)
		}
	}
}

// unitSettings reads the [Service] and [Unit] assignments of the unit.
func unitSettings(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile("systemd/gloved.service")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	out := map[string][]string{}
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || l[0] == '#' || l[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("unit: line %q", l)
		}
		out[k] = append(out[k], strings.Join(strings.Fields(v), " "))
	}
	return out
}

func one(t *testing.T, s map[string][]string, key string) string {
	t.Helper()
	if len(s[key]) != 1 {
		t.Fatalf("unit: %s set %d times, want once", key, len(s[key]))
	}
	return s[key][0]
}

// TestUnitCapabilities checks the unit against the table and against
// what the helpers need from the process that executes them.
func TestUnitCapabilities(t *testing.T) {
	s := unitSettings(t)
	if got, want := one(t, s, "CapabilityBoundingSet"), strings.Join(BoundingSet(), " "); got != want {
		t.Errorf("CapabilityBoundingSet=%s, the table's union is %s", got, want)
	}
	if want := []string{"CAP_DAC_OVERRIDE", "CAP_SYS_ADMIN"}; !slices.Equal(BoundingSet(), want) {
		t.Errorf("BoundingSet() = %v, want %v (a new capability in the table: review the unit)", BoundingSet(), want)
	}
	for key, want := range map[string]string{
		"AmbientCapabilities": "", "NoNewPrivileges": "no", "User": Group, "Group": Group, "Delegate": "yes",
	} {
		if got := one(t, s, key); got != want {
			t.Errorf("%s=%s, want %q", key, got, want)
		}
	}
	// For a unit whose User= is not root, systemd sets no_new_privs when
	// any of these is present, whatever NoNewPrivileges= says; the
	// helpers would then run without their file capabilities.
	for _, key := range []string{"SystemCallFilter", "SystemCallArchitectures", "SystemCallLog",
		"RestrictAddressFamilies", "RestrictNamespaces", "RestrictSUIDSGID", "RestrictRealtime",
		"LockPersonality", "MemoryDenyWriteExecute", "ProtectKernelModules", "ProtectKernelTunables",
		"ProtectKernelLogs", "ProtectClock", "ProtectHostname", "PrivateDevices", "DynamicUser",
		// and these would break the helpers or the sandbox directly
		"PrivateUsers", "ProtectControlGroups", "ProtectProc", "ProcSubset", "SecureBits"} {
		if v, ok := s[key]; ok {
			t.Errorf("unit sets %s=%v (see docs/packaging.md for why it must not)", key, v)
		}
	}
}

// TestUnitPaths keeps the unit, tmpfiles.d and the helpers' example
// bounds naming the same directories.
func TestUnitPaths(t *testing.T) {
	s := unitSettings(t)
	exec := one(t, s, "ExecStart")
	flags := map[string]string{}
	f := strings.Fields(exec)
	if f[0] != "/usr/bin/gloved" {
		t.Errorf("ExecStart runs %s", f[0])
	}
	for i := 1; i+1 < len(f); i += 2 {
		flags[f[i]] = f[i+1]
	}
	tmpfiles, err := os.ReadFile("tmpfiles.d/glove.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--session-store", "--materialization-root", "--runtime-dir"} {
		dir := flags[flag]
		if !strings.Contains(string(tmpfiles), "\nd "+dir+" 0700 glove glove -\n") {
			t.Errorf("%s %s: tmpfiles.d/glove.conf does not create it 0700 glove:glove", flag, dir)
		}
	}
	for _, flag := range []string{"--session-policy", "--receipt-key"} {
		if !slices.Contains(s["AssertPathExists"], flags[flag]) {
			t.Errorf("%s %s: no AssertPathExists= for it", flag, flags[flag])
		}
	}
	if flags["--receipt-anchor"] != "${GLOVED_RECEIPT_ANCHOR}" || one(t, s, "EnvironmentFile") != "/etc/glove/gloved.env" ||
		!slices.Contains(s["AssertPathExists"], "/etc/glove/gloved.env") {
		t.Errorf("the receipt anchor must come from /etc/glove/gloved.env, asserted present")
	}
	if got := one(t, s, "StateDirectory"); got != "glove/store glove/materialization" {
		t.Errorf("StateDirectory=%s", got)
	}

	var lc loopext4.Config
	decodeExample(t, "loopext4.json", &lc)
	if lc.MaterializationRoot != flags["--materialization-root"] {
		t.Errorf("loopext4.json materialization_root %s, gloved's --materialization-root %s", lc.MaterializationRoot, flags["--materialization-root"])
	}
	var cc cgroup.Config
	decodeExample(t, "cgroup.json", &cc)
	if cc.Parent != "/system.slice/gloved.service" {
		t.Errorf("cgroup.json parent %s: systemd delegates /system.slice/gloved.service", cc.Parent)
	}
}

// TestExampleConfigs decodes every shipped bounds file with its helper's
// own strict decoder and validation, and checks that the mounter may
// bind what `glove run` mounts (/usr and /etc).
func TestExampleConfigs(t *testing.T) {
	files, err := filepath.Glob("etc/glove/*.json")
	if err != nil {
		t.Fatal(err)
	}
	cfgs := map[string]helperkit.Config{
		"mounter.json": &mounter.Config{}, "loopext4.json": &loopext4.Config{},
		"cgroup.json": &cgroup.Config{}, "streamproxy.json": &streamproxy.Config{}, "userns.json": &userns.Config{},
	}
	if len(files) != len(cfgs) {
		t.Errorf("etc/glove holds %v, want the four helpers' bounds", files)
	}
	for name, cfg := range cfgs {
		decodeExample(t, name, cfg)
	}
	roots := cfgs["mounter.json"].(*mounter.Config).SourceRoots
	for _, r := range []string{"/etc", "/usr"} {
		if !slices.Contains(roots, r) {
			t.Errorf("mounter.json source_roots %v lacks %s (glove run binds it)", roots, r)
		}
	}
}

func decodeExample(t *testing.T, name string, cfg helperkit.Config) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("etc/glove", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := helperkit.DecodeStrict(data, cfg); err != nil {
		t.Errorf("%s: %v", name, err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("%s: %v", name, err)
	}
}

func TestTmpfilesAndSysusers(t *testing.T) {
	su, err := os.ReadFile("sysusers.d/glove.conf")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^u glove - "[^"]+" /nonexistent /usr/sbin/nologin$`).Match(su) {
		t.Errorf("sysusers.d/glove.conf does not create the system user glove:\n%s", su)
	}
	tf, err := os.ReadFile("tmpfiles.d/glove.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(tf), "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		f := strings.Fields(l)
		// postinst's fallback without systemd-tmpfiles reads exactly this shape.
		if len(f) != 6 || f[0] != "d" || !filepath.IsAbs(f[1]) || len(f[2]) != 4 || f[5] != "-" {
			t.Errorf("tmpfiles.d line %q: want `d PATH MODE USER GROUP -`", l)
		}
	}
}

func TestStageModes(t *testing.T) {
	bin, root := t.TempDir(), t.TempDir()
	for _, e := range captable.Table {
		if err := os.WriteFile(filepath.Join(bin, e.Binary), []byte("x"), 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := Stage(bin, root, "/usr"); err != nil {
		t.Fatal(err)
	}
	for _, e := range captable.Table {
		st, err := os.Stat(filepath.Join(root, "usr", e.Dir, e.Binary))
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o755)
		if e.Helper {
			want = 0o750
		}
		if st.Mode() != want {
			t.Errorf("%s: mode %v, want %v", e.Binary, st.Mode(), want)
		}
	}
}

// maintainerScripts are the scripts of the package's control archive:
// debian/glove.NAME (postinst generated from glove.postinst.in by
// debian/rules), each completed by dh_installdeb at its #DEBHELPER#
// line (TestDebInstallRunPurge checks the archive).
var maintainerScripts = []string{"preinst", "postinst", "prerm", "postrm"}

// TestMaintainerScripts keeps maintainerScripts and debian/ in step, and
// checks each script's shape: POSIX sh with set -e, parsed by sh -n, with
// exactly one #DEBHELPER# line on its own (where debhelper's snippets go;
// in postinst after the configure branch, so after create_user).
func TestMaintainerScripts(t *testing.T) {
	ents, err := os.ReadDir("../debian")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range ents {
		for _, s := range []string{"preinst", "postinst", "prerm", "postrm", "config", "triggers"} {
			if n := e.Name(); n == s || strings.HasPrefix(n, "glove."+s) || strings.HasPrefix(n, s+".") {
				files = append(files, n)
			}
		}
	}
	var want []string
	for _, s := range maintainerScripts {
		if s == "postinst" {
			s = "postinst.in"
		}
		want = append(want, "glove."+s)
	}
	slices.Sort(want)
	if !slices.Equal(files, want) {
		t.Errorf("debian/ holds the maintainer scripts %v, want %v (a new maintainer script: add it to maintainerScripts)", files, want)
	}
	for _, s := range maintainerScripts {
		text := ""
		if s == "postinst" {
			text = generatedPostinst(t)
		} else {
			b, err := os.ReadFile(filepath.Join("../debian", "glove."+s))
			if err != nil {
				t.Error(err)
				continue
			}
			text = string(b)
		}
		if !strings.HasPrefix(text, "#!/bin/sh\n") || !regexp.MustCompile(`(?m)^set -e$`).MatchString(text) {
			t.Errorf("%s: want #!/bin/sh and set -e", s)
		}
		if n := len(regexp.MustCompile(`(?m)^#DEBHELPER#$`).FindAllString(text, -1)); n != 1 {
			t.Errorf("%s: %d #DEBHELPER# lines, want one", s, n)
		}
		if s == "postinst" && strings.Index(text, "\n#DEBHELPER#\n") < strings.Index(text, "\tcreate_user\n") {
			t.Errorf("postinst: #DEBHELPER# (systemd-sysusers) before create_user: the .package-created-* markers would miss the user it creates")
		}
		cmd := exec.Command("sh", "-n")
		cmd.Stdin = strings.NewReader(text)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sh -n %s: %v\n%s", s, err, out)
		}
	}
}

// TestPreinstSetupHostMarker runs the preinst with /etc/glove replaced by
// a temporary directory: it refuses install and upgrade, in one line
// naming the fix, exactly when the marker scripts/setup-host.sh writes is
// there, and changes nothing.
func TestPreinstSetupHostMarker(t *testing.T) {
	src, err := os.ReadFile("../debian/glove.preinst")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "\nmarker=/etc/glove/.setup-host\n") {
		t.Fatal("preinst: no marker=/etc/glove/.setup-host line")
	}
	// The marker's name is setup-host's.
	sh, err := os.ReadFile("../scripts/setup-host.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sh), `marker="$CONFDIR/.setup-host"`) {
		t.Error(`scripts/setup-host.sh does not write the marker "$CONFDIR/.setup-host" that preinst checks`)
	}
	root := t.TempDir()
	etc := filepath.Join(root, "etc/glove")
	script := filepath.Join(root, "preinst")
	if err := os.WriteFile(script, []byte(strings.ReplaceAll(string(src), "/etc/glove", etc)), 0o755); err != nil {
		t.Fatal(err)
	}
	preinst := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command("sh", append([]string{script}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, stderr.String()
		case errors.As(err, &ee):
			return ee.ExitCode(), stderr.String()
		}
		t.Fatal(err)
		return 0, ""
	}
	for _, args := range [][]string{{"install"}, {"install", "0.0~git1"}, {"upgrade", "0.0~git1"}, {"abort-upgrade", "0.0~git2"}} {
		if code, errOut := preinst(args...); code != 0 || errOut != "" {
			t.Errorf("preinst %v without /etc/glove: status %d, stderr %q", args, code, errOut)
		}
	}
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, "cgroup.json"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, errOut := preinst("install"); code != 0 || errOut != "" {
		t.Errorf("preinst install with bounds but no marker: status %d, stderr %q", code, errOut)
	}
	if err := os.WriteFile(filepath.Join(etc, ".setup-host"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"install"}, {"install", "0.0~git1"}, {"upgrade", "0.0~git1"}} {
		code, errOut := preinst(args...)
		if code == 0 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "setup-host") ||
			!strings.Contains(errOut, "mv "+etc+" ") {
			t.Errorf("preinst %v with the marker: status %d, stderr %q; want a failure in one line naming setup-host and the mv", args, code, errOut)
		}
	}
	if code, _ := preinst("abort-upgrade", "0.0~git2"); code != 0 {
		t.Errorf("preinst abort-upgrade with the marker: status %d, want 0 (dpkg is undoing)", code)
	}
	if code, _ := preinst("bogus"); code == 0 {
		t.Error("preinst bogus: status 0")
	}
	ents, _ := os.ReadDir(etc)
	if len(ents) != 2 {
		t.Errorf("preinst changed %s: %v", etc, ents)
	}
}
