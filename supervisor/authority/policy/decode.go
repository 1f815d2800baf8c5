// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"fmt"

	"github.com/glove-sandbox/glove/supervisor/internal/strictjson"
)

// Decode strictly decodes a policy document (at most MaxPolicyBytes): one
// JSON object, no unknown member, no duplicate name, no null, no
// trailing data, member names matched case-sensitively. It does not
// validate; a failure is a *Fault naming the JSON Pointer.
func Decode(data []byte) (*Policy, error) {
	var p Policy
	if err := strictjson.Unmarshal(data, &p, MaxPolicyBytes); err != nil {
		return nil, err
	}
	return &p, nil
}

// Load reads the policy file through ReadProtected, decodes and validates
// it. The policy is then frozen for the process lifetime: the operator
// replaces the file atomically and restarts gloved to change it.
func Load(path string) (*Policy, error) {
	data, err := ReadProtected(path, MaxPolicyBytes)
	if err != nil {
		return nil, fmt.Errorf("load policy: %w", err)
	}
	p, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("load policy %s: %w", path, err)
	}
	if err := Validate(p); err != nil {
		return nil, fmt.Errorf("load policy %s: %w", path, err)
	}
	return p, nil
}
