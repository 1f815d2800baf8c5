package mounter

import "github.com/glove-sandbox/glove/seccomp/bpf"

// Syscalls is glove-mounter's addition to helperkit.BaseSyscalls. It is
// empty while the helper serves only Hello; open_tree, fsopen, fsconfig,
// fsmount and mount_setattr arrive with the Bind and Tmpfs requests.
var Syscalls = []bpf.Rule{}
