package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/xdpio/xdpio"

// imports maps each package directory of the module (relative to its
// root, "xsk", "internal/ethtool") to the module packages its non-test Go
// files import (relative too), and to every import path (full).
func imports(t *testing.T) (mod map[string]map[string]bool, all map[string]map[string]bool) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", root, err)
	}
	mod, all = map[string]map[string]bool{}, map[string]map[string]bool{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || strings.HasPrefix(n, ".") || (path != root && fileExists(filepath.Join(path, "go.mod"))) {
				return filepath.SkipDir // other modules (contrib/*) follow their own go.mod
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		dir = filepath.ToSlash(dir)
		if mod[dir] == nil {
			mod[dir], all[dir] = map[string]bool{}, map[string]bool{}
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			all[dir][p] = true
			if rel, ok := strings.CutPrefix(p, module+"/"); ok {
				mod[dir][rel] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return mod, all
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func under(dir, prefix string) bool { return dir == prefix || strings.HasPrefix(dir, prefix+"/") }

// rule is one "never": no package matching who imports a package matching
// what, except those allowed.
type rule struct {
	why   string
	who   func(dir string) bool
	what  func(imp string) bool
	allow func(dir, imp string) bool
}

func TestImportRules(t *testing.T) {
	mod, all := imports(t)
	is := func(prefixes ...string) func(string) bool {
		return func(s string) bool {
			for _, p := range prefixes {
				if under(s, p) {
					return true
				}
			}
			return false
		}
	}
	any := func(string) bool { return true }
	rules := []rule{
		{
			why:  "nic is the only importer of the device's netlink clients (internal/ethtool, netdev, napictl); napictl itself speaks netdev",
			who:  any,
			what: is("internal/ethtool", "internal/netdev", "internal/napictl"),
			allow: func(dir, imp string) bool {
				return dir == "nic" || under(dir, imp) || (dir == "internal/napictl" && imp == "internal/netdev")
			},
		},
		{
			why:  "xsk knows nothing of protocols, and asks the device only through nic",
			who:  is("xsk"),
			what: is("offload", "xdpnet", "netstack", "rss", "coalesce", "bench", "internal/ethtool", "internal/netdev", "internal/napictl"),
		},
		{
			why:  "offload knows nothing of sockets: it imports no other package of the module but the shared errors",
			who:  is("offload"),
			what: func(imp string) bool { return imp != "internal/errs" },
		},
		{
			why:  "only bench, cmd, contrib, examples and the tests put the pieces together for tools: nothing else imports them",
			who:  func(dir string) bool { return !is("bench", "cmd", "examples", "test")(dir) },
			what: is("bench", "cmd", "examples"),
		},
		{
			why:  "bench/plane is what the engine asks of a data plane: it imports no plane",
			who:  is("bench/plane"),
			what: is("bench/kernelplane", "bench/xskplane", "bench/asavieplane", "bench/netstackplane", "bench/gvisorxdpplane"),
		},
		{
			why:   "only test helpers (packages named *test) import internal/netnstest",
			who:   any,
			what:  is("internal/netnstest"),
			allow: func(dir, _ string) bool { return strings.HasSuffix(dir, "test") },
		},
	}
	for _, r := range rules {
		var bad []string
		for dir, imps := range mod {
			if !r.who(dir) {
				continue
			}
			for imp := range imps {
				if r.what(imp) && !(r.allow != nil && r.allow(dir, imp)) && !under(imp, dir) {
					bad = append(bad, dir+" imports "+imp)
				}
			}
		}
		sort.Strings(bad)
		for _, b := range bad {
			t.Errorf("%s: %s", r.why, b)
		}
	}
	// The core module never pulls the contrib modules' dependencies.
	for dir, imps := range all {
		for imp := range imps {
			if strings.Contains(imp, "prometheus/client_golang") || strings.Contains(imp, "golang.zx2c4.com/wireguard") || strings.Contains(imp, "quic-go") {
				t.Errorf("the core module imports a contrib dependency: %s imports %s", dir, imp)
			}
		}
	}
	if len(mod["xsk"]) == 0 || len(mod["nic"]) == 0 {
		t.Fatalf("found no imports of xsk or nic: the walk went wrong (%d packages)", len(mod))
	}
}
