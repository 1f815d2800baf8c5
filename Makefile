# SPDX-License-Identifier: Apache-2.0
# Glove. `make test` is the one test command (README.md, .ci/run).
PREFIX  ?= /usr/local
DESTDIR ?=
CONFDIR ?= /etc/glove
BINDIR  ?= bin
GROUP   ?= glove
GO      ?= go
FUZZTIME ?= 20s

# VERSION, when set (debian/rules sets the package's), is what `glove
# version` prints instead of "dev".
VERSION ?=
# PIE=1 (debian/rules sets it) builds position-independent executables:
# -buildmode=pie everywhere, glove-shim linked -static-pie (glibc's
# rcrt1.o; libseccomp.a and libc.a are PIC in Debian), so that every
# executable is loaded at a random address. The pure-Go PIEs name
# ld.so as their interpreter (and no library): for a helper that gains
# file capabilities the kernel sets AT_SECURE, and ld.so's
# secure-execution mode (ld.so(8)) ignores LD_LIBRARY_PATH and preloads
# only set-user-ID libraries from the system directories (threat: a
# caller's environment loading code into a capability-holding process);
# the others gain nothing by execve. Off by default: a developer's build and the tests' prebuilt
# binaries keep Go's default.
PIE ?=

MODULE  := github.com/glove-sandbox/glove
# -B gobuildid: a GNU build ID note derived from Go's build ID, which
# dh_strip needs to split the debug symbols into the -dbgsym package
# (the external linker adds its own for the cgo executables).
LDFLAGS := -B gobuildid \
           -X $(MODULE)/helpers/helperkit.ConfigDir=$(CONFDIR) \
           -X $(MODULE)/supervisor/operator/cli.LibexecDir=$(PREFIX)/libexec/glove \
           -X $(MODULE)/supervisor/service/daemon.LibexecDir=$(PREFIX)/libexec/glove \
           $(if $(VERSION),-X $(MODULE)/supervisor/operator/cli.Version=$(VERSION))
ifeq ($(PIE),1)
BUILDMODE   := -buildmode=pie
STATIC_LINK := -static-pie
else
BUILDMODE   :=
STATIC_LINK := -static
endif

# One main package per executable; the directory name is the binary name.
# CGO_CMDS are built with cgo, STATIC_CMDS with cgo and linked statically,
# NOCGO_CMDS without cgo (see build).
CGO_CMDS    := ./supervisor/cmd/glove
STATIC_CMDS := ./shim/cmd/glove-shim
NOCGO_CMDS  := ./supervisor/cmd/gloved \
               ./helpers/mounter/cmd/glove-mounter ./helpers/cgroup/cmd/glove-cgroup \
               ./helpers/streamproxy/cmd/glove-streamproxy ./helpers/loopext4/cmd/glove-loopext4 \
               ./helpers/loopext4format/cmd/glove-loopext4-format ./helpers/userns/cmd/glove-userns
CMDS := $(CGO_CMDS) $(STATIC_CMDS) $(NOCGO_CMDS)

# glove-shim is linked statically (libseccomp.a from libseccomp-dev,
# glibc's libc.a), with Go's own resolvers (netgo, osusergo) so that no
# glibc NSS code is linked in: it executes itself again in the sandbox's
# new namespaces (stage 1), where it loads nothing from the host's
# library directories, and a host needs no libseccomp to run it.
STATIC_FLAGS := -tags netgo,osusergo -ldflags '$(LDFLAGS) -linkmode external -extldflags "$(STATIC_LINK)"'
# The VM lane's test binaries are linked the same way: its guests have
# no libseccomp-dev and may have another glibc.
STATIC_TEST_FLAGS := -tags netgo,osusergo -ldflags '-linkmode external -extldflags "-static"'

