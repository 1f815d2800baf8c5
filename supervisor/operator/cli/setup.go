// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/sys/unix"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/supervisor/state/store"
)

const usageSetupService = "usage: glove setup service [--runtime R (--executable PATH | --search-path DIR...) [--template-id ID]" +
	" [--arg A]... [--env NAME=VALUE]... [--read-only-path P]...] [--config-dir DIR] [--user NAME] [--session-store DIR]"

// helpSetupService is what `glove setup service --help` prints.
const helpSetupService = usageSetupService + `

As root, write the three files gloved's unit asserts, each only if it is
missing: the receipt key (32 random bytes; the service user's, mode
0600), gloved.env with a fresh GLOVED_RECEIPT_ANCHOR (root's, mode
0644), and a starter session policy (the service user's, mode 0600) for
the runtime R: one runtime template as glove policy generate builds it,
max_plan_ttl_ms ten minutes, a two-minute "small" profile and a
five-minute "interactive" one. An existing file is never replaced; with
all three present nothing changes. The anchor is printed once, when it
is written, for the controller; the key is never printed.

  --runtime R             the template's runtime_id (needed only when the
                          policy is missing); with --search-path a
                          runtime_discovery value
  --executable PATH       a pinned executable (absolute; links resolved)
  --search-path DIR       a discovery directory (repeatable, in order);
                          for a staged runtime, glove policy stage's
                          search_path
  --template-id ID        the runtime_template_id (default: R)
  --arg A, --env N=V, --read-only-path P
                          as glove policy generate (repeatable)
  --config-dir DIR        where the files go (default /etc/glove)
  --user NAME             the service user (default glove)
  --session-store DIR     gloved's session store (default
                          /var/lib/glove/store): a new key and anchor are
                          refused while it holds a receipt journal

Exit 0 when the files are in place (written or already there); 1 for a
refusal or a failure, 2 for a usage fault, each with one
"glove: setup service:" line on stderr.`

// Where the unit (packaging/systemd/gloved.service) looks for the files.
const (
	setupConfigDir  = "/etc/glove"
	setupPolicyName = "session-policy.json"
	setupKeyName    = "receipt.key"
	setupEnvName    = "gloved.env"
	setupStoreDir   = "/var/lib/glove/store"
	// setupKeyBytes is what the docs told operators to write by hand
	// (head -c 32 /dev/urandom): store.MinKeyBytes, an HMAC-SHA256 key's
	// full strength.
	setupKeyBytes = store.MinKeyBytes
	anchorVar     = "GLOVED_RECEIPT_ANCHOR"
)

// setupEuid is os.Geteuid; a test replaces it to see the refusal as root.
var setupEuid = os.Geteuid

// setupFault is a refusal or a failure: exit 1.
type setupFault struct{ error }

// setupOptions is one run of `glove setup service`.
type setupOptions struct {
	configDir, storeDir string
	// uid, gid: the service user's, which owns the key and the policy.
	uid, gid int
	user     string
	// template builds the starter policy's template; nil when no
	// --runtime was given.
	template *generateInput
	rand     io.Reader
}

// setupFlags are glove setup service's flags.
type setupFlags struct {
	configDir, userName, storeDir, runtime, executable, templateID string
	searchDirs, arguments, env, readOnly                           listFlag
}

func (o *setupFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&o.configDir, "config-dir", setupConfigDir, "directory of the three files")
	fs.StringVar(&o.userName, "user", "glove", "the service user")
	fs.StringVar(&o.storeDir, "session-store", setupStoreDir, "gloved's session store")
	fs.StringVar(&o.runtime, "runtime", "", "the starter policy's runtime_id")
	fs.StringVar(&o.executable, "executable", "", "pinned executable")
	fs.StringVar(&o.templateID, "template-id", "", "runtime_template_id (default: the runtime)")
	fs.Var(&o.searchDirs, "search-path", "discovery search directory (repeatable)")
	fs.Var(&o.arguments, "arg", "argument (repeatable)")
	fs.Var(&o.env, "env", "NAME=VALUE (repeatable)")
	fs.Var(&o.readOnly, "read-only-path", "read-only dependency path (repeatable)")
}

