// Package examples holds no code, only this test: the programs under
// examples/ are what a user copies into another module, so they may use
// only the module's public packages (examples/exutil among them). A test
// may use the internal ones (rxdrop's demo harness does, and the flag
// tests use examples/internal/flagtest); a program file may not.
package examples

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// module is the module's path: an import under it with an "internal"
// element (github.com/xdpio/xdpio/internal/..., or the examples' own
// examples/internal/...) cannot be imported from another module, so a
// program copied out of examples/ that used one would not build.
// examples/exutil, shared by the programs, is public for that reason (and
// this test covers its files too).
const module = "github.com/xdpio/xdpio"

// isInternal reports whether the import path p is one of the module's
// internal packages.
func isInternal(p string) bool {
	rest, ok := strings.CutPrefix(p, module+"/")
	return ok && slices.Contains(strings.Split(rest, "/"), "internal")
}

// internalImports returns "file: import" for every import of the module's
// internal packages (isInternal) by a non-test Go file under root, whatever its build
// constraints (every GOOS, every tag).
func internalImports(t *testing.T, root string) []string {
	t.Helper()
	var bad []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if isInternal(p) {
				bad = append(bad, path+": "+p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bad
}

func TestExamplesUsePublicPackagesOnly(t *testing.T) {
	if bad := internalImports(t, "."); len(bad) > 0 {
		t.Errorf("examples must use the public packages only; these files import internal ones (move such code into a test or a cmd):\n%s", strings.Join(bad, "\n"))
	}
}

// The check finds an internal import in a program file, behind any build
// constraint and under examples/ too, and lets a test file have one; a
// public package, another module's internal one, or a name that only
// starts with "internal" is no internal import of this module.
func TestInternalImportsCheck(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"a/main.go":       "package main\n\nimport \"github.com/xdpio/xdpio/xsk\"\n\nvar _ = xsk.ErrClosed\n",
		"a/demo_linux.go": "//go:build linux && demo\n\npackage main\n\nimport _ \"github.com/xdpio/xdpio/internal/vethpair\"\n",
		"a/main_test.go":  "package main\n\nimport _ \"github.com/xdpio/xdpio/internal/netnstest\"\n",
		"b/lib.go":        "package b\n\nimport (\n\t\"fmt\"\n\tgen \"github.com/xdpio/xdpio/internal/trafficgen\"\n)\n",
		"c/main.go":       "package main\n\nimport (\n\t\"github.com/xdpio/xdpio/examples/exutil\"\n\t\"github.com/xdpio/xdpio/examples/internal/exutil\"\n\t\"example.com/internal/x\"\n\t\"github.com/xdpio/xdpio/internalx\"\n)\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := internalImports(t, dir)
	want := []string{
		filepath.Join(dir, "a/demo_linux.go") + ": github.com/xdpio/xdpio/internal/vethpair",
		filepath.Join(dir, "b/lib.go") + ": github.com/xdpio/xdpio/internal/trafficgen",
		filepath.Join(dir, "c/main.go") + ": github.com/xdpio/xdpio/examples/internal/exutil",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
