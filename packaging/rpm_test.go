// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/captable/captext"
)

const specPath = "rpm/glove.spec"

// TestRPMSpecMatchesTable: the spec's committed %files lines of the
// executables are exactly what the capability table generates (go run
// ./packaging/cmd/glove-deb rpm-files -spec packaging/rpm/glove.spec
// -write renews them), so a row's capability, mode or group cannot
// change without the spec.
func TestRPMSpecMatchesTable(t *testing.T) {
	spec, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	want, err := RPMSpec(string(spec))
	if err != nil {
		t.Fatal(err)
	}
	if want != string(spec) {
		t.Errorf("%s: the block between %q and %q is not the table's; run go run ./packaging/cmd/glove-deb rpm-files -spec packaging/%s -write\nwant:\n%s",
			specPath, RPMBegin, RPMEnd, specPath, strings.Join(RPMFileLines(RPMPrefix), "\n"))
	}
	// Outside the block, no line may give an executable a mode or a
	// capability of its own, nor any file setuid or setgid.
	in := false
	for i, l := range strings.Split(string(spec), "\n") {
		switch strings.TrimSpace(l) {
		case RPMBegin:
			in = true
			continue
		case RPMEnd:
			in = false
			continue
		}
		if in || strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		if strings.Contains(l, "%caps(") {
			t.Errorf("%s:%d: %%caps outside the generated block: %s", specPath, i+1, l)
		}
		if m := regexp.MustCompile(`%(?:attr|defattr)\(\s*([0-7-]+)`).FindStringSubmatch(l); m != nil && len(m[1]) == 4 && m[1][0] != '0' {
			t.Errorf("%s:%d: setuid, setgid or sticky mode: %s", specPath, i+1, l)
		}
	}
}

func TestRPMSpecBlockErrors(t *testing.T) {
	for name, spec := range map[string]string{
		"no block":      "%files\n",
		"no end":        RPMBegin + "\n",
		"end first":     RPMEnd + "\n" + RPMBegin + "\n",
		"begin twice":   RPMBegin + "\n" + RPMBegin + "\n" + RPMEnd + "\n",
		"end twice":     RPMBegin + "\n" + RPMEnd + "\n" + RPMEnd + "\n",
		"nothing":       "",
		"marker inline": "x " + RPMBegin + "\n" + RPMEnd + "\n",
	} {
		if _, err := RPMSpec(spec); err == nil {
			t.Errorf("%s: RPMSpec accepted %q", name, spec)
		}
	}
}

// TestRPMBuild builds the RPM with rpmbuild, the spec's own way (from the
// repository root, rpmbuild -bb packaging/rpm/glove.spec, here with
// _topdir in a temporary directory), and checks what rpm says of it
// against the capability table: each helper's exact file capabilities,
// mode, owner and group, no capability on anything else, no setuid or
// setgid file, the file list, the conffiles, the scriptlets; then
// rpmlint with packaging/rpm/glove.rpmlintrc.
func TestRPMBuild(t *testing.T) {
	for _, tool := range []string{"rpmbuild", "rpm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipped: %s not found (Debian: apt-get install rpm; scripts/install-deps.sh test installs it)", tool)
		}
	}
	if testing.Short() {
		t.Skip("skipped in -short: builds every executable")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	top := t.TempDir()
	build := exec.Command("rpmbuild", "-bb", "packaging/rpm/glove.spec", "--define", "_topdir "+top)
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("rpmbuild -bb packaging/rpm/glove.spec: %v\n%s", err, tail(out, 60))
	}
	rpms, err := filepath.Glob(filepath.Join(top, "RPMS", "*", "glove-*.rpm"))
	if err != nil || len(rpms) != 1 {
		t.Fatalf("rpmbuild wrote %v (%v), want one glove-*.rpm in %s/RPMS", rpms, err, top)
	}
	pkg := rpms[0]

	t.Run("file capabilities", func(t *testing.T) { checkRPMCaps(t, pkg) })
	t.Run("modes and owners", func(t *testing.T) { checkRPMModes(t, pkg) })
	t.Run("file list", func(t *testing.T) { checkRPMFiles(t, pkg, repo) })
	t.Run("scriptlets", func(t *testing.T) { checkRPMScripts(t, pkg) })
	t.Run("rpmlint", func(t *testing.T) { checkRPMLint(t, pkg, repo) })
}

