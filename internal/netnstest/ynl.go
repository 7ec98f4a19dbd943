//go:build linux

package netnstest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// YNL is the kernel's own netlink CLI (tools/net/ynl) with the kernel's
// YAML specs, taken from Debian's linux-source package: an oracle for the
// generic netlink families that nobody here wrote.
type YNL struct {
	// CLI is the path of cli.py; run it with python3.
	CLI string
	// Specs is Documentation/netlink/specs.
	Specs string
	// Version is the linux-source version the tool comes from (e.g.
	// "6.12"); its specs may lack attributes of the running kernel, which
	// the tool then prints as "UnknownAttr(N)" with --process-unknown.
	Version string
}

// ynlCache is where RequireYNL extracts the tool, once per source version.
const ynlCache = "/var/cache/xdpio/ynl"

// RequireYNL returns the ynl tool, extracting it from the newest
// /usr/src/linux-source-*.tar.xz into /var/cache/xdpio/ynl on first use
// (only tools/net/ynl and Documentation/netlink). It skips tb when python3 or the
// tarball is missing (fails under XDPIO_REQUIRE_PRIV=1; `apt-get install
// linux-source-6.12 python3-yaml` provides both).
func RequireYNL(tb testing.TB) YNL {
	tb.Helper()
	RequireTool(tb, "python3")
	tars, _ := filepath.Glob("/usr/src/linux-source-*.tar.xz")
	if len(tars) == 0 {
		msg := "skipping: no /usr/src/linux-source-*.tar.xz for the ynl oracle (apt-get install linux-source-6.12)"
		if os.Getenv(EnvRequirePriv) == "1" {
			tb.Fatalf("%s; %s=1 forbids skipping", msg, EnvRequirePriv)
		}
		tb.Skip(msg)
	}
	sort.Strings(tars)
	tarball := tars[len(tars)-1]
	base := strings.TrimSuffix(filepath.Base(tarball), ".tar.xz") // linux-source-6.12
	y, err := extractYNL(tarball, base)
	if err != nil {
		tb.Fatalf("ynl oracle: %v", err)
	}
	return y
}

func extractYNL(tarball, base string) (YNL, error) {
	dir := filepath.Join(ynlCache, base)
	y := YNL{Specs: filepath.Join(dir, base, "Documentation/netlink/specs"),
		Version: strings.TrimPrefix(base, "linux-source-")}
	find := func() bool {
		if _, err := os.Stat(filepath.Join(dir, base, "Documentation/netlink/genetlink.yaml")); err != nil {
			return false
		}
		for _, p := range []string{"tools/net/ynl/pyynl/cli.py", "tools/net/ynl/cli.py"} {
			if _, err := os.Stat(filepath.Join(dir, base, p)); err == nil {
				y.CLI = filepath.Join(dir, base, p)
				return true
			}
		}
		return false
	}
	if err := os.MkdirAll(ynlCache, 0o755); err != nil {
		return y, err
	}
	lock, err := os.OpenFile(filepath.Join(ynlCache, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return y, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return y, err
	}
	if find() {
		return y, nil
	}
	tmp, err := os.MkdirTemp(ynlCache, ".extract-")
	if err != nil {
		return y, err
	}
	defer os.RemoveAll(tmp)
	out, err := exec.Command("tar", "-xJf", tarball, "-C", tmp, "--wildcards",
		base+"/tools/net/ynl/*", base+"/Documentation/netlink/*").CombinedOutput()
	if err != nil {
		return y, fmt.Errorf("extract ynl from %s: %v: %s", tarball, err, out)
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return y, err
	}
	if !find() {
		return y, fmt.Errorf("%s has no tools/net/ynl/cli.py", tarball)
	}
	return y, nil
}

// Args returns the arguments of python3 for one ynl call with spec
// (e.g. "netdev") and the operation arguments (e.g. "--dump",
// "napi-get"); unknown attributes are printed, output is JSON.
func (y YNL) Args(spec string, op ...string) []string {
	return append([]string{y.CLI, "--spec", filepath.Join(y.Specs, spec+".yaml"),
		"--process-unknown", "--output-json"}, op...)
}
