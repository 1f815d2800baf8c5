module github.com/glove-sandbox/glove

go 1.26.0

// Helpers run under a seccomp allowlist with every inherited descriptor
// above 3 closed. Since Go 1.25 the runtime re-reads the cgroup CPU limit
// about once a second with pread64 on a descriptor it opened before main:
// the allowlist would kill an idle helper, and the descriptor number may
// by then be one of the helper's own. No Glove program needs a changing
// GOMAXPROCS, and a helper's environment must stay empty, so the refresh
// is switched off here for every program of the module.
godebug updatemaxprocs=0

require (
	github.com/go-json-experiment/json v1.27.2
	github.com/moby/profiles/seccomp v0.3.0
	github.com/opencontainers/runtime-spec v1.3.0
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	github.com/seccomp/libseccomp-golang v0.11.1
	github.com/sirupsen/logrus v1.10.2
	github.com/vishvananda/netlink v1.3.1
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/vishvananda/netns v0.0.5 // indirect
	golang.org/x/text v0.43.0 // indirect
)
