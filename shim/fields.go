// SPDX-License-Identifier: Apache-2.0

package shim

import (
	"fmt"
	"reflect"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// implemented lists the config.json members glove-shim executes, by JSON
// path ("[]" stands for any list index). A member listed here is checked
// in detail by Validate; any other member that is present and not its
// zero value makes the shim refuse the bundle, naming the member. The walk
// is over the runtime-spec Go types, so a member added to a later version
// of the specification is refused until it is implemented here: a sandbox
// that silently ignored, say, linux.sysctl or process.apparmorProfile
// would run with less (or other) protection than its author asked for.
var implemented = map[string]bool{
	"ociVersion":              true,
	"hostname":                true,
	"annotations":             true, // metadata by definition: no behaviour
	"process.terminal":        true,
	"process.user.uid":        true,
	"process.user.gid":        true,
	"process.user.umask":      true,
	"process.args":            true,
	"process.env":             true,
	"process.cwd":             true,
	"process.capabilities":    true, // accepted only empty
	"process.rlimits":         true,
	"process.noNewPrivileges": true, // accepted only true
	"root.path":               true,
	"root.readonly":           true,
	"mounts[].destination":    true,
	"mounts[].type":           true,
	"mounts[].source":         true,
	"mounts[].options":        true,
	"linux.uidMappings":       true,
	"linux.gidMappings":       true,
	"linux.namespaces[].type": true,
	"linux.seccomp":           true, // checked member by member by package seccomp
	"linux.maskedPaths":       true,
	"linux.readonlyPaths":     true,
	"linux.rootfsPropagation": true, // accepted only private or rprivate
}

// checkImplemented refuses the first member of s that glove-shim does not
// implement.
func checkImplemented(s *specs.Spec) error {
	return walkFields(reflect.ValueOf(s).Elem(), "", "")
}

// interior reports whether some implemented member lies below key.
func interior(key string) bool {
	for k := range implemented {
		if strings.HasPrefix(k, key+".") || strings.HasPrefix(k, key+"[].") {
			return true
		}
	}
	return false
}

// walkFields visits v, which is present (not its zero value); key is the
// path with list indices as "[]" (for the table), shown the path with
// real indices (for the message). A present member is accepted when it is
// implemented, walked into when something below it is, and refused
// otherwise, even when empty: `"resources": {}` asks for something
// glove-shim does not do, and saying so is clearer than ignoring it.
func walkFields(v reflect.Value, key, shown string) error {
	if key != "" && implemented[key] {
		return nil
	}
	if key != "" && !interior(key) {
		return fmt.Errorf("config.json: %s: %w", shown, errNotImplemented)
	}
	switch v.Kind() {
	case reflect.Pointer:
		return walkFields(v.Elem(), key, shown)
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				name = f.Name
			}
			fv := v.Field(i)
			if fv.IsZero() {
				continue
			}
			if err := walkFields(fv, join(key, name), join(shown, name)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			if err := walkFields(v.Index(i), key+"[]", fmt.Sprintf("%s[%d]", shown, i)); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("config.json: %s: %w", shown, errNotImplemented)
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}
