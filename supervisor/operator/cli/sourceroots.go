// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"fmt"
	"strings"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/engine/sourceroots"
)

// mounterRoots reads the installed glove-mounter's source roots; tests
// point it at bounds of their own.
var mounterRoots = sourceroots.Installed

// rootsPath is one host path a launch binds, with where it comes from
// (a JSON Pointer, or a flag) for the message.
type rootsPath struct{ at, path string }

// launchPaths lists what a launch of t asks glove-mounter to bind: the
// pinned executable, each search directory (for a staged one its stage
// tree, the bind's source), and each read-only path.
func launchPaths(at string, t *policy.RuntimeTemplate) []rootsPath {
	var out []rootsPath
	l := &t.Launch
	if l.ExecutablePath != "" {
		out = append(out, rootsPath{at + "/launch/executable_path", l.ExecutablePath})
	}
	for i, s := range l.ExecutableSearchPaths {
		p := s
		if root := policy.StagedRoot(s); root != "" {
			p = root
		}
		out = append(out, rootsPath{fmt.Sprintf("%s/launch/executable_search_paths/%d", at, i), p})
	}
	for i, p := range l.ReadOnlyPaths {
		out = append(out, rootsPath{fmt.Sprintf("%s/launch/read_only_paths/%d", at, i), p})
	}
	return out
}

// bindAliasPaths are the host paths of the path aliases a plan may bind
// (a read_only/bind access tuple): glove-mounter binds those, by
// descriptor, so they must lie beneath its source roots. A copy is made
// by gloved itself and needs none.
func bindAliasPaths(p *policy.Policy) []rootsPath {
	var out []rootsPath
	for i, a := range p.PathAliases {
		for _, t := range a.Access {
			if t.Materialization == policy.MaterializationBind && t.Launchable() {
				out = append(out, rootsPath{fmt.Sprintf("/path_aliases/%d/host_path", i), a.HostPath})
				break
			}
		}
	}
	return out
}

// checkSourceRoots compares paths with glove-mounter's source roots.
// It returns the one line to print when every path is beneath one (or
// why nothing could be checked: the bounds file unreadable, as on a host
// where Glove is not installed; then fault is nil and the launch itself
// decides), or the first fault as one line.
func checkSourceRoots(paths []rootsPath) (line string, fault error) {
	roots, err := mounterRoots()
	if err != nil {
		return fmt.Sprintf("source roots: not checked (%v)", err), nil
	}
	seen := map[string]bool{}
	var used []string
	for _, p := range paths {
		root, err := roots.Check(p.path)
		if err != nil {
			if p.at != "" {
				return "", fmt.Errorf("%s: %w", p.at, err)
			}
			return "", err
		}
		if !seen[root] {
			seen[root] = true
			used = append(used, root)
		}
	}
	if len(paths) == 0 {
		return fmt.Sprintf("source roots: nothing to bind (%s)", roots.Describe()), nil
	}
	return fmt.Sprintf("source roots: every path a launch binds lies beneath glove-mounter's source root %s (%s)", strings.Join(used, ", "), roots.File), nil
}
