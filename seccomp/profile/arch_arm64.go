// SPDX-License-Identifier: Apache-2.0

package profile

import specs "github.com/opencontainers/runtime-spec/specs-go"

// nativeArch is the only architecture of the default profile: calls through
// the arm32 compat table meet the bad-arch action (KILL_PROCESS).
const nativeArch = specs.ArchAARCH64
