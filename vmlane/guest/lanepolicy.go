// SPDX-License-Identifier: Apache-2.0

package guest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/localservice"
	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
)

// The lane's policy: one runtime template per program (a policy fixes a
// template's arguments, so each sandboxed shell script is a template of
// its own), one resource profile per limit under test (a plan repeats a
// profile's numbers exactly), and three path aliases.

// PolicyRevision is the lane policy's revision.
const PolicyRevision = 1

// RuntimeID is every template's runtime: not a native-skill runtime, so
// HOME is the first writable grant's target and no private home is made.
const RuntimeID = "lane-sh"

// LocalServicesFile is the lane's --local-services file during the
// stream check: the glove user's, mode 0600, in the lane's own tree
// (removed before purge, so nothing of it is left in /etc/glove).
const LocalServicesFile = DataDir + "/local-services.json"

// LocalServices is the lane's local-services configuration: its upstream
// (UpstreamSocket) under StreamAlias over inherited-stream-v1, for the
// lane's runtime (RuntimeID) alone, with no guest-channel binding.
func LocalServices() []byte {
	t := localservice.TransportInheritedStream
	return localservice.Canonical(&localservice.Config{SchemaVersion: localservice.SchemaVersion, Transport: &t,
		Services: []localservice.Service{{Alias: StreamAlias, Socket: UpstreamSocket, RuntimeIDs: []string{RuntimeID}}}})
}

// Alias names.
const (
	AliasWorkspace = "workspace" // ephemeral_write copy
	AliasRetained  = "retained"  // retained_write copy (glove-loopext4)
	AliasBig       = "big"       // ephemeral_write copy of a tree larger than its quota
)

// Quotas of the aliases.
const (
	WorkspaceBytes = 4 << 20
	RetainedBytes  = 16 << 20
	BigBytes       = 1 << 20
	BigFileBytes   = 2 << 20 // the file in the big tree
)

// Template is one runtime template: /bin/sh -c Script.
type Template struct {
	ID      string
	Script  string
	Aliases []string
}

// Templates are the lane's programs. Each runs under the sandbox's
// dash with only the read-only paths of the policy (the C library, the
// loader, and the few utilities LaneUtilities lists).
var Templates = []Template{
	{"t-copybig", `echo should-not-run; exit 0`, []string{AliasBig}},
	{"t-cpu", `echo ready; while :; do :; done`, []string{AliasWorkspace}},
	{"t-disk", `echo ready; head -c 16777216 /dev/zero > /tmp/fill; echo "tmp-rc=$?"; ` +
		`head -c 16777216 /dev/zero > /workspace/fill; echo "ws-rc=$?"; echo disk-done; exit 0`, []string{AliasWorkspace}},
	// The bomb runs in a subshell; the program itself then waits in
	// read (a builtin: it never forks, so it outlives the bomb and the
	// session ends by its wall time, not by dash's "Cannot fork" exit).
	{"t-forkbomb", `echo ready; (b() { b | b & }; b); read x`, []string{AliasWorkspace}},
	{"t-hello", `echo lane-hello; echo "home=$HOME cwd=$PWD"; read s < /workspace/seed.txt && echo "seed=$s"; ` +
		`(echo x > /usr/lane-pwned) 2>/dev/null && echo WROTE-USR || echo usr-refused; ` +
		`echo note > /workspace/note && echo ws-writable; exit 7`, []string{AliasWorkspace}},
	{"t-mem", `echo ready; x=0123456789abcdef; while :; do x="$x$x"; done`, []string{AliasWorkspace}},
	{"t-output", `echo ready; l=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef; while :; do echo "$l$l"; done`, []string{AliasWorkspace}},
	{"t-resize", `trap 'stty size' WINCH; echo ready; while :; do sleep 0.2; done`, []string{AliasWorkspace}},
	{"t-retained-read", `for f in /retained/*; do echo "has $f"; done; exit 0`, []string{AliasRetained}},
	{"t-retained-sleep", `echo lane-pre-reboot > /retained/pre-reboot.txt && echo wrote; echo started; exec sleep 3600`, []string{AliasRetained}},
	{"t-retained-write", `read s < /retained/seed.txt && echo "seed=$s"; echo lane-retained-data > /retained/new.txt && echo wrote-new; ` +
		`for f in /retained/*; do echo "has $f"; done; exit 0`, []string{AliasRetained}},
	{"t-sleep", `echo ready; exec sleep 600`, []string{AliasWorkspace}},
	{"t-stdin", `echo ready; read line; echo "got:$line"; exit 0`, []string{AliasWorkspace}},
	// One inherited-stream-v1 exchange through descriptor 3: a frame of
	// 9 bytes (length \011) "lane-ping"; the lane's upstream answers
	// "echo lane-ping\n" (15 bytes, so no byte of the length is a line
	// break for read; dash's read drops the NULs). It prints descriptor
	// 3's file status flags (fdinfo), then reads the answer once as any
	// program would; if that read fails (a non-blocking descriptor
	// answers EAGAIN before the answer is there), it retries.
	{"t-stream", `echo "fds=$GLOVE_LOCAL_SERVICE_FDS_V1 alias=$GLOVE_LOCAL_SERVICE_ALIAS"; ` +
		`while read -r l; do case $l in flags:*) echo "fd3-$l";; esac; done < /proc/self/fdinfo/3; ` +
		`printf '\000\000\000\011lane-ping' >&3 && read -r r <&3; echo "first-read-rc=$? reply=$r"; ` +
		`if [ -z "$r" ]; then i=0; while [ $i -lt 100000 ] && ! read -r r <&3; do i=$((i+1)); done; echo "retries=$i reply=$r"; fi; exit 0`,
		[]string{AliasWorkspace}},
}

