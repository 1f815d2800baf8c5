// SPDX-License-Identifier: Apache-2.0

// Command glove-deb is what debian/rules asks of the capability table
// (package packaging):
//
//	glove-deb stage -bindir DIR -root DIR [-prefix /usr]
//	    copies the built executables into the package tree, modes from the table
//	glove-deb postinst -template FILE [-prefix /usr]
//	    prints the postinst: the template with one glove_helper line per helper
//	glove-deb bounding-set
//	    prints the union of the table's capabilities (CAP_SYS_ADMIN ...)
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/glove-sandbox/glove/packaging"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: glove-deb stage|postinst|bounding-set [flags]")
		return 2
	}
	fs := flag.NewFlagSet("glove-deb "+args[0], flag.ContinueOnError)
	prefix := fs.String("prefix", "/usr", "installation prefix")
	bindir := fs.String("bindir", "", "directory of the built executables (stage)")
	root := fs.String("root", "", "package file tree (stage)")
	tmpl := fs.String("template", "", "postinst template (postinst)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "glove-deb: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	switch args[0] {
	case "stage":
		if *bindir == "" || *root == "" {
			fmt.Fprintln(os.Stderr, "glove-deb stage: -bindir and -root are required")
			return 2
		}
		if err := packaging.Stage(*bindir, *root, *prefix); err != nil {
			fmt.Fprintln(os.Stderr, "glove-deb:", err)
			return 1
		}
	case "postinst":
		if *tmpl == "" {
			fmt.Fprintln(os.Stderr, "glove-deb postinst: -template is required")
			return 2
		}
		t, err := os.ReadFile(*tmpl)
		if err != nil {
			fmt.Fprintln(os.Stderr, "glove-deb:", err)
			return 1
		}
		out, err := packaging.Postinst(string(t), *prefix)
		if err != nil {
			fmt.Fprintln(os.Stderr, "glove-deb:", err)
			return 1
		}
		fmt.Print(out)
	case "bounding-set":
		fmt.Println(strings.Join(packaging.BoundingSet(), " "))
	default:
		fmt.Fprintf(os.Stderr, "glove-deb: unknown command %q\n", args[0])
		return 2
	}
	return 0
}
