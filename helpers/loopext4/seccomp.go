package loopext4

import "github.com/glove-sandbox/glove/seccomp/bpf"

// Syscalls is glove-loopext4's addition to helperkit.BaseSyscalls. It is
// empty while the helper serves only Hello; the loop ioctls, fallocate,
// fsopen/fsconfig/fsmount and the mkfs.ext4 execution arrive with Create
// and Attach.
var Syscalls = []bpf.Rule{}