# Decoders of untrusted bytes and their fuzz targets: package:Target.
FUZZ := ./helpers/wire:FuzzDecodeFrame ./helpers/wire/mountwire:FuzzDecode ./helpers/wire/loopwire:FuzzDecode ./helpers/wire/formatwire:FuzzDecode ./helpers/wire/cgwire:FuzzDecode ./helpers/wire/streamwire:FuzzDecode ./helpers/wire/userwire:FuzzDecode ./helpers/mounter:FuzzCheckTmpfs ./supervisor/authority/policy:FuzzPolicyDecode ./supervisor/authority/plan:FuzzPlanDecode ./supervisor/authority/localservice:FuzzDecode ./supervisor/state/journal:FuzzOpen ./spec:FuzzDecodeStrict ./spec:FuzzParseEgressListen ./seccomp:FuzzListenerFD ./shim:FuzzValidate ./shim:FuzzDecodePlan ./shim:FuzzCDecodePlan ./shim:FuzzCJoinParse ./shim:FuzzDecodeCacheEntry ./supervisor/service/daemon:FuzzParseRequest ./helpers/streamproxy/relay:FuzzReadFrame ./supervisor/authority/library:FuzzDecode ./supervisor/state/store:FuzzReplay ./supervisor/state/receipt:FuzzReplay ./supervisor/state/lease:FuzzDecode ./supervisor/service/daemon:FuzzParseConnectAddr ./supervisor/engine/egress:FuzzReceive

.PHONY: all build install deps test lint fuzz bench bench-more demo clean deb rpm vm-lane lane-tests

all: build

# glove and glove-shim are built with cgo: package seccomp compiles the
# sandbox's seccomp profile with libseccomp; glove prints it (`glove
# seccomp dump`) and glove-shim loads it. Everything else is built
# without cgo: the helpers change capabilities on every thread with
# syscall.AllThreadsSyscall, which refuses to run in a cgo binary (see
# helpers/helperkit/restrict_unsafe.go), and gloved needs no C (it writes
# the default profile from seccomp/profile, which is plain data).
# First what the build needs (scripts/install-deps.sh build): a few file
# tests when it is all there; missing, installed by apt-get as root, or
# named in one line otherwise.
build:
	@GO='$(GO)' scripts/install-deps.sh build
	@mkdir -p $(BINDIR)
	CGO_ENABLED=1 $(GO) build -trimpath $(BUILDMODE) -ldflags '$(LDFLAGS)' -o $(BINDIR)/ $(CGO_CMDS)
	CGO_ENABLED=1 $(GO) build -trimpath $(BUILDMODE) $(STATIC_FLAGS) -o $(BINDIR)/ $(STATIC_CMDS)
	CGO_ENABLED=0 $(GO) build -trimpath $(BUILDMODE) -ldflags '$(LDFLAGS)' -o $(BINDIR)/ $(NOCGO_CMDS)

install: build
	scripts/create-group.sh $(GROUP)
	$(GO) run ./helpers/install/cmd/glove-install -bindir $(BINDIR) -prefix $(PREFIX) -destdir '$(DESTDIR)' -group $(GROUP)

deps:
	scripts/install-deps.sh

# Everything: lint, unit, root-only integration and attack tests with leak
# checks, and every fuzz target's seed corpus (go test runs those, with
# the saved crashers under testdata/fuzz). Fuzzing itself is `make fuzz`:
# short -fuzztime runs fail at random with "context deadline exceeded"
# when the engine is still minimizing a new input, which would make this
# target flaky without finding anything.
test: deps lint
	$(GO) test -count=1 -timeout 20m ./...
	$(MAKE) vm-lane

# The VM lane (vmlane/README.md): the .deb of this tree, installed and run
# as an operator would in Debian guests booted under qemu, one cell per
# supported host (README, "Supported hosts"). The in-guest agent and the
# kernel-dependent tests (lane-tests) are built here: the guests have no Go.
VMLANE_CELLS ?=
vm-lane: lane-tests
	rm -f bin/deb/glove_*.deb
	$(MAKE) deb
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/vmlane/glove-lane-guest ./vmlane/guest/cmd/glove-lane-guest
	vmlane/run.sh --deb bin/deb/glove_*.deb --agent bin/vmlane/glove-lane-guest \
	  --tests bin/vmlane/tests --timeout-per-cell 900 $(if $(VMLANE_CELLS),--cells $(VMLANE_CELLS))