// rpmExecutables maps each installed path of the table to its row.
func rpmExecutables() map[string]captable.Entry {
	m := map[string]captable.Entry{}
	for _, e := range captable.Table {
		m[InstalledPath("/usr", e)] = e
	}
	return m
}

func checkRPMCaps(t *testing.T, pkg string) {
	rows := rpmExecutables()
	seen := map[string]bool{}
	for _, l := range lines(rpmQuery(t, "-qp", "--filecaps", pkg)) {
		path, caps, _ := strings.Cut(l, "\t")
		caps = strings.TrimSpace(caps)
		e, ok := rows[path]
		if !ok {
			if caps != "" {
				t.Errorf("%s: file capabilities %q; only the table's helpers may have any", path, caps)
			}
			continue
		}
		seen[path] = true
		if want := captext.SetcapText(e); normCaps(caps) != normCaps(want) {
			t.Errorf("%s: file capabilities %q, the table says %q", path, caps, want)
		}
	}
	for path := range rows {
		if !seen[path] {
			t.Errorf("%s: not in the package", path)
		}
	}
}

// normCaps puts a capability text in one order: rpm prints the names of
// a clause in capability-number order (libcap's cap_to_text), the table
// in alphabetical order, so "cap_sys_ptrace,cap_sys_admin=ep" and
// "cap_sys_admin,cap_sys_ptrace=ep" are the same set.
func normCaps(text string) string {
	var clauses []string
	for _, c := range strings.Fields(text) {
		names, flags, _ := strings.Cut(c, "=")
		n := strings.Split(names, ",")
		sort.Strings(n)
		f := strings.Split(flags, "")
		sort.Strings(f)
		clauses = append(clauses, strings.Join(n, ",")+"="+strings.Join(f, ""))
	}
	sort.Strings(clauses)
	return strings.Join(clauses, " ")
}

func TestRPMNormCaps(t *testing.T) {
	for _, c := range [][2]string{
		{"cap_sys_ptrace,cap_sys_admin=ep", "cap_sys_admin,cap_sys_ptrace=pe"},
		{"", ""},
		{"cap_a=p cap_b=ep", "cap_b=pe cap_a=p"},
	} {
		if normCaps(c[0]) != normCaps(c[1]) {
			t.Errorf("normCaps(%q) = %q, normCaps(%q) = %q", c[0], normCaps(c[0]), c[1], normCaps(c[1]))
		}
	}
	for _, c := range [][2]string{
		{"cap_sys_admin=ep", "cap_sys_admin,cap_dac_override=ep"},
		{"cap_sys_admin=ep", "cap_sys_admin=eip"},
		{"cap_sys_admin=ep", ""},
	} {
		if normCaps(c[0]) == normCaps(c[1]) {
			t.Errorf("normCaps(%q) = normCaps(%q) = %q", c[0], c[1], normCaps(c[0]))
		}
	}
}

func checkRPMModes(t *testing.T, pkg string) {
	rows := rpmExecutables()
	for _, l := range lines(rpmQuery(t, "-qp", "--qf", `[%{FILENAMES} %{FILEMODES:perms} %{FILEUSERNAME} %{FILEGROUPNAME}\n]`, pkg)) {
		f := strings.Fields(l)
		if len(f) != 4 {
			t.Errorf("rpm -qp --qf: unexpected line %q", l)
			continue
		}
		path, perms, owner, group := f[0], f[1], f[2], f[3]
		if strings.ContainsAny(perms, "sStT") {
			t.Errorf("%s: %s: setuid, setgid or sticky", path, perms)
		}
		want := "root root"
		if e, ok := rows[path]; ok {
			wantPerms := Mode(e).String()
			if perms != wantPerms {
				t.Errorf("%s: mode %s, the table says %s", path, perms, wantPerms)
			}
			if e.Helper {
				want = "root " + Group
			}
		}
		if owner+" "+group != want {
			t.Errorf("%s: owned by %s:%s, want %s", path, owner, group, strings.Replace(want, " ", ":", 1))
		}
	}
}