// setupServiceCommand runs `glove setup service`.
func setupServiceCommand(args []string, stdout, stderr io.Writer) int {
	var f setupFlags
	fs := newFlags("setup service")
	f.define(fs)
	if code, done := parseFlagsHelp(fs, args, stdout, stderr, usageSetupService, helpSetupService); done {
		return code
	}
	configDir, userName, storeDir := &f.configDir, &f.userName, &f.storeDir
	runtime, executable, templateID := &f.runtime, &f.executable, &f.templateID
	searchDirs, arguments, env, readOnly := f.searchDirs, f.arguments, f.env, f.readOnly
	usageFault := func(msg string) int {
		fmt.Fprintf(stderr, "glove: setup service: %s\n%s\n", msg, usageSetupService)
		return ExitUsage
	}
	switch {
	case *runtime == "" && (*executable != "" || len(searchDirs) > 0 || *templateID != "" || len(arguments) > 0 || len(env) > 0 || len(readOnly) > 0):
		return usageFault("the template's flags go with --runtime")
	case *runtime != "" && *executable != "" && len(searchDirs) > 0:
		return usageFault("--executable and --search-path are exclusive: give exactly one")
	case *runtime != "" && *executable == "" && len(searchDirs) == 0:
		return usageFault("--runtime needs one of --executable or --search-path")
	case !filepath.IsAbs(*configDir) || filepath.Clean(*configDir) != *configDir:
		return usageFault(fmt.Sprintf("--config-dir %q is not an absolute canonical path", *configDir))
	case !filepath.IsAbs(*storeDir) || filepath.Clean(*storeDir) != *storeDir:
		return usageFault(fmt.Sprintf("--session-store %q is not an absolute canonical path", *storeDir))
	}
	// Root only: the files go to root's /etc/glove and are given to the
	// service user, which only root may do.
	if setupEuid() != 0 {
		fmt.Fprintln(stderr, "glove: setup service: must run as root (it writes root's configuration directory and gives files to the service user)")
		return ExitFail
	}
	uid, gid, err := serviceUser(*userName)
	if err != nil {
		fmt.Fprintf(stderr, "glove: setup service: %v\n", err)
		return ExitFail
	}
	o := setupOptions{configDir: *configDir, storeDir: *storeDir, uid: uid, gid: gid, user: *userName, rand: rand.Reader}
	if *runtime != "" {
		id := *templateID
		if id == "" {
			id = *runtime
		}
		o.template = &generateInput{runtime: *runtime, executable: *executable, templateID: id,
			backend: policy.BackendLinuxProduction, searchDirs: searchDirs, arguments: arguments, env: env, readOnly: readOnly}
	}
	if err := setupService(o, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "glove: setup service: %v\n", err)
		var gf *generateFault
		if errors.As(err, &gf) {
			return ExitUsage
		}
		return ExitFail
	}
	return ExitOK
}

