// SPDX-License-Identifier: Apache-2.0

package helperkit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/helpers/captable"
)

// notSystemCalls are the functions of golang.org/x/sys/unix a helper may
// call outside its syscalls file: they compute, they do not enter the
// kernel (and close(2), which every file may make).
var notSystemCalls = map[string]bool{
	"Close": true, "Mkdev": true, "Major": true, "Minor": true,
	"UnixRights": true, "CmsgSpace": true, "CmsgLen": true, "ParseOneSocketControlMessage": true,
}

// TestHelperLayout holds every helper to one file layout, so an auditor
// finds the same things in the same places in each (SECURITY.md, "Audit
// units"):
//
//   - NAME.go, the manifest: its name, bounds and Spec;
//   - seccomp.go: its allowlist, data only (no system call);
//   - syscalls_linux.go (syscalls_unsafe.go where a call needs unsafe):
//     every system call the helper makes itself, but close(2);
//   - the other files: its handlers, which call no unix or syscall
//     function but close(2);
//   - unsafe imported only in files named *_unsafe.go.
func TestHelperLayout(t *testing.T) {
	for _, dir := range []string{"mounter", "loopext4", "loopext4format", "cgroup", "streamproxy", "userns"} {
		path := filepath.Join("..", dir)
		ents, err := os.ReadDir(path)
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		sysFiles := 0
		for _, e := range ents {
			name := e.Name()
			if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			have[name] = true
			isSys := strings.HasPrefix(name, "syscalls_")
			if isSys {
				sysFiles++
			}
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(path, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			imports := map[string]string{} // local name -> path
			for _, im := range f.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				local := filepath.Base(p)
				if im.Name != nil {
					local = im.Name.Name
				}
				imports[local] = p
				if p == "unsafe" && !strings.HasSuffix(name, "_unsafe.go") {
					t.Errorf("%s/%s imports unsafe; only *_unsafe.go files may", dir, name)
				}
			}
			if isSys {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				switch imports[pkg.Name] {
				case "golang.org/x/sys/unix":
					if !notSystemCalls[sel.Sel.Name] {
						t.Errorf("%s/%s calls unix.%s: system calls belong in syscalls_linux.go", dir, name, sel.Sel.Name)
					}
				case "syscall":
					t.Errorf("%s/%s calls syscall.%s: system calls belong in syscalls_linux.go", dir, name, sel.Sel.Name)
				}
				return true
			})
		}
		for _, want := range []string{dir + ".go", "seccomp.go"} {
			if !have[want] {
				t.Errorf("helpers/%s has no %s", dir, want)
			}
		}
		if sysFiles == 0 {
			t.Errorf("helpers/%s has no syscalls_linux.go", dir)
		}
	}
}

// TestProtocolRows ties each helper's capability table row to its
// protocol: the package the row names declares `var Protocol =
// wire.NewProtocol("NAME", ...)` with the row's executable name, and the
// helper serves that very protocol (its Spec).
func TestProtocolRows(t *testing.T) {
	for _, f := range specs {
		s := f()
		row := captable.MustLookup(s.Name)
		if row.Protocol == "" {
			t.Errorf("%s: its row names no protocol package", s.Name)
			continue
		}
		dir := filepath.Join("..", "..", row.Protocol)
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		declared := ""
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				vs, ok := n.(*ast.ValueSpec)
				if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "Protocol" || len(vs.Values) != 1 {
					return true
				}
				if call, ok := vs.Values[0].(*ast.CallExpr); ok && len(call.Args) > 0 {
					if lit, ok := call.Args[0].(*ast.BasicLit); ok {
						declared, _ = strconv.Unquote(lit.Value)
					}
				}
				return true
			})
		}
		if declared != s.Name || s.Protocol.Name != s.Name {
			t.Errorf("%s: %s declares protocol %q, the helper serves %q", s.Name, row.Protocol, declared, s.Protocol.Name)
		}
	}
}
