// SPDX-License-Identifier: Apache-2.0

package seccomp

import (
	"github.com/glove-sandbox/glove/seccomp/profile"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// ProfileOptions are the default profile's per-session inputs.
type ProfileOptions = profile.ProfileOptions

// DefaultProfile is Glove's sandbox profile (package profile, which holds
// it as data without cgo, so that the supervisor can write it into a
// bundle without linking libseccomp).
func DefaultProfile(o ProfileOptions) *specs.LinuxSeccomp { return profile.DefaultProfile(o) }