// serviceUser looks up the service user's uid and primary gid (the
// unit's User= and Group=).
func serviceUser(name string) (int, int, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, fmt.Errorf("look up the service user: %w (is the package installed?)", err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return 0, 0, fmt.Errorf("look up the service user %s: uid %q: %w", name, u.Uid, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return 0, 0, fmt.Errorf("look up the service user %s: gid %q: %w", name, u.Gid, err)
	}
	if uid == 0 {
		// gloved must not run as root: its policy and key would then
		// be root's, and the unit's User= says otherwise.
		return 0, 0, fmt.Errorf("the service user %s is root", name)
	}
	return uid, gid, nil
}

// setupFile is one file setup service writes.
type setupFile struct {
	path     string
	data     []byte
	uid, gid int
	mode     os.FileMode
	// what says what it is, for the report (never its content).
	what string
}

// setupService writes whichever of the three files is missing, when
// that is consistent. Everything is decided and built before the first
// write, so a refusal writes nothing.
func setupService(o setupOptions, stdout, stderr io.Writer) error {
	if err := checkConfigDir(o.configDir); err != nil {
		return err
	}
	polPath := filepath.Join(o.configDir, setupPolicyName)
	keyPath := filepath.Join(o.configDir, setupKeyName)
	envPath := filepath.Join(o.configDir, setupEnvName)
	present := map[string]bool{}
	for _, p := range []string{polPath, keyPath, envPath} {
		_, err := os.Lstat(p)
		switch {
		case err == nil:
			present[p] = true
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("stat %s: %w", p, err)
		}
	}
	// The key and the anchor go together: the receipt journal is keyed
	// by the one and chained from the other, so a fresh half beside an
	// existing half would not be the pair the controller holds.
	if present[keyPath] != present[envPath] {
		have, missing := keyPath, envPath
		if present[envPath] {
			have, missing = envPath, keyPath
		}
		return setupFault{fmt.Errorf("%s exists but %s does not: the receipt key and the anchor are one pair, and a fresh %s would not match the existing one; refusing (restore %s, or remove %s to make a new pair)",
			have, missing, filepath.Base(missing), missing, have)}
	}
	var files []setupFile
	var anchor string
	if !present[keyPath] {
		// Threat: a new key and anchor over a store whose receipts are
		// keyed and chained from the old ones: gloved would refuse to
		// open it, and the controller's archive would no longer verify.
		j := filepath.Join(o.storeDir, receipt.FileName)
		if _, err := os.Lstat(j); err == nil {
			return setupFault{fmt.Errorf("%s and %s are missing but %s holds receipts under an earlier key and anchor; refusing to make a new pair (restore the files, or remove the session store)", keyPath, envPath, j)}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("stat %s: %w", j, err)
		}
		key := make([]byte, setupKeyBytes)
		a := make([]byte, 32)
		if _, err := io.ReadFull(o.rand, key); err != nil {
			return fmt.Errorf("read random bytes for the receipt key: %w", err)
		}
		if _, err := io.ReadFull(o.rand, a); err != nil {
			return fmt.Errorf("read random bytes for the anchor: %w", err)
		}
		anchor = hex.EncodeToString(a)
		files = append(files,
			setupFile{path: keyPath, data: key, uid: o.uid, gid: o.gid, mode: 0o600,
				what: fmt.Sprintf("the receipt key, %d random bytes", len(key))},
			// Root's and world-readable: systemd reads it as root, and
			// the anchor is not a secret (the controller verifies
			// receipts from it; the key is what authenticates them).
			setupFile{path: envPath, data: []byte(anchorVar + "=" + anchor + "\n"), uid: os.Geteuid(), gid: os.Getegid(), mode: 0o644,
				what: "the controller's receipt anchor, fresh"})
	}
	if !present[polPath] {
		if o.template == nil {
			return &generateFault{fmt.Sprintf("%s is missing: --runtime (with --executable or --search-path) names the runtime its starter policy is for", polPath)}
		}
		data, summary, err := starterPolicy(*o.template, stderr)
		if err != nil {
			return err
		}
		files = append(files, setupFile{path: polPath, data: data, uid: o.uid, gid: o.gid, mode: 0o600, what: summary})
	}
	for _, p := range []string{keyPath, envPath, polPath} {
		if present[p] {
			if err := checkKept(p, o); err != nil {
				return setupFault{err}
			}
		}
	}
	for _, f := range files {
		if err := writeNew(f); err != nil {
			return err
		}
	}
	for _, p := range []string{keyPath, envPath, polPath} {
		if present[p] {
			fmt.Fprintf(stdout, "kept %s: it exists; not changed\n", p)
		}
	}
	for _, f := range files {
		fmt.Fprintf(stdout, "wrote %s (%s; owner %s, mode %04o)\n", f.path, f.what, ownerName(f.uid, o), f.mode)
	}
	if len(files) == 0 {
		fmt.Fprintln(stdout, "nothing changed: all three files are in place")
	}
	if anchor != "" {
		fmt.Fprintf(stdout, "receipt anchor for the controller (printed this once; it is also in %s): %s\n", envPath, anchor)
	}
	fmt.Fprintln(stdout, "next: systemctl start gloved (systemctl enable gloved to start it at boot), then glove status")
	return nil
}

func ownerName(uid int, o setupOptions) string {
	if uid == o.uid {
		return o.user
	}
	if uid == 0 {
		return "root"
	}
	return strconv.Itoa(uid)
}

// starterPolicy builds the starter policy for the runtime: one template
// as glove policy generate builds it (checked against glove-mounter's
// source roots as glove policy validate checks it), the guided plan
// lifetime and profiles. It returns the file's bytes, decoded and
// validated again as gloved will read them, and a summary.
func starterPolicy(in generateInput, stderr io.Writer) ([]byte, string, error) {
	t, note, err := buildTemplate(in)
	if err != nil {
		var gf *generateFault
		if errors.As(err, &gf) {
			return nil, "", err
		}
		return nil, "", setupFault{fmt.Errorf("find the runtime: %w", err)}
	}
	if note != "" {
		fmt.Fprintf(stderr, "glove: setup service: note: %s\n", note)
	}
	pol := &policy.Policy{
		SchemaVersion:    policy.SchemaVersion,
		Revision:         1,
		MaxPlanTTLMs:     policy.GuidedMaxPlanTTLMs,
		RuntimeTemplates: []policy.RuntimeTemplate{*t},
		ResourceProfiles: policy.GuidedProfiles(),
	}
	// The aliases and destinations a template may allow are policy
	// members this starter does not have: buildTemplate leaves them
	// empty without --alias or --destination, which setup does not take.
	data, err := json.Marshal(pol, jsontext.WithIndent("  "))
	if err != nil {
		return nil, "", fmt.Errorf("encode the starter policy: %w", err)
	}
	data = append(data, '\n')
	back, err := policy.Decode(data)
	if err != nil {
		return nil, "", fmt.Errorf("decode the starter policy: %w", err)
	}
	if err := policy.Validate(back); err != nil {
		return nil, "", fmt.Errorf("validate the starter policy: %w", err)
	}
	if _, fault := checkSourceRoots(launchPaths("/runtime_templates/0", &back.RuntimeTemplates[0])); fault != nil {
		return nil, "", &generateFault{fault.Error()}
	}
	var profs []string
	for _, p := range back.ResourceProfiles {
		profs = append(profs, fmt.Sprintf("%s (wall time %s)", p.ProfileID, time.Duration(p.WallTimeMs)*time.Millisecond))
	}
	t0 := back.RuntimeTemplates[0]
	return data, fmt.Sprintf("the starter session policy: template %s of runtime %s, max_plan_ttl_ms %d (%s), profiles %s",
		t0.RuntimeTemplateID, t0.RuntimeID, back.MaxPlanTTLMs, time.Duration(back.MaxPlanTTLMs)*time.Millisecond, strings.Join(profs, ", ")), nil
}

// checkConfigDir requires the configuration directory to be a real
// directory owned by the running user (root) and writable by nobody
// else. Threat: a file written into a directory another user may write
// can be renamed away and replaced after it is written.
func checkConfigDir(dir string) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return setupFault{fmt.Errorf("the configuration directory: %w (is the package installed?)", err)}
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	switch {
	case !st.IsDir():
		return setupFault{fmt.Errorf("the configuration directory %s is not a directory (%s)", dir, st.Mode().Type())}
	case !ok || int(sys.Uid) != os.Geteuid():
		return setupFault{fmt.Errorf("the configuration directory %s is not owned by uid %d", dir, os.Geteuid())}
	case st.Mode().Perm()&0o022 != 0:
		return setupFault{fmt.Errorf("the configuration directory %s is group- or other-writable (mode %04o)", dir, st.Mode().Perm())}
	}
	return nil
}

