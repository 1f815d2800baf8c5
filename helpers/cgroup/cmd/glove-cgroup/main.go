// SPDX-License-Identifier: Apache-2.0

// Command glove-cgroup is the session cgroup helper; see package cgroup.
package main

import (
	"github.com/glove-sandbox/glove/helpers/cgroup"
	"github.com/glove-sandbox/glove/helpers/helperkit"
)

func main() { helperkit.Main(cgroup.Spec()) }
