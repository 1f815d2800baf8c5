// SPDX-License-Identifier: Apache-2.0

package profile

import specs "github.com/opencontainers/runtime-spec/specs-go"

// nativeArch is the only architecture of the default profile: calls through
// the i386 or x32 tables meet the bad-arch action (KILL_PROCESS).
const nativeArch = specs.ArchX86_64
