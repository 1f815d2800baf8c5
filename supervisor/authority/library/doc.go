// SPDX-License-Identifier: Apache-2.0

// Package library is Glove's library bundle format and the pinned bundle
// root (docs/library-bundles.md).
//
// A session plan requests library bundles by SHA-256 digest (64
// lowercase hex characters) and destination alias. Glove opens the file
// named by the digest relative to the bundle root it pinned at start
// (--library-bundle-root), rehashes it, decodes it, and mounts it
// read-only at <destination target_path>/<digest>; for a native-skill
// runtime it also expands the bundle's skill entries into the runtime's
// skill directory in the private home (ExpandSkill).
//
// # Format
//
// A bundle is one JSON document (schema "glove.library-bundle-v1", at
// most MaxBundleBytes) holding entries, each of a kind, a name, an
// optional description and files:
//
//	{
//	  "schema": "glove.library-bundle-v1",
//	  "entries": [
//	    {
//	      "kind": "skill",
//	      "name": "pdf-tools",
//	      "description": "Extract text from PDF files.",
//	      "files": [
//	        {"path": "SKILL.md", "executable": false, "content": "LS0tCm5hbWU6IHBkZi10b29scwotLS0K"},
//	        {"path": "scripts/extract.sh", "executable": true, "content": "IyEvYmluL3NoCg=="}
//	      ]
//	    }
//	  ]
//	}
//
// Rules (every refusal wraps ErrFormat, or ErrKind for a kind, and names
// the JSON Pointer of the fault):
//   - strict JSON (supervisor/internal/strictjson): no unknown member, no
//     duplicate name, no null, no trailing data, names case-sensitive;
//   - every member is required except "description" (absent reads as "");
//   - schema is exactly Schema;
//   - 1 to 256 entries, sorted by (kind, name) bytewise, unique;
//   - kind is one of skill, behavior, prompt, template, workflow; any
//     other kind fails closed with ErrKind, naming the kind and the entry
//     index;
//   - name matches [a-z0-9][a-z0-9-]{0,63} (Agent Skills names);
//   - description is at most 1024 bytes;
//   - 1 to 1024 files per entry, sorted bytewise by path, unique;
//   - a path is relative, at most 255 bytes and 8 components, each
//     component made of [A-Za-z0-9._-], neither "." nor "..", not
//     starting with a dot (no hidden files), no empty component; no path
//     is both a file and the parent of another file;
//   - a skill entry holds a top-level SKILL.md;
//   - content is standard padded base64 with zero padding bits and no
//     line break (one content, one spelling); the decoded contents of
//     all files together are at most MaxBundleBytes.
//
// Encode writes the canonical form (RFC 8785: members sorted, no
// whitespace, every member present, description included as "" when
// empty). A bundle file is named by the SHA-256 of its bytes, whatever
// their spelling; Write stores the canonical form. Entry.Digest is the
// SHA-256 of an entry's canonical JSON, the same for every spelling.
//
// # Threats
//
// The bundle root is a directory owned by the service account (the
// effective uid) with permission bits exactly 0700, reached without a
// symbolic link; its descriptor is kept (the pin: Root.Dev and Root.Ino)
// and its owner and mode are checked again at every Open. Each bundle
// file is opened relative to that descriptor with openat2
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, and its status is checked before
// a byte is read:
//   - a swapped or edited file: the content is rehashed through the
//     opened descriptor and compared with the requested digest
//     (ErrDigest), and the status is compared after the read
//     (ErrChanged);
//   - a hard link to a file elsewhere (which its other owner could
//     change after the check): exactly one link (ErrLinks), owner the
//     effective uid (ErrOwner), mode exactly 0600 (ErrMode);
//   - a symbolic link (to a file outside the root, or to another bundle):
//     never followed, refused as ErrType, as are directories, pipes
//     (opened O_NONBLOCK, so never waited on) and devices;
//   - an oversized file exhausting memory: the size is checked with
//     fstat before reading (ErrSize) and at most MaxBundleBytes+1 bytes
//     are ever read;
//   - an unknown kind, which an older Glove would otherwise ignore or
//     mishandle: refused (ErrKind);
//   - an entry that would escape its directory when expanded: paths are
//     relative and clean, and ExpandSkill creates everything with
//     O_EXCL beneath directory descriptors, following no link.
//
// Every error message is one line of the form
// "library: bundle DIGEST in "ROOT": SENTINEL: DETAIL" (or "library:
// SENTINEL: POINTER: DETAIL" from Decode).
package library
