// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// AdapterDigestTag separates adapter command digests from every other
// SHA-256 Glove computes: the same bytes hashed for another purpose can
// never collide with a launch command.
const AdapterDigestTag = "glove-adapter-command-v1"

// hostFilesTag introduces launch.host_files in the preimage.
const hostFilesTag = "host_files"

// Launch modes, as encoded in the digest.
const (
	launchModeExecutable = "executable"
	launchModeDiscovery  = "discovery"
)

// AdapterDigest computes the adapter_command_digest of a template's
// launch fields: lowercase hex SHA-256 of adapterPreimage. The template's
// own AdapterCommandDigest field is ignored.
//
// Threat: a controller approves "codex-safe" believing it runs one
// command, and the operator (or an attacker able to edit the policy
// between reviews) changes what "codex-safe" runs. The plan carries the
// digest it was approved against; gloved recomputes it from the policy,
// so any change to what is executed, with which arguments, environment
// or read-only dependencies, on which backend, is a mismatch.
func AdapterDigest(t *RuntimeTemplate) string {
	sum := sha256.Sum256(adapterPreimage(t))
	return hex.EncodeToString(sum[:])
}

// adapterPreimage is the byte string that AdapterDigest hashes,
// documented byte by byte in docs/adapter-digest.md. Every string is
// framed by its length (4 bytes, big-endian) and every list by its
// element count (4 bytes, big-endian), so no two different templates
// encode to the same bytes: a boundary between fields cannot be moved by
// putting separator-like characters inside a value.
//
//	str(tag) str(runtime_id) str(sandbox_backend)
//	then either str("executable") str(executable_path)
//	         or str("discovery") str(runtime_discovery) list(executable_search_paths)
//	list(arguments) list(environment) list(read_only_paths)
//	then, only when host_files is not empty, str("host_files") list(host_files)
//
// The last part is absent for a template without host_files, so the
// digests of templates written before it are unchanged; with it, the
// preimage is longer than any without, and parses one way (a list's
// count always ends it).
//
// The mode string is chosen by RuntimeDiscovery being non-empty, which
// is also how Validate tells the two forms apart.
func adapterPreimage(t *RuntimeTemplate) []byte {
	var b []byte
	b = appendStr(b, AdapterDigestTag)
	b = appendStr(b, t.RuntimeID)
	b = appendStr(b, t.SandboxBackend)
	l := &t.Launch
	if l.RuntimeDiscovery != "" {
		b = appendStr(b, launchModeDiscovery)
		b = appendStr(b, l.RuntimeDiscovery)
		b = appendList(b, l.ExecutableSearchPaths)
	} else {
		b = appendStr(b, launchModeExecutable)
		b = appendStr(b, l.ExecutablePath)
	}
	b = appendList(b, l.Arguments)
	b = appendList(b, l.Environment)
	b = appendList(b, l.ReadOnlyPaths)
	if len(l.HostFiles) > 0 {
		b = appendStr(b, hostFilesTag)
		b = appendList(b, l.HostFiles)
	}
	return b
}

func appendStr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func appendList(b []byte, ss []string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(ss)))
	for _, s := range ss {
		b = appendStr(b, s)
	}
	return b
}
