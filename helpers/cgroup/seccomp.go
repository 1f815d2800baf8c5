package cgroup

import "github.com/glove-sandbox/glove/seccomp/bpf"

// Syscalls is glove-cgroup's addition to helperkit.BaseSyscalls. It is
// empty while the helper serves only Hello; openat/mkdirat/unlinkat
// relative to the delegated parent's descriptor and pidfd calls arrive
// with its operations.
var Syscalls = []bpf.Rule{}