// StreamRequest and StreamReply are the exchange of t-stream.
const (
	StreamRequest = "lane-ping"
	StreamReply   = "echo lane-ping\n"
)

// Profile names, and the profiles: each small in the one limit it tests,
// generous in the others (TCG emulation is about ten times slower than
// native).
const (
	ProfBasic  = "p-basic"
	ProfCPU    = "p-cpu"
	ProfDisk   = "p-disk"
	ProfLong   = "p-long"
	ProfMem    = "p-mem"
	ProfOutput = "p-output"
	ProfPids   = "p-pids"
	ProfWall   = "p-wall"
)

// MaxPlanTTLMs is the policy's max_plan_ttl_ms.
const MaxPlanTTLMs = 2 * 3600 * 1000

// Profiles are the lane's resource profiles, sorted by id.
func Profiles() []policy.ResourceProfile {
	basic := policy.ResourceProfile{ProfileID: ProfBasic, CPUTimeMs: 120_000, MemoryBytes: 256 << 20, Pids: 128,
		WallTimeMs: 300_000, DiskBytes: 16 << 20, TerminalOutputBytes: 1 << 20}
	with := func(id string, f func(p *policy.ResourceProfile)) policy.ResourceProfile {
		p := basic
		p.ProfileID = id
		f(&p)
		return p
	}
	return []policy.ResourceProfile{
		basic,
		with(ProfCPU, func(p *policy.ResourceProfile) { p.CPUTimeMs = 2000 }),
		with(ProfDisk, func(p *policy.ResourceProfile) { p.DiskBytes = 8 << 20 }),
		with(ProfLong, func(p *policy.ResourceProfile) { p.WallTimeMs = 3600_000 }),
		with(ProfMem, func(p *policy.ResourceProfile) { p.MemoryBytes = 64 << 20 }),
		with(ProfOutput, func(p *policy.ResourceProfile) { p.TerminalOutputBytes = 64 << 10 }),
		with(ProfPids, func(p *policy.ResourceProfile) { p.Pids = 64; p.WallTimeMs = 30_000; p.CPUTimeMs = 600_000 }),
		with(ProfWall, func(p *policy.ResourceProfile) { p.WallTimeMs = 10_000 }),
	}
}

// LaneUtilities are the host files besides the shell that the templates
// use, bound read-only at their own paths when the host has them as
// regular files.
var LaneUtilities = []string{"/usr/bin/head", "/usr/bin/sleep", "/usr/bin/stty"}

// Access tuples of the aliases.
var (
	workspaceAccess = policy.AccessTuple{Access: policy.AccessEphemeralWrite, Materialization: policy.MaterializationCopy,
		CreatePolicy: policy.CreateMustExist, CleanupPolicy: policy.CleanupRemove, MaxBytes: WorkspaceBytes}
	retainedAccess = policy.AccessTuple{Access: policy.AccessRetainedWrite, Materialization: policy.MaterializationCopy,
		CreatePolicy: policy.CreateMustExist, CleanupPolicy: policy.CleanupRetain, MaxBytes: RetainedBytes}
	bigAccess = policy.AccessTuple{Access: policy.AccessEphemeralWrite, Materialization: policy.MaterializationCopy,
		CreatePolicy: policy.CreateMustExist, CleanupPolicy: policy.CleanupRemove, MaxBytes: BigBytes}
)

// AliasDirs are the host trees of the aliases beneath the lane's data
// directory.
func AliasDirs(dataDir string) map[string]string {
	return map[string]string{
		AliasWorkspace: filepath.Join(dataDir, "workspace"),
		AliasRetained:  filepath.Join(dataDir, "retained"),
		AliasBig:       filepath.Join(dataDir, "big"),
	}
}

// LanePolicy is the policy with what plans need.
type LanePolicy struct {
	Policy *policy.Policy
}

