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
//	glove-deb rpm-files [-spec FILE [-write]]
//	    prints the RPM spec's %files lines of the executables (%attr and
//	    %caps from the table); with -spec, the spec with its generated block
//	    replaced by them, written back to FILE with -write
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/glove-sandbox/glove/packaging"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: glove-deb stage|postinst|bounding-set|rpm-files [flags]")
		return 2
	}
	fs := flag.NewFlagSet("glove-deb "+args[0], flag.ContinueOnError)
	prefix := fs.String("prefix", "/usr", "installation prefix")
	bindir := fs.String("bindir", "", "directory of the built executables (stage)")
	root := fs.String("root", "", "package file tree (stage)")
	tmpl := fs.String("template", "", "postinst template (postinst)")
	spec := fs.String("spec", "", "RPM spec whose generated block to replace (rpm-files)")
	write := fs.Bool("write", false, "write the spec back instead of printing it (rpm-files -spec)")
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
	case "rpm-files":
		if *spec == "" {
			if *write {
				fmt.Fprintln(os.Stderr, "glove-deb rpm-files: -write needs -spec")
				return 2
			}
			fmt.Println(strings.Join(packaging.RPMFileLines(packaging.RPMPrefix), "\n"))
			return 0
		}
		if err := rpmSpec(*spec, *write); err != nil {
			fmt.Fprintln(os.Stderr, "glove-deb:", err)
			return 1
		}
	case "bounding-set":
		fmt.Println(strings.Join(packaging.BoundingSet(), " "))
	default:
		fmt.Fprintf(os.Stderr, "glove-deb: unknown command %q\n", args[0])
		return 2
	}
	return 0
}

// rpmSpec prints the spec with its generated %files block renewed, or
// writes it back over the file (through a temporary file in the same
// directory and a rename, so an interrupted run leaves the old spec).
func rpmSpec(path string, write bool) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read spec: %w", err)
	}
	out, err := packaging.RPMSpec(string(old))
	if err != nil {
		return err
	}
	if !write {
		fmt.Print(out)
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".glove.spec.*")
	if err != nil {
		return fmt.Errorf("write spec: %w", err)
	}
	_, err = tmp.WriteString(out)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		if rerr := os.Remove(tmp.Name()); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return fmt.Errorf("write spec %s: %w", path, err)
	}
	return nil
}
