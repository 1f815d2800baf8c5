// SPDX-License-Identifier: Apache-2.0

package session

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"golang.org/x/sys/unix"
)

// This file gives a launch the parts of /etc its template's host_files
// name (docs/policy.md, "Host files"), and nothing else of the host's
// /etc: without a member the sandbox has no /etc at all.
//
//   - ca_certificates: the host's /etc/ssl/certs (ca-certificates.crt and
//     the hashed links OpenSSL's CApath lookup uses) bound read-only at
//     the same path, and the directories those links point into
//     (policy.HostCALinkDirs) where they exist and no read-only path of
//     the template already shows them. /etc/ssl itself is not bound:
//     its private/ holds the host's TLS keys.
//   - name_service: /etc is a read-only directory of the session's
//     scratch that gloved fills before the program exists: passwd and
//     group naming the sandbox user (SandboxUID, its HOME) and nobody,
//     nsswitch.conf (files only: there is no DNS), hosts (loopback and
//     the sandbox's hostname). Threat: the host's passwd and group name
//     its accounts, services and their homes; its hosts, its resolver
//     and machine-id identify and map the host.

// SyntheticEtc is the kind of the name_service /etc: a directory of the
// session's scratch, filled by gloved (fillEtc), bound read-only.
const SyntheticEtc = "synthetic_etc"

// EtcDir is where SyntheticEtc is mounted.
const EtcDir = "/etc"

// resolveHostFiles adds the mounts of members to l. Called once l's
// environment (HOME) and read-only paths are known.
func resolveHostFiles(l *Launch, members []string, readOnly []string) error {
	for _, m := range members {
		switch m {
		case policy.HostFilesNameService:
			l.Mounts = append(l.Mounts, Mount{Target: EtcDir, Kind: SyntheticEtc, ReadOnly: true, Mode: 0o755})
		case policy.HostFilesCA:
			if err := checkCADir(policy.HostCADir); err != nil {
				return fmt.Errorf("resolve: host_files %s: %w", m, err)
			}
			l.Mounts = append(l.Mounts, Mount{Target: policy.HostCADir, Kind: ReadOnlyBind, HostPath: policy.HostCADir})
			for _, d := range policy.HostCALinkDirs {
				if slices.ContainsFunc(readOnly, func(p string) bool { return p == d || strings.HasPrefix(d, p+"/") }) {
					continue // shown by the template's own read-only path
				}
				var st unix.Stat_t
				if err := unix.Lstat(d, &st); errors.Is(err, unix.ENOENT) {
					continue // not on this host: nothing links there
				} else if err != nil {
					return fmt.Errorf("resolve: host_files %s: %s: %w", m, d, err)
				}
				l.Mounts = append(l.Mounts, Mount{Target: d, Kind: ReadOnlyBind, HostPath: d})
			}
		default:
			return fmt.Errorf("resolve: host_files: %q is not a member this Glove knows: %w", m, ErrInvalid)
		}
	}
	return nil
}

// checkCADir says, in the operator's words, why the host's CA directory
// dir cannot be shown, before glove-mounter would refuse the bind with
// a bare errno: missing (the ca-certificates package is not installed),
// or not a directory (a link: another distribution's layout, which the
// bind does not follow, so that a link cannot redirect it).
func checkCADir(dir string) error {
	var st unix.Stat_t
	err := unix.Lstat(dir, &st)
	switch {
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("this host has no %s (install its CA certificates: Debian's ca-certificates package), or drop ca_certificates from the template", dir)
	case err != nil:
		return fmt.Errorf("%s: %w", dir, err)
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fmt.Errorf("%s is a symbolic link on this host, which the bind does not follow; ca_certificates needs it a directory (Debian's layout)", dir)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("%s is not a directory on this host", dir)
	}
	return nil
}

// etcFiles is the content of the synthetic /etc of l: file name to
// bytes. The sandbox user's home is l's HOME, its shell /bin/sh.
func etcFiles(l *Launch) map[string]string {
	home := "/"
	for _, e := range l.Env {
		if v, ok := strings.CutPrefix(e, "HOME="); ok {
			home = v
		}
	}
	host := l.Hostname
	if host == "" {
		host = "localhost"
	}
	return map[string]string{
		"passwd": fmt.Sprintf("agent:x:%d:%d:agent:%s:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", SandboxUID, SandboxGID, home),
		"group":  fmt.Sprintf("agent:x:%d:\nnogroup:x:65534:\n", SandboxGID),
		// files only: the sandbox has no resolver and no directory
		// service to ask.
		"nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
		"hosts":         fmt.Sprintf("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t%s\n", host),
	}
}

// fillEtc writes the synthetic /etc through its directory's descriptor
// (mode 0644 files, created, never through a link) and the mount points
// of the mounts beneath it (the directory is bound read-only, so the
// shim could not make them).
func fillEtc(dir *os.File, l *Launch) error {
	for name, content := range etcFiles(l) {
		fd, err := unix.Openat(int(dir.Fd()), name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return fmt.Errorf("synthetic /etc: create %s: %w", name, err)
		}
		f := os.NewFile(uintptr(fd), name)
		_, werr := f.WriteString(content)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			if errors.Is(werr, unix.ENOSPC) || errors.Is(werr, unix.EDQUOT) {
				return fmt.Errorf("%s: the synthetic /etc needs more than the scratch's quota: %w", LimitDisk, werr)
			}
			return fmt.Errorf("synthetic /etc: write %s: %w", name, werr)
		}
	}
	for _, m := range l.Mounts {
		rel, ok := cutDir(m.Target, EtcDir)
		if !ok {
			continue
		}
		sub, err := mkdirAll(dir, rel)
		if err != nil {
			return fmt.Errorf("synthetic /etc: mount point %s: %w", m.Target, err)
		}
		sub.Close()
	}
	return nil
}
