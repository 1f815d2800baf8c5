// SPDX-License-Identifier: Apache-2.0

package strictjson

import (
	"fmt"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Canonical encodes v as RFC 8785 (JCS) canonical JSON: no insignificant
// whitespace, object members sorted, minimal string escaping. Digests are
// taken over these bytes, so another implementation (the controller's)
// can reproduce them from the same value without sharing code. The
// library's canonicalizer does the work; Glove's types (strings and
// integers below 2^53, slices that marshal as [] when empty) have exactly
// one encoding under it.
//
// It panics if v cannot be marshalled: callers pass their own plain
// structs, so a failure is a programming error, and a silently different
// encoding would change a content digest.
func Canonical(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("strictjson: marshal %T: %v", v, err))
	}
	val := jsontext.Value(b)
	if err := val.Canonicalize(); err != nil {
		panic(fmt.Sprintf("strictjson: canonicalize %T: %v", v, err))
	}
	return val
}
