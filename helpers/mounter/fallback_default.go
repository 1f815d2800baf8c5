//go:build !glove_testfallback

package mounter

// forceFallback is set only in the glove_testfallback build, which the
// integration tests use to run the open_tree + mount_setattr fallback on
// a kernel that has open_tree_attr. Production builds choose by probing
// the kernel (Spec).
const forceFallback = false