# bin/vmlane/tests: a static test binary NAME.test and its -run pattern
# NAME.run for each line of vmlane/tests, and prebuilt/ (testenv's
# prebuilt mode: what make build makes and the test-only tools). A line
# with cell=CELL goes to cells/CELL/ as NAME-CELL (vmlane/run.sh lays
# that over the rest in CELL's guest only) and is not built when
# VMLANE_CELLS leaves CELL out; the option harnesses installs the pinned
# real harnesses from npm into the host's cache and copies their
# binaries into that directory's prebuilt/harnesses (the guests have no
# npm; testenv/harnesses.Prebuild).
lane-tests:
	rm -rf bin/vmlane/tests
	@mkdir -p bin/vmlane/tests
	$(GO) run ./testenv/cmd/glove-prebuild bin/vmlane/tests/prebuilt
	@set -e; grep -v '^[[:space:]]*\(#\|$$\)' vmlane/tests | while read -r pkg run opts; do \
	  dir=bin/vmlane/tests name=$$(basename $$pkg) cell= harn=; \
	  for o in $$opts; do case $$o in \
	    cell=*) cell=$${o#cell=} ;; \
	    harnesses) harn=1 ;; \
	    *) echo "vmlane/tests: $$pkg: unknown option $$o" >&2; exit 1 ;; esac; done; \
	  if [ -n "$$cell" ]; then \
	    awk -v c="$$cell" '$$1 == c { f = 1 } END { exit !f }' vmlane/cells || \
	      { echo "vmlane/tests: $$pkg: no cell $$cell in vmlane/cells" >&2; exit 1; }; \
	    case ",$(VMLANE_CELLS)," in ,,|*",$$cell,"*) ;; \
	      *) echo "lane test $$pkg -run $$run: cell $$cell only, not in VMLANE_CELLS: not built"; continue ;; esac; \
	    dir=bin/vmlane/tests/cells/$$cell name=$$name-$$cell; mkdir -p $$dir; fi; \
	  echo "lane test $$pkg -run $$run$${cell:+ (cell $$cell only)}"; \
	  CGO_ENABLED=1 $(GO) test -c -trimpath $(STATIC_TEST_FLAGS) -o $$dir/$$name.test $$pkg; \
	  printf '%s\n' "$$run" > $$dir/$$name.run; \
	  if [ -n "$$harn" ] && [ ! -d $$dir/prebuilt/harnesses ]; then \
	    $(GO) run ./testenv/harnesses/cmd/glove-install-harnesses -prebuilt $$dir/prebuilt; fi; \
	done

lint: deps
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt: not formatted:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	.tools/bin/staticcheck ./...

fuzz:
	@set -e; for t in $(FUZZ); do pkg=$${t%%:*}; name=$${t##*:}; \
	  echo "fuzz $$pkg $$name $(FUZZTIME)"; \
	  $(GO) test -run=NONE -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) $$pkg; done

# Benchmarks, each beside its anchor in the same run, as one table:
# Glove's figure, the anchor's, the ratio and issue 19's goal
# (testenv/benchtable; each run's output is kept in bin/bench). Root, as
# the integration tests: the benchmarks install what they start.
bench:
	$(GO) run ./testenv/benchtable/cmd/glove-benchtable -out bin/bench

# The benchmarks the table does not hold (image creation, the store).
bench-more:
	$(GO) test -run=NONE -bench=Loopext4 -benchtime=20x -count=3 ./helpers/integration/
	$(GO) test -run=NONE -bench=Sessions -benchtime=1000000x -count=1 ./supervisor/state/store/

# The Debian package bin/deb/glove_<version>_<arch>.deb (and its
# -dbgsym .ddeb, .changes, .buildinfo): the source package debian/,
# built by dpkg-buildpackage in a copy of the tree under bin/deb-src so
# that nothing is written outside the repository (scripts/build-deb.sh,
# docs/packaging.md).
deb:
	scripts/build-deb.sh

# The end-to-end demo, as root on a fresh machine: scripts/demo.sh. It
# installs into /opt/glove-demo with bounds in /etc/glove-demo, never the
# package's /etc/glove (docs/packaging.md).
demo:
	scripts/demo.sh

clean:
	rm -rf $(BINDIR)

# The RPM bin/rpm/RPMS/<arch>/glove-<version>-1.<arch>.rpm: the spec's
# own command with rpm's whole tree (build directory, buildroot, RPMS)
# under bin/rpm, so that nothing is written outside the repository
# (packaging/rpm/glove.spec, docs/packaging.md). The spec builds with the
# go on PATH, not $(GO).
rpm:
	rm -rf bin/rpm/RPMS
	rpmbuild -bb packaging/rpm/glove.spec --define "_topdir $(CURDIR)/bin/rpm"
