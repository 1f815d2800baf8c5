// SPDX-License-Identifier: Apache-2.0

// Package localservice is the operator's local-service forwarding
// configuration (docs/local-services.md), given to gloved as
// --local-services FILE: which host Unix-socket services a sandboxed
// program may reach, under which alias, from sessions of which runtimes,
// and with which optional guest-channel adapter binding.
//
// It decodes and validates only; it opens no socket and reads nothing
// but the configuration file itself (Load, through policy.ReadProtected).
// The file names nothing else a session could be given: guest targets,
// TCP, UIDs, tokens, credentials and payload semantics are not members,
// and an unknown member is refused, so a configuration cannot widen what
// a forwarded service is beyond a host Unix socket reached by alias.
package localservice

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/internal/strictjson"
)

// Limits and fixed values of the format.
const (
	// SchemaVersion is the only schema_version.
	SchemaVersion = 1
	// TransportInheritedStream is the owner's transport selector for
	// inherited-stream-v1: one socketpair per session for the one
	// adapter-bound alias, its guest end at descriptor 3.
	TransportInheritedStream = "inherited-stream-v1"
	// MaxConfigBytes bounds the file.
	MaxConfigBytes = 64 << 10
	// MaxServices bounds services, MaxRuntimeIDs each runtime_ids.
	MaxServices   = 64
	MaxRuntimeIDs = 64
	// MaxSocketBytes is PATH_MAX less its NUL; MaxSocketNameBytes NAME_MAX.
	MaxSocketBytes     = 4095
	MaxSocketNameBytes = 255
)

// Config is a decoded configuration; only a validated one may be used.
type Config struct {
	SchemaVersion int `json:"schema_version"`
	// Transport is the owner's transport selector: nil when absent (the
	// pathname compatibility transport), else TransportInheritedStream.
	// A pointer, so that an empty string is refused rather than read as
	// absent: one meaning, one spelling.
	Transport *string   `json:"transport,omitzero"`
	Services  []Service `json:"services"`
}

// Service is one forwarded host service.
type Service struct {
	Alias      string   `json:"alias"`
	Socket     string   `json:"socket"`
	RuntimeIDs []string `json:"runtime_ids"`
	// Binding is the optional opaque guest-channel adapter binding.
	Binding *Binding `json:"binding,omitzero"`
}

// Binding names a guest-channel adapter and the schema it speaks. Glove
// core does not interpret it beyond looking it up in the supported table.
type Binding struct {
	Adapter string `json:"adapter"`
	Schema  string `json:"schema"`
}

