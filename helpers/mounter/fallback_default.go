// SPDX-License-Identifier: Apache-2.0

//go:build !glove_testfallback

package mounter

// forceFallback is true only in the glove_testfallback build, with which
// the integration tests run the fallback on a kernel with open_tree_attr.
const forceFallback = false
