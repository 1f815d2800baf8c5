// SPDX-License-Identifier: Apache-2.0

//go:build glove_testfallback

package mounter

// forceFallback: see fallback_default.go. Never installed.
const forceFallback = true
