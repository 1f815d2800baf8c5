// Command glove-install-harnesses installs the pinned real harnesses into
// the test cache (package testenv/harnesses), for CI to run before the
// tests or to warm a cache. It prints one line per harness: name,
// whether it was installed or found, how long that took, and the binary.
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
	flag.Parse()
	failed := false
	for _, h := range harnesses.All {
		r, err := h.Install(context.Background(), *cache)
		if err != nil {
			fmt.Fprintln(os.Stderr, "glove-install-harnesses:", err)
			failed = true
			continue
		}
		how := "cached"
		if r.Installed {
			how = "installed"
		}
		fmt.Printf("%s\t%s\t%.1fs\t%s\t%s\n", h.Name, how, r.Took.Seconds(), r.Version, r.Path)
	}
	if failed {
		os.Exit(1)
	}
}
