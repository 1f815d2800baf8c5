// SPDX-License-Identifier: Apache-2.0

package policy

// The resource profiles Glove ships: `glove run --profile` offers them,
// the demo policy (scripts/demopolicy) carries the harness profile, and
// docs/policy.md ("Shipped profiles") lists them. Each must launch under
// the bounds Glove ships (packaging/etc/glove and scripts/setup-host.sh,
// glove-shim's 32 extra tasks counted): TestShippedProfilesFitShippedBounds
// in packaging checks every one with the helpers' own bounds checks, so a
// profile and the bounds cannot drift apart again.
var (
	// ProfileSmall is for probes and short commands.
	ProfileSmall = ResourceProfile{ProfileID: "small", CPUTimeMs: 60_000, MemoryBytes: 512 << 20, Pids: 256,
		WallTimeMs: 10 * 60_000, DiskBytes: 256 << 20, TerminalOutputBytes: 16 << 20}
	// ProfileMedium is for builds and test suites.
	ProfileMedium = ResourceProfile{ProfileID: "medium", CPUTimeMs: 10 * 60_000, MemoryBytes: 2 << 30, Pids: 1024,
		WallTimeMs: 60 * 60_000, DiskBytes: 2 << 30, TerminalOutputBytes: 256 << 20}
	// ProfileHarness is one model-backed turn of an agent harness (codex,
	// claude-code), sized from what they were measured to use:
	//   - wall time 5 minutes: a turn spends most of it waiting on the
	//     model; CPU time as much (one core's worth over the turn) for
	//     the harness and the tools it runs;
	//   - memory 2 GiB: claude -p peaked at 129 MB; the rest is for the
	//     tools a turn runs and for what it writes into its scratch,
	//     which is charged to its memory too (docs/sessions.md);
	//   - pids 512: both harnesses are multi-threaded (every thread is a
	//     task) and each tool call is a shell and its children;
	//   - disk 4 GiB: the private home is in the scratch, and codex
	//     doctor wants 1 GiB free in CODEX_HOME after /tmp and the
	//     workspace copy took theirs (the harness's own 250-315 MB
	//     executable is a read-only bind, not counted);
	//   - terminal output 64 MiB: a TUI redraws the screen as it streams.
	ProfileHarness = ResourceProfile{ProfileID: "harness", CPUTimeMs: 5 * 60_000, MemoryBytes: 2 << 30, Pids: 512,
		WallTimeMs: 5 * 60_000, DiskBytes: 4 << 30, TerminalOutputBytes: 64 << 20}
)

// ShippedProfiles returns the shipped profiles, sorted by profile_id (as
// a policy's resource_profiles must be).
func ShippedProfiles() []ResourceProfile {
	return []ResourceProfile{ProfileHarness, ProfileMedium, ProfileSmall}
}

// The guided starter policy's plan lifetime and profiles (`glove setup
// service` writes them; the reference's session-policy guided shape): a
// ten-minute max_plan_ttl_ms, a two-minute `small` profile for probes
// and short turns, and an explicit five-minute `interactive` profile for
// model-backed turns that spend most of their lifetime waiting on
// egress. The plan lifetime exceeds both wall times by far more than
// LaunchHeadroomMs, so a plan of either can be approved and launched.
// TestShippedProfilesFitShippedBounds (packaging) checks both against
// the shipped helper bounds, as it does the shipped profiles.
const GuidedMaxPlanTTLMs = 10 * 60_000

var (
	// GuidedSmall is ProfileSmall with two minutes of wall time: a probe
	// or a short turn that has not ended in two minutes is stuck.
	GuidedSmall = ResourceProfile{ProfileID: "small", CPUTimeMs: 60_000, MemoryBytes: 512 << 20, Pids: 256,
		WallTimeMs: 2 * 60_000, DiskBytes: 256 << 20, TerminalOutputBytes: 16 << 20}
	// GuidedInteractive is ProfileHarness's measured sizes (one
	// model-backed turn) under the name the guided shape gives it.
	GuidedInteractive = ResourceProfile{ProfileID: "interactive", CPUTimeMs: 5 * 60_000, MemoryBytes: 2 << 30, Pids: 512,
		WallTimeMs: 5 * 60_000, DiskBytes: 4 << 30, TerminalOutputBytes: 64 << 20}
)

// GuidedProfiles returns the guided starter policy's profiles, sorted by
// profile_id.
func GuidedProfiles() []ResourceProfile {
	return []ResourceProfile{GuidedInteractive, GuidedSmall}
}
