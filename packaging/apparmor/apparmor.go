// SPDX-License-Identifier: Apache-2.0

// Package apparmor holds glove-shim's AppArmor profiles as the package
// installs them (/etc/apparmor.d/glove-shim), built in so that a test run
// away from the source tree (the VM lane's prebuilt tests) loads the same
// bytes.
package apparmor

import (
	_ "embed"
	"strings"
)

// ShimProfile is the file glove-shim: profiles glove-shim and
// glove-sandbox.
//
//go:embed glove-shim
var ShimProfile string

// InstalledShim is the shim's path the profile attaches to, as the
// package installs it.
const InstalledShim = "/usr/{,local/}libexec/glove/glove-shim"

// ShimProfileFor is ShimProfile attached to the shim at path instead of
// the installed one (a test's shim), its own execution kept in the
// profile as the installed shim's is.
func ShimProfileFor(path string) string { return strings.ReplaceAll(ShimProfile, InstalledShim, path) }
