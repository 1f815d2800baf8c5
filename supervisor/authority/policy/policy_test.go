// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/internal/jsonedit"
)

const examplePath = "testdata/example-policy.json"

func exampleText(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustDecode(t testing.TB, s string) *Policy {
	t.Helper()
	p, err := Decode([]byte(s))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return p
}

func TestExamplePolicyValidates(t *testing.T) {
	p := mustDecode(t, exampleText(t))
	if err := Validate(p); err != nil {
		t.Fatal(err)
	}
	if got := AdapterDigest(&p.RuntimeTemplates[0]); got != p.RuntimeTemplates[0].AdapterCommandDigest {
		t.Fatalf("example digest %s, computed %s", p.RuntimeTemplates[0].AdapterCommandDigest, got)
	}
	want := "valid: revision 7, 1 runtime template, 1 path alias, 1 library destination, 1 resource profile, 1 egress policy, 1 tool policy, 1 secret handle"
	if got := Summary(p); got != want {
		t.Fatalf("summary %q, want %q", got, want)
	}
}

// redigest recomputes every template's adapter digest, so a case that
// changes launch fields tests the rule it names rather than the digest.
func redigest(t testing.TB, s string) string {
	t.Helper()
	p := mustDecode(t, s)
	for i := range p.RuntimeTemplates {
		p.RuntimeTemplates[i].AdapterCommandDigest = AdapterDigest(&p.RuntimeTemplates[i])
	}
	return string(Canonical(p))
}

func discovery(m ...mutation) mutation {
	base := []mutation{
		set("/runtime_templates/0/launch/executable_path", nil),
		set("/runtime_templates/0/launch/runtime_discovery", "codex"),
		set("/runtime_templates/0/launch/executable_search_paths", []any{"/usr/local/lib/glove-runtimes/codex/bin", "/usr/local/bin"}),
	}
	return all(append(base, m...)...)
}

func secondAlias(alias, host, target string) mutation {
	return set("/path_aliases/-", map[string]any{
		"alias": alias, "host_path": host, "target_path": target, "max_ttl_secs": 60,
		"access": []any{map[string]any{"access": "read_only", "materialization": "bind", "create_policy": "must_exist", "cleanup_policy": "none", "max_bytes": 0}},
	})
}

// credential sets the one credential policy; moreCredential adds one.
func credential(handle, src, dst string, max int) mutation {
	return set("/credential_policies", []any{map[string]any{"handle": handle, "source_path": src, "destination_path": dst, "max_bytes": max}})
}

func moreCredential(handle, src, dst string, max int) mutation {
	return set("/credential_policies/-", map[string]any{"handle": handle, "source_path": src, "destination_path": dst, "max_bytes": max})
}

// hostFiles sets the template's launch.host_files and redigests.
func hostFiles(members ...any) mutation {
	return all(set("/runtime_templates/0/launch/host_files", members), redigest)
}

// envCredential sets the one credential policy, delivered as variable
// name; moreEnvCredential adds one.
func envCredential(handle, src, name string, max int) mutation {
	return set("/credential_policies", []any{map[string]any{"handle": handle, "source_path": src, "environment_variable": name, "max_bytes": max}})
}

func moreEnvCredential(handle, src, name string, max int) mutation {
	return set("/credential_policies/-", map[string]any{"handle": handle, "source_path": src, "environment_variable": name, "max_bytes": max})
}

// gateway is the egress policy "model-gateway" with one endpoint at
// addr, allow_private, and upstream (a JSON object's members).
func gateway(addr string, allow bool, upstream map[string]any) mutation {
	return all(set("/egress_policy_ids", []any{"model-gateway", "no-network"}),
		set("/egress_policies", []any{map[string]any{"egress_policy_id": "model-gateway", "endpoints": []any{
			map[string]any{"address": addr, "allow_private": allow, "upstream": upstream}}}}))
}

var gatewaySocket = map[string]any{"unix_socket": "/run/glove-gateway/model.sock"}

func tuple(access, mat, create, cleanup string, max int) mutation {
	return set("/path_aliases/0/access/0", map[string]any{
		"access": access, "materialization": mat, "create_policy": create, "cleanup_policy": cleanup, "max_bytes": max,
	})
}

// badPolicies is the table of rejected policies: each a small mutation
// of the valid example, each with the exact JSON Pointer of the fault and
// a phrase of its message.
func badPolicies() []struct {
	name, ptr, phrase string
	m                 mutation
} {
	type c = struct {
		name, ptr, phrase string
		m                 mutation
	}
	return []c{
		// Strict decoding.
		{"unknown top-level member", "/revison", "unknown member", rep(`"revision": 7`, `"revison": 7`)},
		{"unknown launch member", "/runtime_templates/0/launch/argumnts", `unknown member "argumnts"`, rep(`"arguments"`, `"argumnts"`)},
		{"member name case", "/Revision", "unknown member", rep(`"revision": 7`, `"Revision": 7`)},
		{"duplicate key", "/revision", "duplicate member name", rep(`"revision": 7,`, `"revision": 7, "revision": 8,`)},
		{"duplicate nested key", "/path_aliases/0/alias", "duplicate member name", rep(`"alias": "workspace",`, `"alias": "workspace", "alias": "other",`)},
		{"trailing data", "", "trailing data", func(t testing.TB, s string) string { return s + "{}" }},
		{"trailing garbage", "", "trailing data", func(t testing.TB, s string) string { return s + "x" }},
		{"null value", "/max_plan_ttl_ms", "null", rep(`"max_plan_ttl_ms": 120000`, `"max_plan_ttl_ms": null`)},
		{"string for integer", "/revision", "found a string", rep(`"revision": 7`, `"revision": "7"`)},
		{"negative integer", "/resource_profiles/0/pids", "number -16", rep(`"pids": 16`, `"pids": -16`)},
		{"fractional integer", "/resource_profiles/0/pids", "number 16.0", rep(`"pids": 16`, `"pids": 16.0`)},
		{"not an object", "", "must be a JSON object", func(t testing.TB, s string) string { return "[" + s + "]" }},
		{"truncated", "/resource_profiles/0", "invalid JSON", func(t testing.TB, s string) string { return s[:strings.Index(s, `"pids"`)] }},
		// Top level.
		{"schema version", "/schema_version", "is not 1", rep(`"schema_version": 1`, `"schema_version": 2`)},
		{"revision zero", "/revision", "outside 1..", rep(`"revision": 7`, `"revision": 0`)},
		{"ttl without headroom", "/max_plan_ttl_ms", "by at least 1000", rep(`"max_plan_ttl_ms": 120000`, `"max_plan_ttl_ms": 2999`)},
		{"ttl over ceiling", "/max_plan_ttl_ms", "outside 1..", rep(`"max_plan_ttl_ms": 120000`, `"max_plan_ttl_ms": 172800001`)},
		{"no templates", "/runtime_templates", "at least one", set("/runtime_templates", []any{})},
		{"no profiles", "/resource_profiles", "at least one", set("/resource_profiles", []any{})},
		// Identifiers and canonical arrays.
		{"template id charset", "/runtime_templates/0/runtime_template_id", "not an identifier", rep(`"codex-safe"`, `"Codex-Safe"`)},
		{"identifier too long", "/runtime_templates/0/runtime_template_id", "not an identifier", rep(`"codex-safe"`, `"`+strings.Repeat("a", 65)+`"`)},
		{"templates unsorted", "/runtime_templates/1/runtime_template_id", "not sorted after", func(t testing.TB, s string) string {
			p := mustDecode(t, s)
			second := p.RuntimeTemplates[0]
			second.RuntimeTemplateID = "aaa"
			p.RuntimeTemplates = append(p.RuntimeTemplates, second)
			return string(Canonical(p))
		}},
		{"templates duplicate", "/runtime_templates/1/runtime_template_id", "duplicate", func(t testing.TB, s string) string {
			p := mustDecode(t, s)
			p.RuntimeTemplates = append(p.RuntimeTemplates, p.RuntimeTemplates[0])
			return string(Canonical(p))
		}},
		{"egress ids unsorted", "/egress_policy_ids/1", "not sorted after", set("/egress_policy_ids", []any{"no-network", "allow-git"})},
		{"tool ids duplicate", "/tool_policy_ids/1", "duplicate", set("/tool_policy_ids", []any{"sage-readonly", "sage-readonly"})},
		{"secret handle charset", "/secret_handles/0", "not an identifier", set("/secret_handles", []any{"codex token"})},
		// Credential policies.
		{"credential unknown member", "/credential_policies/0/owner", "unknown member", set("/credential_policies", []any{map[string]any{"handle": "codex-token", "source_path": "/etc/glove/codex.json", "destination_path": "/home/agent/.codex/auth.json", "max_bytes": 4096, "owner": 0}})},
		{"credential handle undeclared", "/credential_policies/0/handle", "not one of /secret_handles", credential("claude-token", "/etc/glove/codex.json", "/home/agent/.codex/auth.json", 4096)},
		{"credential handle charset", "/credential_policies/0/handle", "not an identifier", credential("Codex", "/etc/glove/codex.json", "/home/agent/.codex/auth.json", 4096)},
		{"credential source relative", "/credential_policies/0/source_path", "not absolute", credential("codex-token", "etc/glove/codex.json", "/home/agent/.codex/auth.json", 4096)},
		{"credential source dotdot", "/credential_policies/0/source_path", `contains ".."`, credential("codex-token", "/etc/glove/../shadow", "/home/agent/.codex/auth.json", 4096)},
		{"credential source kernel", "/credential_policies/0/source_path", "kernel interface", credential("codex-token", "/proc/self/environ", "/home/agent/.codex/auth.json", 4096)},
		{"credential source root", "/credential_policies/0/source_path", "root directory", credential("codex-token", "/", "/home/agent/.codex/auth.json", 4096)},
		{"credential destination outside home", "/credential_policies/0/destination_path", "not beneath the private home", credential("codex-token", "/etc/glove/codex.json", "/tmp/auth.json", 4096)},
		{"credential destination is home", "/credential_policies/0/destination_path", "not beneath the private home", credential("codex-token", "/etc/glove/codex.json", "/home/agent", 4096)},
		{"credential destination prefix", "/credential_policies/0/destination_path", "not beneath the private home", credential("codex-token", "/etc/glove/codex.json", "/home/agentx/auth.json", 4096)},
		{"credential destination unclean", "/credential_policies/0/destination_path", "not canonical", credential("codex-token", "/etc/glove/codex.json", "/home/agent/.codex//auth.json", 4096)},
		{"credential max_bytes zero", "/credential_policies/0/max_bytes", "outside 1..", credential("codex-token", "/etc/glove/codex.json", "/home/agent/.codex/auth.json", 0)},
		{"credential max_bytes huge", "/credential_policies/0/max_bytes", "outside 1..", credential("codex-token", "/etc/glove/codex.json", "/home/agent/.codex/auth.json", 1<<20+1)},
		{"credential max_bytes string", "/credential_policies/0/max_bytes", "", set("/credential_policies", []any{map[string]any{"handle": "codex-token", "source_path": "/etc/glove/codex.json", "destination_path": "/home/agent/.codex/auth.json", "max_bytes": "4096"}})},
		// launch.host_files.
		{"host_files unknown member", "/runtime_templates/0/launch/host_files/0", "not one of ca_certificates, name_service", hostFiles("etc")},
		{"host_files a path", "/runtime_templates/0/launch/host_files/0", "not one of", hostFiles("/etc/passwd")},
		{"host_files unsorted", "/runtime_templates/0/launch/host_files/1", "not sorted after", hostFiles("name_service", "ca_certificates")},
		{"host_files twice", "/runtime_templates/0/launch/host_files/1", "", hostFiles("ca_certificates", "ca_certificates")},
		{"host_files not a list", "/runtime_templates/0/launch/host_files", "", set("/runtime_templates/0/launch/host_files", "ca_certificates")},
		{"host_files digest not updated", "/runtime_templates/0/adapter_command_digest", "does not match the launch fields", set("/runtime_templates/0/launch/host_files", []any{"ca_certificates"})},
		{"host_files read-only path /etc", "/runtime_templates/0/launch/read_only_paths/0", `"/etc" equals /etc, which host_files provide`,
			all(set("/runtime_templates/0/launch/read_only_paths", []any{"/etc"}), hostFiles("name_service"))},
		{"host_files read-only path beneath /etc", "/runtime_templates/0/launch/read_only_paths/0", "lies beneath /etc",
			all(set("/runtime_templates/0/launch/read_only_paths", []any{"/etc/ssl"}), hostFiles("ca_certificates"))},
		{"host_files read-only path beneath a CA directory", "/runtime_templates/0/launch/read_only_paths/0", "lies beneath /usr/share/ca-certificates",
			all(set("/runtime_templates/0/launch/read_only_paths", []any{"/usr/share/ca-certificates/mozilla"}), hostFiles("ca_certificates"))},
		{"host_files read-only path is a CA directory", "/runtime_templates/0/launch/read_only_paths/0", "equals /usr/local/share/ca-certificates",
			all(set("/runtime_templates/0/launch/read_only_paths", []any{"/usr/local/share/ca-certificates"}), hostFiles("ca_certificates"))},
		{"host_files executable in /etc", "/runtime_templates/0/launch/executable_path", "lies beneath /etc",
			all(set("/runtime_templates/0/launch/executable_path", "/etc/glove/bin/harness"), hostFiles("name_service"))},
		{"host_files executable in a CA directory", "/runtime_templates/0/launch/executable_path", "lies beneath /usr/share/ca-certificates",
			all(set("/runtime_templates/0/launch/executable_path", "/usr/share/ca-certificates/x"), hostFiles("ca_certificates"))},
		{"host_files search path in /etc", "/runtime_templates/0/launch/executable_search_paths/0", `"/etc/codex" lies beneath /etc`,
			all(discovery(set("/runtime_templates/0/launch/executable_search_paths", []any{"/etc/codex"})), hostFiles("ca_certificates"))},
		{"host_files alias target in /etc", "/runtime_templates/0/allowed_path_aliases/0", `the target_path "/etc/work" of alias "workspace" lies beneath /etc`,
			all(set("/path_aliases/0/target_path", "/etc/work"), hostFiles("name_service"))},
		{"host_files destination over a CA directory", "/runtime_templates/0/allowed_projection_destinations/0", `the target_path "/usr/share" of destination "libraries" contains /usr/share/ca-certificates`,
			all(set("/library_projection_destinations/0/target_path", "/usr/share"), hostFiles("ca_certificates"))},
		// Credentials delivered as an environment variable.
		{"credential both destination and variable", "/credential_policies/0", "exactly one of destination_path and environment_variable",
			set("/credential_policies", []any{map[string]any{"handle": "codex-token", "source_path": "/etc/glove/k", "destination_path": "/home/agent/k", "environment_variable": "OPENAI_API_KEY", "max_bytes": 64}})},
		{"credential neither destination nor variable", "/credential_policies/0", "exactly one of destination_path and environment_variable",
			set("/credential_policies", []any{map[string]any{"handle": "codex-token", "source_path": "/etc/glove/k", "max_bytes": 64}})},
		{"credential variable charset", "/credential_policies/0/environment_variable", "is not a variable name", envCredential("codex-token", "/etc/glove/k", "OPENAI-API-KEY", 64)},
		{"credential variable leading digit", "/credential_policies/0/environment_variable", "is not a variable name", envCredential("codex-token", "/etc/glove/k", "1KEY", 64)},
		{"credential variable with value", "/credential_policies/0/environment_variable", "is not a variable name", envCredential("codex-token", "/etc/glove/k", "KEY=x", 64)},
		{"credential variable too long", "/credential_policies/0/environment_variable", "is not a variable name", envCredential("codex-token", "/etc/glove/k", strings.Repeat("K", 256), 64)},
		{"credential variable GLOVE_", "/credential_policies/0/environment_variable", "set by Glove itself", envCredential("codex-token", "/etc/glove/k", "GLOVE_KEY", 64)},
		{"credential variable HOME", "/credential_policies/0/environment_variable", "set by Glove itself", envCredential("codex-token", "/etc/glove/k", "HOME", 64)},
		{"credential variable CODEX_HOME", "/credential_policies/0/environment_variable", "set by Glove itself", envCredential("codex-token", "/etc/glove/k", "CODEX_HOME", 64)},
		{"credential variable PATH", "/credential_policies/0/environment_variable", "set by Glove itself", envCredential("codex-token", "/etc/glove/k", "PATH", 64)},
		{"credential variable TERM", "/credential_policies/0/environment_variable", "set by Glove itself", envCredential("codex-token", "/etc/glove/k", "TERM", 64)},
		{"credential variable set by a template", "/credential_policies/0/environment_variable", `also set by the environment of runtime template "codex-safe"`,
			all(set("/runtime_templates/0/launch/environment", []any{"OPENAI_API_KEY=plain", "PATH=/usr/bin:/bin"}), redigest, envCredential("codex-token", "/etc/glove/k", "OPENAI_API_KEY", 64))},
		{"credential variable max_bytes over the variable bound", "/credential_policies/0/max_bytes", "outside 1..32768", envCredential("codex-token", "/etc/glove/k", "OPENAI_API_KEY", 32<<10+1)},
		{"credential variable max_bytes zero", "/credential_policies/0/max_bytes", "outside 1..32768", envCredential("codex-token", "/etc/glove/k", "OPENAI_API_KEY", 0)},
		{"credentials same variable", "/credential_policies/1/environment_variable", `also the environment_variable of handle "codex-token"`, all(set("/secret_handles", []any{"codex-token", "z-token"}),
			envCredential("codex-token", "/etc/glove/k", "OPENAI_API_KEY", 64),
			moreEnvCredential("z-token", "/etc/glove/z", "OPENAI_API_KEY", 64))},
		{"credentials variable and file share a source", "/credential_policies/1/source_path", "also the source of handle", all(set("/secret_handles", []any{"codex-token", "z-token"}),
			credential("codex-token", "/etc/glove/k", "/home/agent/k", 64),
			moreEnvCredential("z-token", "/etc/glove/k", "OPENAI_API_KEY", 64))},
		{"credential null", "/credential_policies", "null", rep(`"schema_version": 1,`, `"schema_version": 1, "credential_policies": null,`)},
		{"credentials unsorted", "/credential_policies/1/handle", "not sorted after", all(set("/secret_handles", []any{"a-token", "codex-token"}),
			credential("codex-token", "/etc/glove/codex.json", "/home/agent/.codex/auth.json", 4096),
			moreCredential("a-token", "/etc/glove/a.json", "/home/agent/a.json", 4096))},
		{"credentials same destination", "/credential_policies/1/destination_path", "equals the destination_path", all(set("/secret_handles", []any{"codex-token", "z-token"}),
			credential("codex-token", "/etc/glove/codex.json", "/home/agent/.codex/auth.json", 4096),
			moreCredential("z-token", "/etc/glove/z.json", "/home/agent/.codex/auth.json", 4096))},
		{"credentials nested destination", "/credential_policies/1/destination_path", "lies beneath the destination_path", all(set("/secret_handles", []any{"codex-token", "z-token"}),
			credential("codex-token", "/etc/glove/codex.json", "/home/agent/.codex", 4096),
			moreCredential("z-token", "/etc/glove/z.json", "/home/agent/.codex/auth.json", 4096))},
		{"credentials same source", "/credential_policies/1/source_path", "also the source of handle", all(set("/secret_handles", []any{"codex-token", "z-token"}),
			credential("codex-token", "/etc/glove/codex.json", "/home/agent/.codex/auth.json", 4096),
			moreCredential("z-token", "/etc/glove/codex.json", "/home/agent/z.json", 4096))},
		// Egress policies.
		{"egress id undeclared", "/egress_policies/0/egress_policy_id", "not one of /egress_policy_ids", all(gateway("127.0.0.1:8787", true, gatewaySocket), set("/egress_policy_ids", []any{"no-network"}))},
		{"egress no-network entry", "/egress_policies/0/egress_policy_id", "takes no entry", all(gateway("127.0.0.1:8787", true, gatewaySocket), set("/egress_policies/0/egress_policy_id", "no-network"))},
		{"egress no endpoints", "/egress_policies/0/endpoints", "want 1..8", all(gateway("127.0.0.1:8787", true, gatewaySocket), set("/egress_policies/0/endpoints", []any{}))},
		{"egress wildcard", "/egress_policies/0/endpoints/0/address", "not 127.0.0.1:PORT", gateway("0.0.0.0:8787", true, gatewaySocket)},
		{"egress other loopback", "/egress_policies/0/endpoints/0/address", "not 127.0.0.1:PORT", gateway("127.0.0.2:8787", true, gatewaySocket)},
		{"egress host name", "/egress_policies/0/endpoints/0/address", "not 127.0.0.1:PORT", gateway("localhost:8787", true, gatewaySocket)},
		{"egress ipv6", "/egress_policies/0/endpoints/0/address", "not 127.0.0.1:PORT", gateway("[::1]:8787", true, gatewaySocket)},
		{"egress two addresses", "/egress_policies/0/endpoints/0/address", "not one 127.0.0.1:PORT", gateway("127.0.0.1:8787,127.0.0.1:8788", true, gatewaySocket)},
		{"egress port zero", "/egress_policies/0/endpoints/0/address", "not a decimal in 1..65535", gateway("127.0.0.1:0", true, gatewaySocket)},
		{"egress port padded", "/egress_policies/0/endpoints/0/address", "not a decimal in 1..65535", gateway("127.0.0.1:08787", true, gatewaySocket)},
		{"egress port over", "/egress_policies/0/endpoints/0/address", "not a decimal in 1..65535", gateway("127.0.0.1:65536", true, gatewaySocket)},
		{"egress not private", "/egress_policies/0/endpoints/0/allow_private", "must be true", gateway("127.0.0.1:8787", false, gatewaySocket)},
		{"egress no upstream", "/egress_policies/0/endpoints/0/upstream", "exactly one of", gateway("127.0.0.1:8787", true, map[string]any{})},
		{"egress two upstreams", "/egress_policies/0/endpoints/0/upstream", "exactly one of", gateway("127.0.0.1:8787", true, map[string]any{"unix_socket": "/run/a.sock", "tcp": "127.0.0.1:4000"})},
		{"egress upstream relative", "/egress_policies/0/endpoints/0/upstream/unix_socket", "not absolute", gateway("127.0.0.1:8787", true, map[string]any{"unix_socket": "run/a.sock"})},
		{"egress upstream in proc", "/egress_policies/0/endpoints/0/upstream/unix_socket", "kernel interface", gateway("127.0.0.1:8787", true, map[string]any{"unix_socket": "/proc/1/root/run/a.sock"})},
		{"egress upstream off host", "/egress_policies/0/endpoints/0/upstream", "not a loopback address", gateway("127.0.0.1:8787", true, map[string]any{"tcp": "10.0.0.1:443"})},
		{"egress upstream name", "/egress_policies/0/endpoints/0/upstream", "not a loopback address", gateway("127.0.0.1:8787", true, map[string]any{"tcp": "localhost:443"})},
		{"egress upstream no port", "/egress_policies/0/endpoints/0/upstream", "not a loopback address", gateway("127.0.0.1:8787", true, map[string]any{"tcp": "127.0.0.1"})},
		{"egress upstream unknown", "/egress_policies/0/endpoints/0/upstream/http", "unknown member", gateway("127.0.0.1:8787", true, map[string]any{"http": "http://127.0.0.1"})},
		{"egress port twice", "/egress_policies/1/endpoints/0/address", "also an endpoint of egress policy", all(gateway("127.0.0.1:8787", true, gatewaySocket),
			set("/egress_policy_ids", []any{"model-gateway", "no-network", "proxy"}),
			set("/egress_policies/-", map[string]any{"egress_policy_id": "proxy", "endpoints": []any{map[string]any{"address": "127.0.0.1:8787", "allow_private": true, "upstream": gatewaySocket}}}))},
		{"egress unsorted", "/egress_policies/1/egress_policy_id", "not sorted after", all(gateway("127.0.0.1:8787", true, gatewaySocket),
			set("/egress_policy_ids", []any{"a-proxy", "model-gateway", "no-network"}),
			set("/egress_policies/-", map[string]any{"egress_policy_id": "a-proxy", "endpoints": []any{map[string]any{"address": "127.0.0.1:3128", "allow_private": true, "upstream": gatewaySocket}}}))},
		{"path aliases unsorted", "/path_aliases/1/alias", "not sorted after", secondAlias("data", "/srv/data", "/data")},
		{"profiles duplicate", "/resource_profiles/1/profile_id", "duplicate", func(t testing.TB, s string) string {
			p := mustDecode(t, s)
			p.ResourceProfiles = append(p.ResourceProfiles, p.ResourceProfiles[0])
			return string(Canonical(p))
		}},
		// Template.
		{"backend other", "/runtime_templates/0/sandbox_backend", "not supported", rep(`"linux_production"`, `"remote_linux_container"`)},
		{"digest stale", "/runtime_templates/0/adapter_command_digest", "does not match the launch fields", rep(`"--version"`, `"--help"`)},
		{"digest uppercase", "/runtime_templates/0/adapter_command_digest", "lowercase hex", rep(`"58732ba4`, `"58732BA4`)},
		{"digest runtime id changed", "/runtime_templates/0/adapter_command_digest", "does not match", rep(`"runtime_id": "codex"`, `"runtime_id": "codex2"`)},
		{"undefined path alias", "/runtime_templates/0/allowed_path_aliases/0", "not a defined path alias", rep(`["workspace"]`, `["nowhere"]`)},
		{"allowed aliases duplicate", "/runtime_templates/0/allowed_path_aliases/1", "duplicate", rep(`["workspace"]`, `["workspace", "workspace"]`)},
		{"undefined destination", "/runtime_templates/0/allowed_projection_destinations/0", "not a defined library", rep(`["libraries"]`, `["books"]`)},
		// Launch: pinned executable.
		{"executable relative", "/runtime_templates/0/launch/executable_path", "not absolute", rep(`"/usr/bin/true"`, `"usr/bin/true"`)},
		{"executable root", "/runtime_templates/0/launch/executable_path", `"/" is not allowed`, rep(`"/usr/bin/true"`, `"/"`)},
		{"executable dotdot", "/runtime_templates/0/launch/executable_path", `contains ".."`, rep(`"/usr/bin/true"`, `"/usr/lib/../bin/true"`)},
		{"executable double slash", "/runtime_templates/0/launch/executable_path", "not canonical", rep(`"/usr/bin/true"`, `"/usr//bin/true"`)},
		{"executable trailing slash", "/runtime_templates/0/launch/executable_path", "not canonical", rep(`"/usr/bin/true"`, `"/usr/bin/true/"`)},
		{"executable in proc", "/runtime_templates/0/launch/executable_path", "kernel interface", rep(`"/usr/bin/true"`, `"/proc/self/exe"`)},
		{"executable missing", "/runtime_templates/0/launch/executable_path", "required", set("/runtime_templates/0/launch/executable_path", nil)},
		{"search paths without discovery", "/runtime_templates/0/launch/executable_search_paths", "only allowed with runtime_discovery", set("/runtime_templates/0/launch/executable_search_paths", []any{"/usr/bin"})},
		{"argument with NUL", "/runtime_templates/0/launch/arguments/0", "NUL", rep(`"--version"`, `"--ver\u0000sion"`)},
		// Read-only paths.
		{"read-only equals executable", "/runtime_templates/0/launch/read_only_paths/0", "equals the pinned executable", rep(`"/usr/local/lib/operator-harness/codex-runtime"`, `"/usr/bin/true"`)},
		{"read-only contains executable", "/runtime_templates/0/launch/read_only_paths/0", "contains the pinned executable", rep(`"/usr/local/lib/operator-harness/codex-runtime"`, `"/usr/bin"`)},
		{"read-only beneath executable", "/runtime_templates/0/launch/read_only_paths/0", "lies beneath the pinned executable", rep(`"/usr/local/lib/operator-harness/codex-runtime"`, `"/usr/bin/true/x"`)},
		{"read-only duplicate", "/runtime_templates/0/launch/read_only_paths/1", "duplicate", rep(`["/usr/local/lib/operator-harness/codex-runtime"]`, `["/usr/local/lib/operator-harness/codex-runtime", "/usr/local/lib/operator-harness/codex-runtime"]`)},
		{"read-only unsorted", "/runtime_templates/0/launch/read_only_paths/1", "not sorted after", rep(`["/usr/local/lib/operator-harness/codex-runtime"]`, `["/opt/z", "/opt/a"]`)},
		{"read-only nested", "/runtime_templates/0/launch/read_only_paths/1", "lies beneath read-only path", rep(`["/usr/local/lib/operator-harness/codex-runtime"]`, `["/opt/a", "/opt/a/b"]`)},
		{"read-only relative", "/runtime_templates/0/launch/read_only_paths/0", "not absolute", rep(`"/usr/local/lib/operator-harness/codex-runtime"`, `"opt/x"`)},
		{"read-only root", "/runtime_templates/0/launch/read_only_paths/1", `"/" is not allowed`, rep(`["/usr/local/lib/operator-harness/codex-runtime"]`, `["/a", "/"]`)},
		// Environment.
		{"environment not NAME=value", "/runtime_templates/0/launch/environment/0", "not NAME=value", rep(`"PATH=/usr/bin:/bin"`, `"PATH"`)},
		{"environment bad name", "/runtime_templates/0/launch/environment/0", "not NAME=value", rep(`"PATH=/usr/bin:/bin"`, `"1PATH=/usr/bin"`)},
		{"environment unsorted", "/runtime_templates/0/launch/environment/1", "not sorted after", rep(`["PATH=/usr/bin:/bin", "TERM=xterm-256color"]`, `["TERM=xterm-256color", "PATH=/usr/bin:/bin"]`)},
		{"environment duplicate name", "/runtime_templates/0/launch/environment/1", "set twice", rep(`"TERM=xterm-256color"`, `"PATH=/bin"`)},
		{"environment reserved", "/runtime_templates/0/launch/environment/0", "set by Glove itself", rep(`"PATH=/usr/bin:/bin"`, `"HOME=/root"`)},
		// Launch: discovery.
		{"discovery with executable", "/runtime_templates/0/launch/executable_path", "must be empty", discovery(set("/runtime_templates/0/launch/executable_path", "/usr/bin/true"))},
		{"discovery unsupported", "/runtime_templates/0/launch/runtime_discovery", "is not one of", discovery(set("/runtime_templates/0/launch/runtime_discovery", "vim"))},
		{"discovery not runtime id", "/runtime_templates/0/launch/runtime_discovery", "does not match runtime_id", discovery(set("/runtime_templates/0/launch/runtime_discovery", "claude-code"))},
		{"discovery no search paths", "/runtime_templates/0/launch/executable_search_paths", "non-empty", discovery(set("/runtime_templates/0/launch/executable_search_paths", nil))},
		{"search path duplicate", "/runtime_templates/0/launch/executable_search_paths/2", "duplicates entry 0", discovery(set("/runtime_templates/0/launch/executable_search_paths/-", "/usr/local/lib/glove-runtimes/codex/bin"))},
		{"search path root", "/runtime_templates/0/launch/executable_search_paths/0", `"/" is not allowed`, discovery(set("/runtime_templates/0/launch/executable_search_paths/0", "/"))},
		{"read-only contains search path", "/runtime_templates/0/launch/read_only_paths/0", "contains the executable search path", discovery(set("/runtime_templates/0/launch/read_only_paths", []any{"/usr/local/lib/glove-runtimes/codex"}))},
		// A staged search path is launched as its whole stage tree: a
		// read-only path beneath the tree (beside the search path) would
		// be mounted over part of the pinned tree.
		{"read-only beneath a stage tree", "/runtime_templates/0/launch/read_only_paths/0", "lies beneath the stage tree \"/usr/local/lib/glove-runtimes/0000000000000000000000000000000000000000000000000000000000000001\"", discovery(
			set("/runtime_templates/0/launch/executable_search_paths", []any{"/usr/local/lib/glove-runtimes/0000000000000000000000000000000000000000000000000000000000000001/vendor/x/bin"}),
			set("/runtime_templates/0/launch/read_only_paths", []any{"/usr/local/lib/glove-runtimes/0000000000000000000000000000000000000000000000000000000000000001/vendor/x/codex-path"}))},
		// Path aliases.
		{"host path relative", "/path_aliases/0/host_path", "not absolute", rep(`"/srv/work/sage-protocol"`, `"srv/work"`)},
		{"host path root", "/path_aliases/0/host_path", `"/" is not allowed`, rep(`"/srv/work/sage-protocol"`, `"/"`)},
		{"host path in sys", "/path_aliases/0/host_path", "kernel interface", rep(`"/srv/work/sage-protocol"`, `"/sys/kernel"`)},
		{"target trailing slash", "/path_aliases/0/target_path", "not canonical", rep(`"/workspace"`, `"/workspace/"`)},
		{"target over agent home", "/path_aliases/0/target_path", "Glove reserves", rep(`"/workspace"`, `"/home"`)},
		{"host paths nested", "/path_aliases/1/host_path", "lies beneath the host_path", secondAlias("zdata", "/srv/work/sage-protocol/sub", "/data")},
		{"host paths equal", "/path_aliases/1/host_path", "equals the host_path", secondAlias("zdata", "/srv/work/sage-protocol", "/data")},
		{"target paths nested", "/path_aliases/1/target_path", "contains the target_path", all(rep(`"/workspace"`, `"/work/space"`), secondAlias("zdata", "/srv/data", "/work"))},
		{"target paths nested below", "/path_aliases/1/target_path", "lies beneath the target_path", secondAlias("zdata", "/srv/data", "/workspace/data")},
		{"destination below alias target", "/library_projection_destinations/0/target_path", "lies beneath the target_path of path alias", rep(`"/opt/sage/library-bundles"`, `"/workspace/libs"`)},
		{"destination equals alias target", "/library_projection_destinations/0/target_path", "equals the target_path", rep(`"/opt/sage/library-bundles"`, `"/workspace"`)},
		{"destination shares alias name", "/library_projection_destinations/0/alias", "also a path alias", all(rep(`"alias": "libraries"`, `"alias": "workspace"`), rep(`["libraries"]`, `["workspace"]`))},
		{"ttl zero", "/path_aliases/0/max_ttl_secs", "outside 1..", rep(`"max_ttl_secs": 120`, `"max_ttl_secs": 0`)},
		{"no access tuples", "/path_aliases/0/access", "at least one", set("/path_aliases/0/access", []any{})},
		// Access tuples.
		{"access unknown", "/path_aliases/0/access/0/access", "is not one of", rep(`"ephemeral_write"`, `"write"`)},
		{"materialization unknown", "/path_aliases/0/access/0/materialization", "is not one of", rep(`"copy"`, `"overlay"`)},
		{"ephemeral bind", "/path_aliases/0/access/0/materialization", "cannot use materialization", rep(`"copy"`, `"bind"`)},
		{"create unknown", "/path_aliases/0/access/0/create_policy", "is not one of", rep(`"empty_directory"`, `"mkdir"`)},
		{"read-only bind empty dir", "/path_aliases/0/access/0/create_policy", "allows only must_exist", tuple("read_only", "bind", "empty_directory", "none", 0)},
		{"cleanup unknown", "/path_aliases/0/access/0/cleanup_policy", "is not one of", rep(`"remove"`, `"delete"`)},
		{"retained removes", "/path_aliases/0/access/0/cleanup_policy", "requires cleanup_policy retain", tuple("retained_write", "copy", "must_exist", "remove", 1024)},
		{"copy without quota", "/path_aliases/0/access/0/max_bytes", "outside 1..", rep(`"max_bytes": 2097152`, `"max_bytes": 0`)},
		{"copy quota over ceiling", "/path_aliases/0/access/0/max_bytes", "outside 1..", rep(`"max_bytes": 2097152`, `"max_bytes": 1099511627777`)},
		{"bind with quota", "/path_aliases/0/access/0/max_bytes", "must be 0", tuple("read_only", "bind", "must_exist", "none", 1)},
		{"tuples unsorted", "/path_aliases/0/access/1", "not sorted after", set("/path_aliases/0/access/-", map[string]any{
			"access": "direct_write", "materialization": "bind", "create_policy": "must_exist", "cleanup_policy": "none", "max_bytes": 0})},
		{"tuples duplicate", "/path_aliases/0/access/1", "repeats tuple 0", set("/path_aliases/0/access/-", map[string]any{
			"access": "ephemeral_write", "materialization": "copy", "create_policy": "empty_directory", "cleanup_policy": "remove", "max_bytes": 1})},
		// Resource profiles.
		{"pids zero", "/resource_profiles/0/pids", "outside 1..", rep(`"pids": 16`, `"pids": 0`)},
		{"memory over ceiling", "/resource_profiles/0/memory_bytes", "outside 1..", rep(`"memory_bytes": 67108864`, `"memory_bytes": 1099511627777`)},
		{"wall time over ceiling", "/resource_profiles/0/wall_time_ms", "outside 1..", rep(`"wall_time_ms": 2000`, `"wall_time_ms": 86400001`)},
		{"terminal output zero", "/resource_profiles/0/terminal_output_bytes", "outside 1..", rep(`"terminal_output_bytes": 1048576`, `"terminal_output_bytes": 0`)},
		{"profile id charset", "/resource_profiles/0/profile_id", "not an identifier", rep(`"small"`, `"-small"`)},
	}
}

func TestBadPolicies(t *testing.T) {
	base := exampleText(t)
	seen := map[string]bool{}
	for _, tc := range badPolicies() {
		t.Run(tc.name, func(t *testing.T) {
			if seen[tc.name] {
				t.Fatalf("case name %q repeats", tc.name)
			}
			seen[tc.name] = true
			doc := tc.m(t, base)
			p, err := Decode([]byte(doc))
			if err == nil {
				err = Validate(p)
			}
			if err == nil {
				t.Fatalf("accepted:\n%s", doc)
			}
			jsonedit.CheckFault(t, err, tc.ptr, tc.phrase)
		})
	}
}

func TestGoodVariants(t *testing.T) {
	cases := []struct {
		name string
		m    mutation
	}{
		{"discovery template", all(discovery(), redigest)},
		{"ttl exactly wall plus headroom", rep(`"max_plan_ttl_ms": 120000`, `"max_plan_ttl_ms": 3000`)},
		{"no optional lists", all(set("/egress_policy_ids", nil), set("/tool_policy_ids", nil), set("/secret_handles", nil))},
		{"read-only bind", tuple("read_only", "bind", "must_exist", "none", 0)},
		{"read-only copy", tuple("read_only", "copy", "must_exist", "remove", 1)},
		{"retained write", tuple("retained_write", "copy", "empty_directory", "retain", 1<<30)},
		{"legacy direct_write parses", tuple("direct_write", "bind", "must_exist", "none", 0)},
		{"second alias after workspace", all(secondAlias("zdata", "/srv/data", "/data"))},
		{"sibling paths with shared prefix", all(secondAlias("zdata", "/srv/work/sage-protocol-2", "/workspace-2"))},
		{"empty argument", all(rep(`"--version"`, `""`), redigest)},
		{"credential policy", credential("codex-token", "/etc/glove/codex.json", "/home/agent/.codex/auth.json", 1<<20)},
		{"two credential policies", all(set("/secret_handles", []any{"codex-token", "z-token"}),
			credential("codex-token", "/etc/glove/codex.json", "/home/agent/.codex/auth.json", 4096),
			moreCredential("z-token", "/etc/glove/z.json", "/home/agent/.codex-other", 1))},
		{"no credential policies", set("/credential_policies", []any{})},
		{"host_files both", hostFiles("ca_certificates", "name_service")},
		{"host_files CA alone", hostFiles("ca_certificates")},
		{"host_files name service alone", all(set("/runtime_templates/0/launch/read_only_paths", []any{"/usr/share/ca-certificates"}), hostFiles("name_service"))},
		{"host_files CA with /usr/share read-only", all(set("/runtime_templates/0/launch/read_only_paths", []any{"/usr/share"}), hostFiles("ca_certificates"))},
		{"host_files empty", all(set("/runtime_templates/0/launch/host_files", []any{}), redigest)},
		{"read-only /etc without host_files", all(set("/runtime_templates/0/launch/read_only_paths", []any{"/etc"}), redigest)},
		{"credential as a variable", envCredential("codex-token", "/etc/glove/openai.key", "OPENAI_API_KEY", 32<<10)},
		{"credential variable lowercase", envCredential("codex-token", "/etc/glove/openai.key", "_openai_key1", 1)},
		{"credential as a file and one as a variable", all(set("/secret_handles", []any{"codex-token", "z-token"}),
			credential("codex-token", "/etc/glove/codex.json", "/home/agent/.codex/auth.json", 4096),
			moreEnvCredential("z-token", "/etc/glove/z.key", "ANTHROPIC_API_KEY", 256))},

		{"egress to a unix socket", gateway("127.0.0.1:8787", true, gatewaySocket)},
		{"egress to host loopback tcp", gateway("127.0.0.1:8787", true, map[string]any{"tcp": "127.0.0.1:4000"})},
		{"egress to host ipv6 loopback", gateway("127.0.0.1:1", true, map[string]any{"tcp": "[::1]:65535"})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := tc.m(t, exampleText(t))
			p, err := Decode([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(p); err != nil {
				t.Fatalf("%v\n%s", err, doc)
			}
		})
	}
}

func TestLegacyDirectWriteIsFlagged(t *testing.T) {
	doc := tuple("direct_write", "bind", "must_exist", "none", 0)(t, exampleText(t))
	p := mustDecode(t, doc)
	if err := Validate(p); err != nil {
		t.Fatal(err)
	}
	if p.PathAliases[0].Access[0].Launchable() {
		t.Fatal("direct_write reported launchable")
	}
	if s := Summary(p); !strings.Contains(s, "1 legacy direct_write tuple") {
		t.Fatalf("summary does not flag direct_write: %q", s)
	}
	if s := Explain(p).Text(); !strings.Contains(s, "never launchable") {
		t.Fatalf("explanation does not flag direct_write:\n%s", s)
	}
}

func TestCanonicalRoundTrip(t *testing.T) {
	p := mustDecode(t, exampleText(t))
	c := Canonical(p)
	q, err := Decode(c)
	if err != nil {
		t.Fatalf("canonical form does not decode: %v\n%s", err, c)
	}
	if err := Validate(q); err != nil {
		t.Fatal(err)
	}
	if string(Canonical(q)) != string(c) {
		t.Fatalf("canonical form is not stable:\n%s\n%s", c, Canonical(q))
	}
	if strings.ContainsAny(string(c), " \n\t") {
		t.Fatalf("canonical form has whitespace: %s", c)
	}
}

func TestEnumerationsSorted(t *testing.T) {
	// Messages list them, and docs/policy.md documents them, in this order.
	for _, l := range [][]string{accessValues, materializationValues, createValues, cleanupValues, reservedEnvironment, kernelRoots, reservedTargets, DiscoveryRuntimes()} {
		if !slices.IsSorted(l) {
			t.Errorf("%v is not sorted", l)
		}
	}
}

func TestExplain(t *testing.T) {
	p := mustDecode(t, exampleText(t))
	text := Explain(p).Text()
	for _, want := range []string{
		`runtime template "codex-safe"`,
		`executes the pinned executable "/usr/bin/true"`,
		`path alias "workspace": host "/srv/work/sage-protocol" at "/workspace" for at most 120 s as ephemeral_write (copy, empty_directory, cleanup remove, at most 2097152 bytes)`,
		`read-only at "/opt/sage/library-bundles"`,
		`"small": cpu 1000 ms, memory 67108864 bytes, 16 pids, wall 2000 ms, disk 2097152 bytes, terminal output 1048576 bytes`,
		`secret handles a plan may name: "codex-token"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("explanation lacks %q:\n%s", want, text)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/policy.json"
	if err := os.WriteFile(path, []byte(exampleText(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(rep(`"revision": 7`, `"revision": 0`)(t, exampleText(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	var f *Fault
	if !errors.As(err, &f) || f.Pointer != "/revision" || !strings.HasPrefix(err.Error(), "load policy "+path+": /revision: ") {
		t.Fatalf("Load of a bad policy: %v", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); !errors.Is(err, ErrUnprotected) {
		t.Fatalf("Load of a mode-0644 policy: %v", err)
	}
}

// Short names for the table rows.
type mutation = jsonedit.Mutation

var (
	rep = jsonedit.Rep
	set = jsonedit.Set
	all = jsonedit.All
)

// TestExplainCredentials: explain names what each mapped handle stands
// for and which handles no credential policy maps (a plan naming one is
// refused at start).
func TestExplainCredentials(t *testing.T) {
	p := mustDecode(t, all(set("/secret_handles", []any{"codex-token", "other", "z-key"}),
		credential("codex-token", "/etc/glove/codex.json", "/home/agent/.codex/auth.json", 4096),
		moreEnvCredential("z-key", "/etc/glove/z.key", "OPENAI_API_KEY", 128))(t, exampleText(t)))
	if err := Validate(p); err != nil {
		t.Fatal(err)
	}
	e := Explain(p)
	if !slices.Equal(e.UnmappedSecretHandles, []string{"other"}) || len(e.CredentialPolicies) != 2 {
		t.Fatalf("unmapped %q, credential policies %+v", e.UnmappedSecretHandles, e.CredentialPolicies)
	}
	text := e.Text()
	for _, want := range []string{`"codex-token": a copy of its lease (imported from "/etc/glove/codex.json", at most 4096 bytes) at "/home/agent/.codex/auth.json"`,
		`"z-key": its lease (imported from "/etc/glove/z.key", at most 128 bytes, one line) as the program's environment variable OPENAI_API_KEY; never taken back`,
		`secret handles no credential policy maps (a plan naming one is refused at start): "other"`} {
		if !strings.Contains(text, want) {
			t.Errorf("explain lacks %q:\n%s", want, text)
		}
	}
}

func TestStagedRoot(t *testing.T) {
	d := strings.Repeat("ab", 32)
	for _, c := range []struct{ p, want string }{
		{"/usr/local/lib/glove-runtimes/" + d + "/vendor/x/bin", "/usr/local/lib/glove-runtimes/" + d},
		{"/usr/local/lib/glove-runtimes/" + d, "/usr/local/lib/glove-runtimes/" + d},
		{"/" + d + "/bin", "/" + d},
		{"/opt/codex/bin", ""},
		{"/opt/" + strings.ToUpper(d) + "/bin", ""}, // not lowercase: not a stage digest
		{"/opt/" + d[:63] + "/bin", ""},
		{"relative/" + d, ""},
	} {
		if got := StagedRoot(c.p); got != c.want {
			t.Errorf("StagedRoot(%q) = %q, want %q", c.p, got, c.want)
		}
	}
}
