// SPDX-License-Identifier: Apache-2.0

package helperkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/glove-sandbox/glove/trustpath"
)

// ConfigDir is where helpers read their bounds. It is fixed when the
// helper is built (go build -ldflags "-X <this package>.ConfigDir=DIR";
// the Makefile sets it from CONFDIR). It is never taken from argv, the
// environment or a request: the supervisor chooses all of those, and a
// compromised supervisor must not be able to point a helper at bounds of
// its own making.
var ConfigDir = "/etc/glove"

// MaxConfigBytes bounds a helper configuration file. Bounds are a few
// lists and numbers; anything larger is not a configuration we wrote.
const MaxConfigBytes = 64 << 10

// Config is a helper's bounds, decoded from JSON. Validate checks the
// decoded bounds and names the first fault.
type Config interface{ Validate() error }

// loadConfigFrom reads dir/name beneath rootPath ("/" but in tests),
// every directory down and the file owned by owner (uid 0 but in tests),
// writable by nobody else and no symbolic link (trustpath.ReadFile), and
// decodes it strictly into cfg.
//
// Threat: a helper's bounds decide what a compromised supervisor can make
// it do. If the service user (or anyone but root) could write the file, or
// rename a directory anywhere above it, it could widen those bounds.
func loadConfigFrom(rootPath, dir, name string, owner uint32, cfg Config) error {
	if err := CheckAbsPath("configuration directory", dir); err != nil {
		return err
	}
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return fmt.Errorf("configuration file name %q: component is not a plain file name", name)
	}
	root, err := os.Open(rootPath)
	if err != nil {
		return fmt.Errorf("open %s: %w", rootPath, err)
	}
	defer root.Close()
	data, err := trustpath.ReadFile(root, filepath.Join(dir, name), owner, MaxConfigBytes)
	if err == nil {
		err = DecodeStrict(data, cfg)
	}
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		return fmt.Errorf("configuration %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

// DecodeStrict decodes one JSON object into v, rejecting unknown fields
// and anything after it. A misspelled bound must not silently become the
// zero value.
func DecodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("decode: trailing data after the configuration object")
	}
	return nil
}

// CheckAbsPath checks that a bound path is absolute and canonical. Bounds
// are compared by identity later; a non-canonical spelling is refused
// because it usually means the operator meant something else.
func CheckAbsPath(field, p string) error {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return fmt.Errorf("%s: %q is not a clean absolute path", field, p)
	}
	return nil
}

// CheckRange checks 0 < v <= hardMax.
func CheckRange(field string, v, hardMax uint64) error {
	if v == 0 || v > hardMax {
		return fmt.Errorf("%s: %d is outside 1..%d", field, v, hardMax)
	}
	return nil
}

// CheckSchema checks a configuration's schema_version.
func CheckSchema(v int) error {
	if v != 1 {
		return fmt.Errorf("schema_version: %d is not 1", v)
	}
	return nil
}

// CheckPathList checks a non-empty, sorted, duplicate-free list of clean
// absolute paths, none beneath another: overlapping roots make it unclear
// which bound applies.
func CheckPathList(field string, paths []string) error {
	if len(paths) == 0 {
		return fmt.Errorf("%s: empty", field)
	}
	for i, p := range paths {
		if err := CheckAbsPath(fmt.Sprintf("%s[%d]", field, i), p); err != nil {
			return err
		}
		if i > 0 && paths[i-1] >= p {
			return fmt.Errorf("%s[%d]: %q is not sorted after %q or repeats it", field, i, p, paths[i-1])
		}
		for _, q := range paths[:i] {
			if q == "/" || strings.HasPrefix(p, q+"/") {
				return fmt.Errorf("%s[%d]: %q lies beneath %q", field, i, p, q)
			}
		}
	}
	return nil
}

// Fault is a configuration error naming its field.
func Fault(field, msg string) error { return fmt.Errorf("%s: %s", field, msg) }