// bindingRE is the charset of a binding's adapter and schema: lowercase
// letters, digits, dot, underscore and hyphen, starting with a letter or
// digit, at most 128 bytes (no path, no space, no control byte, so a
// binding quoted in a log is one word).
var bindingRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,127}$`)

// supportedBinding is one row of the table of bindings Glove resolves:
// the binding, the exact runtime set it is supported for, and the guest
// channel schema version it advertises.
type supportedBinding struct {
	binding       Binding
	runtimes      []string // sorted
	schemaVersion int
}

// supported is the closed table of bindings. It is code, not
// configuration: a file can pick a row, never add one; a binding not in
// it (or a row's binding with another runtime set) fails start-up, so an
// adapter Glove does not have is never advertised.
var supported = []supportedBinding{
	{binding: Binding{Adapter: "sage-guest", Schema: "sage.guest-observation-v1"}, runtimes: []string{"pi"}, schemaVersion: 1},
}

// lookup finds the row of a binding, whatever the runtime set.
func lookup(b Binding) (supportedBinding, bool) {
	for _, r := range supported {
		if r.binding == b {
			return r, true
		}
	}
	return supportedBinding{}, false
}

// Decode strictly decodes a configuration of at most MaxConfigBytes: one
// JSON object, no unknown member, no duplicate name, no null, no
// trailing data, names case-sensitive. It does not validate; a failure
// is a *strictjson.Fault naming the JSON Pointer.
func Decode(data []byte) (*Config, error) {
	var c Config
	if err := strictjson.Unmarshal(data, &c, MaxConfigBytes); err != nil {
		return nil, err
	}
	return &c, nil
}

// Load reads the file through policy.ReadProtected (a regular file of
// the service user, mode 0600, one link, not a symbolic link, at most
// MaxConfigBytes: threat, another local user or a planted link widening
// what sessions reach), decodes and validates it.
func Load(path string) (*Config, error) {
	data, err := policy.ReadProtected(path, MaxConfigBytes)
	if err != nil {
		return nil, fmt.Errorf("load local services: %w", err)
	}
	c, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("load local services %s: %w", path, err)
	}
	if err := Validate(c); err != nil {
		return nil, fmt.Errorf("load local services %s: %w", path, err)
	}
	return c, nil
}

// Canonical is the configuration's canonical JSON (RFC 8785).
func Canonical(c *Config) []byte { return strictjson.Canonical(c) }

// Validate checks every rule of docs/local-services.md and returns the
// first fault as a *strictjson.Fault (one line, with its JSON Pointer).
// Canonical order is required, not imposed: two files that forward the
// same services are byte-identical once canonical, and a repeated alias
// or runtime cannot hide a second, different entry.
func Validate(c *Config) error {
	if c.SchemaVersion != SchemaVersion {
		return strictjson.Faultf("/schema_version", "schema_version %d, want %d", c.SchemaVersion, SchemaVersion)
	}
	if c.Transport != nil && *c.Transport != TransportInheritedStream {
		return strictjson.Faultf("/transport", "transport %q is not supported; omit it (pathname transport) or give %q", *c.Transport, TransportInheritedStream)
	}
	if n := len(c.Services); n == 0 || n > MaxServices {
		return strictjson.Faultf("/services", "%d services; give 1 to %d", n, MaxServices)
	}
	sockets := map[string]int{}
	for i, s := range c.Services {
		at := strictjson.Ptr("services", i)
		if !policy.ValidIdentifier(s.Alias) {
			return strictjson.Faultf(at+"/alias", "alias %q is not an identifier", s.Alias)
		}
		if i > 0 {
			if err := strictjson.CheckOrder(at+"/alias", c.Services[i-1].Alias, s.Alias); err != nil {
				return err
			}
		}
		if err := checkSocket(at+"/socket", s.Socket); err != nil {
			return err
		}
		if j, dup := sockets[s.Socket]; dup {
			return strictjson.Faultf(at+"/socket", "the same socket as /services/%d/socket", j)
		}
		sockets[s.Socket] = i
		if n := len(s.RuntimeIDs); n == 0 || n > MaxRuntimeIDs {
			return strictjson.Faultf(at+"/runtime_ids", "%d runtime_ids; give 1 to %d", n, MaxRuntimeIDs)
		}
		for k, r := range s.RuntimeIDs {
			if !policy.ValidIdentifier(r) {
				return strictjson.Faultf(strictjson.Join(at, "runtime_ids", k), "runtime id %q is not an identifier", r)
			}
			if k > 0 {
				if err := strictjson.CheckOrder(strictjson.Join(at, "runtime_ids", k), s.RuntimeIDs[k-1], r); err != nil {
					return err
				}
			}
		}
		if s.Binding != nil {
			if err := checkBinding(at, s); err != nil {
				return err
			}
		}
	}
	if c.Transport != nil && len(c.Services) != 1 {
		return strictjson.Faultf("/services", "%s carries exactly one adapter-bound alias; %d services are configured", TransportInheritedStream, len(c.Services))
	}
	return nil
}

// checkSocket requires an absolute, clean host path of at most
// MaxSocketBytes whose name is at most MaxSocketNameBytes. Messages do
// not quote the path: it is a host path, and faults reach gloved's log.
func checkSocket(at, p string) error {
	switch {
	case p == "":
		return strictjson.Faultf(at, "socket is empty; give the absolute path of the service's Unix socket")
	case len(p) > MaxSocketBytes:
		return strictjson.Faultf(at, "socket is %d bytes, more than %d", len(p), MaxSocketBytes)
	case strings.IndexByte(p, 0) >= 0:
		return strictjson.Faultf(at, "socket holds a NUL byte")
	case !filepath.IsAbs(p):
		return strictjson.Faultf(at, "socket is not an absolute path")
	case filepath.Clean(p) != p:
		return strictjson.Faultf(at, "socket is not a clean path (no ., .., // or trailing /)")
	case p == "/":
		return strictjson.Faultf(at, "socket is /, not a socket's path")
	case len(filepath.Base(p)) > MaxSocketNameBytes:
		return strictjson.Faultf(at, "socket's name is %d bytes, more than %d", len(filepath.Base(p)), MaxSocketNameBytes)
	}
	return nil
}

// checkBinding requires a binding of the supported table, with exactly
// its runtime set.
func checkBinding(at string, s Service) error {
	b := *s.Binding
	if !bindingRE.MatchString(b.Adapter) {
		return strictjson.Faultf(at+"/binding/adapter", "adapter %q is not [a-z0-9][a-z0-9._-]{0,127}", b.Adapter)
	}
	if !bindingRE.MatchString(b.Schema) {
		return strictjson.Faultf(at+"/binding/schema", "schema %q is not [a-z0-9][a-z0-9._-]{0,127}", b.Schema)
	}
	row, ok := lookup(b)
	if !ok {
		return strictjson.Faultf(at+"/binding", "unsupported binding: adapter %q with schema %q is not a binding Glove resolves", b.Adapter, b.Schema)
	}
	if !slices.Equal(s.RuntimeIDs, row.runtimes) {
		return strictjson.Faultf(at+"/binding", "unsupported binding: adapter %q with schema %q is supported only for runtime_ids %q", b.Adapter, b.Schema, row.runtimes)
	}
	return nil
}

// GuestChannelSchemaVersion is the guest channel schema version gloved
// advertises for c: the supported row's version when a service carries
// a supported binding with exactly that row's runtime set, 0 otherwise.
// An unbound service, even one allowed for pi, stays a generic proxy and
// advertises no channel; so do codex-only or opencode-only sets.
func GuestChannelSchemaVersion(c *Config) int {
	if c == nil {
		return 0
	}
	v := 0
	for _, s := range c.Services {
		if s.Binding == nil {
			continue
		}
		if row, ok := lookup(*s.Binding); ok && slices.Equal(s.RuntimeIDs, row.runtimes) && row.schemaVersion > v {
			v = row.schemaVersion
		}
	}
	return v
}

// Allows reports whether sessions of runtimeID may use s.
func (s Service) Allows(runtimeID string) bool {
	return slices.Contains(s.RuntimeIDs, runtimeID)
}

// ServicesFor lists, in alias order, the services a session of runtimeID
// may reach: those whose runtime_ids name it.
func ServicesFor(c *Config, runtimeID string) []Service {
	if c == nil {
		return nil
	}
	var out []Service
	for _, s := range c.Services {
		if s.Allows(runtimeID) {
			out = append(out, s)
		}
	}
	return out
}

// ServiceFor is the inherited-stream-v1 service a session of runtimeID
// gets: the configuration's one service, when c selects that transport
// and the service allows the runtime. Otherwise the session runs with no
// stream.
func ServiceFor(c *Config, runtimeID string) (Service, bool) {
	if c == nil || c.Transport == nil || *c.Transport != TransportInheritedStream || len(c.Services) != 1 {
		return Service{}, false
	}
	if s := c.Services[0]; s.Allows(runtimeID) {
		return s, true
	}
	return Service{}, false
}