// checkRPMFiles: the package holds the .deb's files (the unit in
// /usr/lib/systemd/system, the documentation in rpm's places), the man
// pages and bash completion scripts the tree has, and nothing else; the
// example bounds and the AppArmor profiles are %config(noreplace).
func checkRPMFiles(t *testing.T, pkg, repo string) {
	want := []string{
		"/etc/glove",
		"/usr/lib/systemd/system/gloved.service",
		"/usr/lib/sysusers.d/glove.conf",
		"/usr/lib/tmpfiles.d/glove.conf",
		"/usr/libexec/glove",
		"/usr/share/doc/glove",
		"/usr/share/doc/glove/packaging.md",
		"/usr/share/licenses/glove",
		"/usr/share/licenses/glove/LICENSE",
	}
	for path := range rpmExecutables() {
		want = append(want, path)
	}
	bounds, err := filepath.Glob(filepath.Join(repo, "packaging/etc/glove/*.json"))
	if err != nil || len(bounds) == 0 {
		t.Fatalf("packaging/etc/glove/*.json: %v %v", bounds, err)
	}
	conf := map[string]bool{}
	for _, b := range bounds {
		p := "/etc/glove/" + filepath.Base(b)
		want = append(want, p)
		conf[p] = true
	}
	profiles, err := filepath.Glob(filepath.Join(repo, "packaging/apparmor/*"))
	if err != nil || len(profiles) == 0 {
		t.Fatalf("packaging/apparmor/*: %v %v", profiles, err)
	}
	for _, f := range profiles {
		if strings.HasSuffix(f, ".go") { // the embedding package, not a profile
			continue
		}
		p := "/etc/apparmor.d/" + filepath.Base(f)
		want = append(want, p)
		conf[p] = true
	}
	for _, sec := range []string{"1", "8"} {
		man, err := filepath.Glob(filepath.Join(repo, "docs/man/*."+sec))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range man {
			want = append(want, "/usr/share/man/man"+sec+"/"+filepath.Base(m)+".gz")
		}
	}
	for _, c := range []string{"glove", "gloved"} {
		if _, err := os.Stat(filepath.Join(repo, "packaging/completion", c)); err == nil {
			want = append(want, "/usr/share/bash-completion/completions/"+c)
		}
	}
	sort.Strings(want)

	var got []string
	for _, l := range lines(rpmQuery(t, "-qp", "--qf", `[%{FILENAMES} %{FILEFLAGS:fflags}\n]`, pkg)) {
		path, flags, _ := strings.Cut(l, " ")
		got = append(got, path)
		isConf := strings.Contains(flags, "c") && strings.Contains(flags, "n")
		if conf[path] != isConf {
			t.Errorf("%s: file flags %q; want %%config(noreplace) exactly for the example bounds and the AppArmor profiles", path, flags)
		}
	}
	sort.Strings(got)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("files in the package:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// checkRPMScripts: every scriptlet parses as sh, and none enables or
// starts the unit (it cannot start before the operator's files exist;
// the package never enables it). The user comes from the sysusers.d line
// in %pre, before rpm writes the helpers root:glove.
func checkRPMScripts(t *testing.T, pkg string) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("skipped: no sh")
	}
	scripts := map[string]string{}
	for _, tag := range []string{"PREIN", "POSTIN", "PREUN", "POSTUN"} {
		s := string(rpmQuery(t, "-qp", "--qf", "%{"+tag+"}", pkg))
		if s == "(none)" {
			t.Errorf("%s: no scriptlet", tag)
			continue
		}
		scripts[tag] = s
		cmd := exec.Command(sh, "-n")
		cmd.Stdin = strings.NewReader(s)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: sh -n: %v\n%s", tag, err, out)
		}
		var code []string // the commands, without the comments
		for _, l := range strings.Split(s, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "#") {
				code = append(code, l)
			}
		}
		for _, bad := range []string{"systemctl enable", "systemctl start", "systemctl preset", "systemctl restart", "systemctl try-restart", "setcap", "chmod", "chown", "chgrp"} {
			if strings.Contains(strings.Join(code, "\n"), bad) {
				t.Errorf("%s runs %q (rpm applies modes and capabilities; the unit is never enabled or started by the package)", tag, bad)
			}
		}
	}
	sysusers, err := os.ReadFile("sysusers.d/glove.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines(sysusers) {
		if !strings.HasPrefix(l, "#") && !strings.Contains(scripts["PREIN"], l) {
			t.Errorf("%%pre does not carry the sysusers.d line %q", l)
		}
	}
	for _, want := range []string{"/etc/glove/.setup-host", "exit 1"} {
		if !strings.Contains(scripts["PREIN"], want) {
			t.Errorf("%%pre lacks %q (the refusal over setup-host's bounds)", want)
		}
	}
	if !strings.Contains(scripts["POSTIN"], "systemd-tmpfiles --create /usr/lib/tmpfiles.d/glove.conf") {
		t.Errorf("%%post does not create the tmpfiles.d directories")
	}
}

