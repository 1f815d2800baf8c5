// SPDX-License-Identifier: Apache-2.0

package localservice

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/internal/strictjson"
)

// FuzzDecode feeds arbitrary bytes to Decode and Validate. They must
// never panic; every refusal must be a one-line *strictjson.Fault; every
// decoded configuration must re-encode canonically to bytes that decode
// to an equal configuration, whose canonical form is the same and which
// validates exactly when the original did; and the derived values of an
// accepted one must agree with its own services.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(baseDoc))
	f.Add([]byte(streamDoc))
	for _, tc := range badDocs(f) {
		if len(tc.doc) <= 4096 {
			f.Add([]byte(tc.doc))
		}
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"services":[{"binding":{}}],"transport":""}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		if err != nil {
			checkFault(t, err)
			return
		}
		verr := Validate(c)
		if verr != nil {
			checkFault(t, verr)
		}
		canon := Canonical(c)
		c2, err := Decode(canon)
		if err != nil {
			t.Fatalf("the canonical form does not decode: %v\n%s", err, canon)
		}
		if !reflect.DeepEqual(norm(c), norm(c2)) {
			t.Fatalf("the canonical round trip changed the configuration:\n%+v\n%+v", c, c2)
		}
		if again := Canonical(c2); !bytes.Equal(canon, again) {
			t.Fatalf("the canonical form is not stable:\n%s\n%s", canon, again)
		}
		if (Validate(c2) == nil) != (verr == nil) {
			t.Fatalf("validity changed across the round trip: %v", verr)
		}
		if verr != nil {
			return
		}
		// An accepted configuration: a stream service allows exactly the
		// runtimes its service names, and a channel is advertised only
		// for a bound service.
		for _, s := range c.Services {
			for _, rt := range s.RuntimeIDs {
				if got, ok := ServiceFor(c, rt); ok != (c.Transport != nil) || (ok && got.Alias != s.Alias) {
					t.Fatalf("ServiceFor(%q) = %+v, %v", rt, got, ok)
				}
			}
		}
		bound := false
		for _, s := range c.Services {
			bound = bound || s.Binding != nil
		}
		if v := GuestChannelSchemaVersion(c); v != 0 && !bound || v == 0 && bound {
			t.Fatalf("guest channel schema version %d with bound %v", v, bound)
		}
	})
}

func checkFault(t *testing.T, err error) {
	t.Helper()
	var f *strictjson.Fault
	if !errors.As(err, &f) {
		t.Fatalf("error %v (%T) is not a *Fault", err, err)
	}
	if bytes.ContainsAny([]byte(err.Error()), "\n\r") {
		t.Fatalf("fault is not one line: %q", err)
	}
}

// norm reads nil and empty lists alike: Decode reads an absent list as
// nil and [] as empty, and both mean none.
func norm(c *Config) Config {
	n := *c
	n.Services = append([]Service{}, c.Services...)
	for i := range n.Services {
		n.Services[i].RuntimeIDs = append([]string{}, n.Services[i].RuntimeIDs...)
	}
	return n
}
