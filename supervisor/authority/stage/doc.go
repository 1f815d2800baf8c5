// SPDX-License-Identifier: Apache-2.0

// Package stage implements `glove policy stage`: it content-addresses a
// single-root package or interpreter closure and copies it into a
// dedicated, protected runtime directory, so that runtime discovery
// (supervisor/engine/discovery) admits it under its normal rules.
//
// Package-manager bin directories are often group-writable, and discovery
// refuses them by design. Staging copies the closure (one regular file, or
// one whole directory tree) into DIR/<digest>, where DIR passes
// discovery.OpenDirectory and every staged directory is mode 0555 and
// every file 0555 or 0444, owned by the caller.
//
// # Rules
//
//   - SOURCE is canonicalized once with filepath.EvalSymlinks; the
//     canonical path is opened with openat2(RESOLVE_NO_SYMLINKS) and from
//     then on everything is opened relative to descriptors with O_NOFOLLOW
//     and RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS|
//     RESOLVE_NO_XDEV. No path is ever resolved again by string.
//   - A harness home (HarnessHomes) is refused before anything is read: a
//     component of SOURCE (as given or canonical) or a directory met in the
//     walk named like one refuses the whole stage; nothing beneath it is
//     opened.
//   - Directories, regular files and symbolic links are staged. A file
//     keeps only the execute bit (0555 if any execute bit was set, else
//     0444); set-id and sticky bits are dropped. Hard links become separate
//     files. A symbolic link is staged only when its target is relative,
//     resolves lexically inside SOURCE, and has no ".." after a name (the
//     kernel resolves "link/.." physically, which could leave the tree).
//     FIFOs, sockets, devices and mount points refuse the stage.
//   - Bounds: MaxBytes of file content and MaxEntries entries.
//   - The entry point is bin/EXE when that exists, else EXE at the top
//     (a single-file SOURCE is staged as EXE), else vendor/<target>/bin/EXE
//     when exactly one target has it (an npm platform package); it must
//     be a regular, executable file, and an ELF executable of this
//     machine (entry.go): a script is refused, since its interpreter is
//     not in the stage and a staged runtime is launched as a unit; the
//     refusal names the npm platform package holding the native program
//     when the package names one. A dynamic executable's program
//     interpreter is reported: it comes from the host.
//   - Refusals happen in a metadata scan and a read of the entry point's
//     header, before any other content is read; then
//     the files are hashed; --yes copies into DIR/.stage-<random> (created
//     0700), re-hashes the copy, sets the final modes and renames it with
//     renameat2(RENAME_NOREPLACE) to DIR/<digest>. An existing
//     DIR/<digest> is re-hashed first: identical content is reported as
//     already staged and nothing is copied; different content is refused
//     and never overwritten. Any failure removes the temporary directory.
//
// # Digest
//
// The digest is the lowercase hex SHA-256 of this preimage, where F(b) is
// the 8-byte big-endian length of the byte string b followed by b:
//
//	F("glove.stage-tree-v1")
//	then, for every entry below the root, in walk order:
//	  directory:     F("d") F(path)
//	  regular file:  F("f") F(path) F(exec) F(size) F(sha256)
//	  symbolic link: F("l") F(path) F(target)
//
// path is the entry's path relative to the staged root, components joined
// by "/" (a single-file SOURCE is the one entry F("f") F(EXE) ...); exec is
// "1" when the staged file is executable, else "0"; size is the content
// length in decimal ASCII; sha256 is the 32 raw bytes of the content's
// SHA-256; target is the link's target text. Walk order: the names of each
// directory sorted bytewise, depth first (a directory's entry comes right
// before its contents). The root itself has no entry and owners, times and
// directory modes are not part of the digest.
package stage