// checkRPMLint runs rpmlint with the package's configuration and
// filters: no E: or W: line may be left (rpmlint reports a filter that
// matches nothing as an E: line of its own). One exception, while the
// Makefile cannot build position-independent executables (its PIE=1,
// which the spec passes, is another change of issue 34):
// position-independent-executable-suggested. It is not a filter, which
// rpmlint would report unused, and so fail, once the Makefile has PIE=1;
// once it does, the exception ends by itself and can be deleted.
func checkRPMLint(t *testing.T, pkg, repo string) {
	if _, err := exec.LookPath("rpmlint"); err != nil {
		t.Skip("skipped: rpmlint not found (Debian: apt-get install rpmlint; scripts/install-deps.sh test installs it)")
	}
	cmd := exec.Command("rpmlint", "-c", filepath.Join(repo, "packaging/rpm/rpmlint.toml"),
		"-r", filepath.Join(repo, "packaging/rpm/glove.rpmlintrc"), pkg)
	out, lintErr := cmd.CombinedOutput()
	t.Logf("rpmlint:\n%s", out)
	mk, err := os.ReadFile(filepath.Join(repo, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	noPIE := !bytes.Contains(mk, []byte("-buildmode=pie"))
	var left []string
	for _, l := range lines(out) {
		if !regexp.MustCompile(`^\S+: [EW]: `).MatchString(l) {
			continue
		}
		if noPIE && strings.Contains(l, ": W: position-independent-executable-suggested ") {
			t.Logf("tolerated while the Makefile has no -buildmode=pie: %s", l)
			continue
		}
		left = append(left, l)
	}
	if len(left) > 0 {
		t.Errorf("rpmlint lines without a filter in packaging/rpm/glove.rpmlintrc:\n%s", strings.Join(left, "\n"))
	}
	// rpmlint exits non-zero for the lines filtered too; only a run that
	// did not reach its summary line is a failure of its own.
	if lintErr != nil && !bytes.Contains(out, []byte(" packages and ")) {
		t.Errorf("rpmlint: %v", lintErr)
	}
}

func rpmQuery(t *testing.T, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("rpm", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("rpm %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return stdout.Bytes()
}

func lines(b []byte) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

func tail(b []byte, n int) string {
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}