// BuildPolicy makes the lane policy: shell is the canonical path of the
// host's /bin/sh, readOnly the read-only paths every template gets
// (sorted, as validation requires), dataDir the aliases' parent.
func BuildPolicy(shell string, readOnly []string, dataDir string) (*LanePolicy, error) {
	ro := slices.Clone(readOnly)
	slices.Sort(ro)
	var tmpls []policy.RuntimeTemplate
	for _, t := range Templates {
		aliases := slices.Clone(t.Aliases)
		slices.Sort(aliases)
		r := policy.RuntimeTemplate{
			RuntimeTemplateID: t.ID, RuntimeID: RuntimeID, SandboxBackend: policy.BackendLinuxProduction,
			AllowedPathAliases: aliases,
			Launch: policy.Launch{ExecutablePath: shell, Arguments: []string{"-c", t.Script},
				Environment: []string{"LANG=C", "TERM=dumb"}, ReadOnlyPaths: ro},
		}
		r.AdapterCommandDigest = policy.AdapterDigest(&r)
		tmpls = append(tmpls, r)
	}
	slices.SortFunc(tmpls, func(a, b policy.RuntimeTemplate) int {
		return strings.Compare(a.RuntimeTemplateID, b.RuntimeTemplateID)
	})
	dirs := AliasDirs(dataDir)
	aliases := []policy.PathAlias{
		{Alias: AliasBig, HostPath: dirs[AliasBig], TargetPath: "/big", MaxTTLSecs: 7200, Access: []policy.AccessTuple{bigAccess}},
		{Alias: AliasRetained, HostPath: dirs[AliasRetained], TargetPath: "/retained", MaxTTLSecs: 7200, Access: []policy.AccessTuple{retainedAccess}},
		{Alias: AliasWorkspace, HostPath: dirs[AliasWorkspace], TargetPath: "/workspace", MaxTTLSecs: 7200, Access: []policy.AccessTuple{workspaceAccess}},
	}
	pol := &policy.Policy{SchemaVersion: 1, Revision: PolicyRevision, MaxPlanTTLMs: MaxPlanTTLMs,
		RuntimeTemplates: tmpls, PathAliases: aliases, ResourceProfiles: Profiles()}
	if err := policy.Validate(pol); err != nil {
		return nil, fmt.Errorf("the lane policy does not validate: %w", err)
	}
	return &LanePolicy{Policy: pol}, nil
}

// Plan is a plan for template and profile granting every alias the
// template allows, expiring in ten minutes from now.
func (lp *LanePolicy) Plan(template, profile string, now time.Time) (*plan.Plan, error) {
	t, ok := lp.Policy.Template(template)
	if !ok {
		return nil, fmt.Errorf("no template %q", template)
	}
	var prof *policy.ResourceProfile
	for i := range lp.Policy.ResourceProfiles {
		if lp.Policy.ResourceProfiles[i].ProfileID == profile {
			prof = &lp.Policy.ResourceProfiles[i]
		}
	}
	if prof == nil {
		return nil, fmt.Errorf("no profile %q", profile)
	}
	pl := &plan.Plan{SchemaVersion: 1, PolicyRevision: lp.Policy.Revision,
		ExpiresAtUnixMs:   uint64(now.Add(10 * time.Minute).UnixMilli()),
		RuntimeTemplateID: t.RuntimeTemplateID, RuntimeID: t.RuntimeID, SandboxBackend: t.SandboxBackend,
		AdapterCommandDigest: t.AdapterCommandDigest, ResourceProfile: *prof}
	for _, a := range t.AllowedPathAliases {
		al, ok := lp.Policy.Alias(a)
		if !ok {
			return nil, fmt.Errorf("no alias %q", a)
		}
		tu := al.Access[0]
		pl.PathGrants = append(pl.PathGrants, plan.PathGrant{Alias: a, Access: tu.Access, Materialization: tu.Materialization,
			CreatePolicy: tu.CreatePolicy, CleanupPolicy: tu.CleanupPolicy, TTLSecs: 3600, MaxBytes: tu.MaxBytes})
	}
	if err := plan.Validate(pl, lp.Policy, now); err != nil {
		return nil, fmt.Errorf("the lane's plan for %s/%s does not validate: %w", template, profile, err)
	}
	return pl, nil
}

// Profile returns the named profile.
func (lp *LanePolicy) Profile(id string) policy.ResourceProfile {
	for _, p := range lp.Policy.ResourceProfiles {
		if p.ProfileID == id {
			return p
		}
	}
	return policy.ResourceProfile{}
}

// PlanObject is pl's canonical form as a JSON object (validate_plan's and
// create_session's "plan").
func PlanObject(pl *plan.Plan) (json.RawMessage, error) {
	b := plan.Canonical(pl)
	if !json.Valid(b) {
		return nil, fmt.Errorf("canonical plan is not JSON")
	}
	return json.RawMessage(b), nil
}

// ControllerDigest stands in for the controller's BLAKE3-256 correlation
// digest (Glove stores it as given): SHA-256 of the canonical plan and the
// session id.
func ControllerDigest(pl *plan.Plan, session string) string {
	h := sha256.New()
	h.Write(plan.Canonical(pl))
	h.Write([]byte(session))
	return hex.EncodeToString(h.Sum(nil))
}