// checkKept checks a file that is already there the way gloved will
// read it, so that a second run does not report "in place" for a file
// the service would refuse; it never changes the file.
func checkKept(path string, o setupOptions) error {
	switch filepath.Base(path) {
	case setupKeyName:
		// gloved's own reader (store.LoadKey), owner excepted: root runs
		// this, and the key is the service user's.
		data, err := policy.ReadProtectedOwnedBy(path, store.MaxKeyBytes, o.uid)
		if err == nil && len(data) < store.MinKeyBytes {
			err = fmt.Errorf("%d bytes, need %d to %d", len(data), store.MinKeyBytes, store.MaxKeyBytes)
		}
		if err != nil {
			return fmt.Errorf("%s exists but gloved would refuse it (it must be %s's, mode 0600, one link): %w; not changed", path, o.user, err)
		}
	case setupPolicyName:
		data, err := policy.ReadProtectedOwnedBy(path, policy.MaxPolicyBytes, o.uid)
		if err == nil {
			var p *policy.Policy
			if p, err = policy.Decode(data); err == nil {
				err = policy.Validate(p)
			}
		}
		if err != nil {
			return fmt.Errorf("%s exists but gloved would refuse it (it must be %s's, mode 0600, one link, and validate): %w; not changed", path, o.user, err)
		}
	case setupEnvName:
		st, err := os.Lstat(path)
		if err != nil {
			return fmt.Errorf("stat %s: %w", path, err)
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s exists but is not a regular file (%s); not changed", path, st.Mode().Type())
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		if _, err := envAnchor(data); err != nil {
			return fmt.Errorf("%s exists but %w; not changed", path, err)
		}
	}
	return nil
}

// envAnchor is the anchor a gloved.env sets (the last assignment, as
// systemd reads the file).
func envAnchor(data []byte) (string, error) {
	var anchor string
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if v, ok := strings.CutPrefix(l, anchorVar+"="); ok {
			anchor = v
		}
	}
	if !policy.ValidSHA256Hex(anchor) {
		return "", fmt.Errorf("sets no %s of 64 lowercase hex digits", anchorVar)
	}
	return anchor, nil
}

