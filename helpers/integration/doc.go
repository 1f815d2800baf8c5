// SPDX-License-Identifier: Apache-2.0

// Package integration holds the root-only tests that run the installed
// helpers as the unprivileged service user (see testenv). It has no code
// of its own.
package integration
