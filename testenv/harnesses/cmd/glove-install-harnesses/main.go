// SPDX-License-Identifier: Apache-2.0

// Command glove-install-harnesses installs the pinned real harnesses into
// the test cache (package testenv/harnesses), for CI to run before the
// tests or to warm a cache. It prints one line per harness: name,
// whether it was installed or found, how long that took, and the binary.
//
// With -prebuilt DIR it also copies the native binaries into DIR for
// testenv's prebuilt mode (harnesses.Prebuild): `make lane-tests` does
// this for the VM-lane cells whose tests run the harnesses, since the
// guests have no npm.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/glove-sandbox/glove/testenv/harnesses"
)

func main() {
	def, err := harnesses.DefaultCache()
	if err != nil {
		fmt.Fprintln(os.Stderr, "glove-install-harnesses:", err)
		os.Exit(1)
	}
	cache := flag.String("cache", def, "cache directory")
	prebuilt := flag.String("prebuilt", "", "also copy the binaries into this prebuilt directory (its harnesses/ must not exist)")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: glove-install-harnesses [-cache DIR] [-prebuilt DIR]")
		os.Exit(2)
	}
	if *prebuilt != "" {
		res, err := harnesses.Prebuild(context.Background(), *cache, *prebuilt)
		for i, r := range res {
			report(harnesses.All[i], r)
			fmt.Printf("\t-> %s\n", harnesses.All[i].PrebuiltPath(*prebuilt))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "glove-install-harnesses:", err)
			os.Exit(1)
		}
		return
	}
	failed := false
	for _, h := range harnesses.All {
		r, err := h.Install(context.Background(), *cache)
		if err != nil {
			fmt.Fprintln(os.Stderr, "glove-install-harnesses:", err)
			failed = true
			continue
		}
		report(h, r)
	}
	if failed {
		os.Exit(1)
	}
}

func report(h harnesses.Harness, r harnesses.Result) {
	how := "cached"
	if r.Installed {
		how = "installed"
	}
	fmt.Printf("%s\t%s\t%.1fs\t%s\t%s\n", h.Name, how, r.Took.Seconds(), r.Version, r.Path)
}