// writeNew writes f atomically and never over an existing file: a
// temporary file in the same directory (created exclusively, mode 0600
// until it is complete), owner and mode set, synced, then renamed with
// RENAME_NOREPLACE (a file that appeared since the check is left and
// reported, never replaced), and the directory synced so the name is
// durable. A failure removes the temporary file.
func writeNew(f setupFile) (err error) {
	dir := filepath.Dir(f.path)
	tmp, err := os.CreateTemp(dir, ".glove-setup-*")
	if err != nil {
		return fmt.Errorf("create a temporary file for %s: %w", f.path, err)
	}
	name := tmp.Name()
	defer func() {
		if err == nil {
			return
		}
		if cerr := tmp.Close(); cerr != nil && !errors.Is(cerr, os.ErrClosed) {
			err = errors.Join(err, fmt.Errorf("close %s: %w", name, cerr))
		}
		if rerr := os.Remove(name); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("remove %s: %w", name, rerr))
		}
	}()
	if _, err := io.Copy(tmp, bytes.NewReader(f.data)); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := tmp.Chown(f.uid, f.gid); err != nil {
		return fmt.Errorf("chown %s: %w", name, err)
	}
	if err := tmp.Chmod(f.mode); err != nil {
		return fmt.Errorf("chmod %s: %w", name, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", name, err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, name, unix.AT_FDCWD, f.path, unix.RENAME_NOREPLACE); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return setupFault{fmt.Errorf("%s appeared while setup ran; not replaced", f.path)}
		}
		return fmt.Errorf("rename %s to %s: %w", name, f.path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s to fsync it: %w", dir, err)
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return fmt.Errorf("fsync %s: %w", dir, serr)
	}
	if cerr != nil {
		return fmt.Errorf("close %s: %w", dir, cerr)
	}
	return nil
}
