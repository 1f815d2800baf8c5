// SPDX-License-Identifier: Apache-2.0

package policy

import "github.com/glove-sandbox/glove/supervisor/internal/strictjson"

// Canonical encodes p as canonical JSON (RFC 8785; see
// strictjson.Canonical). The three optional launch members
// (executable_path, runtime_discovery, executable_search_paths) are
// omitted when empty (omitzero), since Decode reads an absent member and
// an empty one alike; every other member is always written. Decode(Canonical(p))
// equals p for every decoded p.
func Canonical(p *Policy) []byte { return strictjson.Canonical(p) }
