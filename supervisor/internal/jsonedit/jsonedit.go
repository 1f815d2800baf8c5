// SPDX-License-Identifier: Apache-2.0

// Package jsonedit derives one JSON document from another by JSON Pointer
// edits. Tests use it to build each bad policy or plan as a small
// mutation of a valid one; gloved never uses it.
package jsonedit

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
)

// Edit decodes doc loosely, applies set/delete operations addressed by
// JSON Pointer, and re-encodes it. It exists for tests and tools that
// derive one document from another (a bad policy from a good one); it is
// never used on input gloved trusts. A nil value deletes the member or
// element; the pointer token "-" appends to an array.
func Edit(doc []byte, ops ...EditOp) ([]byte, error) {
	var root any
	if err := json.Unmarshal(doc, &root); err != nil {
		return nil, fmt.Errorf("edit: decode: %w", err)
	}
	for _, op := range ops {
		var err error
		root, err = apply(root, splitPointer(op.Pointer), op.Value, op.Delete)
		if err != nil {
			return nil, fmt.Errorf("edit %s: %w", op.Pointer, err)
		}
	}
	out, err := json.Marshal(root, json.Deterministic(true))
	if err != nil {
		return nil, fmt.Errorf("edit: encode: %w", err)
	}
	return out, nil
}

// EditOp sets Pointer to Value, or deletes it.
type EditOp struct {
	Pointer string
	Value   any
	Delete  bool
}

func splitPointer(p string) []string {
	if p == "" {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, s := range parts {
		parts[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(s)
	}
	return parts
}

func apply(node any, path []string, v any, del bool) (any, error) {
	if len(path) == 0 {
		return v, nil
	}
	switch n := node.(type) {
	case map[string]any:
		if len(path) == 1 {
			if del {
				delete(n, path[0])
			} else {
				n[path[0]] = v
			}
			return n, nil
		}
		child, ok := n[path[0]]
		if !ok {
			return nil, fmt.Errorf("no member %q", path[0])
		}
		c, err := apply(child, path[1:], v, del)
		if err != nil {
			return nil, err
		}
		n[path[0]] = c
		return n, nil
	case []any:
		if path[0] == "-" && len(path) == 1 {
			return append(n, v), nil
		}
		i, err := strconv.Atoi(path[0])
		if err != nil || i < 0 || i >= len(n) {
			return nil, fmt.Errorf("no element %q", path[0])
		}
		if len(path) == 1 {
			if del {
				return append(n[:i:i], n[i+1:]...), nil
			}
			n[i] = v
			return n, nil
		}
		c, err := apply(n[i], path[1:], v, del)
		if err != nil {
			return nil, err
		}
		n[i] = c
		return n, nil
	}
	return nil, fmt.Errorf("cannot descend into %T at %q", node, path[0])
}
