package policy

import "github.com/glove-sandbox/glove/supervisor/internal/strictjson"

// Canonical encodes p as canonical JSON (see strictjson.Writer): members
// sorted by name, no whitespace. The three optional launch members
// (executable_path, runtime_discovery, executable_search_paths) are
// omitted when empty, since Decode reads an absent member and an empty
// one alike; every other member is always written. Decode(Canonical(p))
// equals p for every decoded p.
func Canonical(p *Policy) []byte {
	var w strictjson.Writer
	w.BeginObject()
	w.StringsMember("egress_policy_ids", p.EgressPolicyIDs)
	w.Key("library_projection_destinations")
	w.BeginArray()
	for _, d := range p.LibraryProjectionDestinations {
		w.BeginObject()
		w.StringMember("alias", d.Alias)
		w.StringMember("target_path", d.TargetPath)
		w.EndObject()
	}
	w.EndArray()
	w.UintMember("max_plan_ttl_ms", p.MaxPlanTTLMs)
	w.Key("path_aliases")
	w.BeginArray()
	for _, a := range p.PathAliases {
		w.BeginObject()
		w.Key("access")
		w.BeginArray()
		for _, t := range a.Access {
			w.BeginObject()
			w.StringMember("access", t.Access)
			w.StringMember("cleanup_policy", t.CleanupPolicy)
			w.StringMember("create_policy", t.CreatePolicy)
			w.StringMember("materialization", t.Materialization)
			w.UintMember("max_bytes", t.MaxBytes)
			w.EndObject()
		}
		w.EndArray()
		w.StringMember("alias", a.Alias)
		w.StringMember("host_path", a.HostPath)
		w.UintMember("max_ttl_secs", a.MaxTTLSecs)
		w.StringMember("target_path", a.TargetPath)
		w.EndObject()
	}
	w.EndArray()
	w.Key("resource_profiles")
	w.BeginArray()
	for i := range p.ResourceProfiles {
		writeProfile(&w, &p.ResourceProfiles[i])
	}
	w.EndArray()
	w.UintMember("revision", p.Revision)
	w.Key("runtime_templates")
	w.BeginArray()
	for i := range p.RuntimeTemplates {
		t := &p.RuntimeTemplates[i]
		w.BeginObject()
		w.StringMember("adapter_command_digest", t.AdapterCommandDigest)
		w.StringsMember("allowed_path_aliases", t.AllowedPathAliases)
		w.StringsMember("allowed_projection_destinations", t.AllowedProjectionDestinations)
		w.Key("launch")
		w.BeginObject()
		l := &t.Launch
		w.StringsMember("arguments", l.Arguments)
		w.StringsMember("environment", l.Environment)
		if l.ExecutablePath != "" {
			w.StringMember("executable_path", l.ExecutablePath)
		}
		if len(l.ExecutableSearchPaths) != 0 {
			w.StringsMember("executable_search_paths", l.ExecutableSearchPaths)
		}
		w.StringsMember("read_only_paths", l.ReadOnlyPaths)
		if l.RuntimeDiscovery != "" {
			w.StringMember("runtime_discovery", l.RuntimeDiscovery)
		}
		w.EndObject()
		w.StringMember("runtime_id", t.RuntimeID)
		w.StringMember("runtime_template_id", t.RuntimeTemplateID)
		w.StringMember("sandbox_backend", t.SandboxBackend)
		w.EndObject()
	}
	w.EndArray()
	w.Key("schema_version")
	w.Int(int64(p.SchemaVersion))
	w.StringsMember("secret_handles", p.SecretHandles)
	w.StringsMember("tool_policy_ids", p.ToolPolicyIDs)
	w.EndObject()
	return w.Bytes()
}

// writeProfile writes a resource profile object canonically.
func writeProfile(w *strictjson.Writer, r *ResourceProfile) {
	w.BeginObject()
	w.UintMember("cpu_time_ms", r.CPUTimeMs)
	w.UintMember("disk_bytes", r.DiskBytes)
	w.UintMember("memory_bytes", r.MemoryBytes)
	w.UintMember("pids", r.Pids)
	w.StringMember("profile_id", r.ProfileID)
	w.UintMember("terminal_output_bytes", r.TerminalOutputBytes)
	w.UintMember("wall_time_ms", r.WallTimeMs)
	w.EndObject()
}
