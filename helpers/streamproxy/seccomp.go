package streamproxy

import "github.com/glove-sandbox/glove/seccomp/bpf"

// Syscalls is glove-streamproxy's addition to helperkit.BaseSyscalls. It
// is empty while the helper serves only Hello; the relay's reads, writes
// and polls on the descriptors it is given arrive with its requests.
var Syscalls = []bpf.Rule{}
