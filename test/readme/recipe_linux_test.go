//go:build linux

package readme

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runs is how many times each recipe runs in a row: once could pass by
// luck when a program and its sender race.
const runs = 5

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go" // not on PATH: exec reports it
}

// moduleRoot returns the directory of this checkout's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(goTool(), "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// readFile returns the file's text, failing t if it cannot be read.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the text of md under the "## "+heading line, up to the
// next heading of level 2 or 3.
func section(t *testing.T, md, heading string) string {
	t.Helper()
	i := strings.Index(md, "\n## "+heading+"\n")
	if i < 0 {
		t.Fatalf("no %q section", "## "+heading)
	}
	s := md[i+len("\n## "+heading+"\n"):]
	for _, next := range []string{"\n## ", "\n### "} {
		if j := strings.Index(s, next); j >= 0 {
			s = s[:j+1]
		}
	}
	return s
}

// codeBlocks returns the contents of the fenced blocks of text opened by
// a line "```"+lang, each with its final newline.
func codeBlocks(text, lang string) []string {
	re := regexp.MustCompile("(?ms)^```" + regexp.QuoteMeta(lang) + "\n(.*?)^```")
	var blocks []string
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// blockWith returns the only block of blocks that contains s.
func blockWith(t *testing.T, blocks []string, s string) string {
	t.Helper()
	var found []string
	for _, b := range blocks {
		if strings.Contains(b, s) {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d blocks contain %q, want 1:\n%s", len(found), s, strings.Join(found, "---\n"))
	}
	return found[0]
}

var netnsAddRE = regexp.MustCompile(`ip netns add (\S+)`)

// netnsOf returns the namespaces script creates (ip netns add NAME).
func netnsOf(script string) []string {
	var names []string
	for _, m := range netnsAddRE.FindAllStringSubmatch(script, -1) {
		names = append(names, m[1])
	}
	return names
}

// netnsExists reports whether a named namespace (ip netns) exists.
func netnsExists(name string) bool {
	_, err := os.Stat(filepath.Join("/run/netns", name))
	return err == nil
}

// claimNetns fails t if one of the named namespaces exists: the recipe
// would fail to create it and, at its end, delete what is someone else's.
// The namespaces are deleted after t, also when it fails.
func claimNetns(t *testing.T, names []string) {
	t.Helper()
	if len(names) == 0 {
		t.Fatal("the recipe creates no namespace (no ip netns add)")
	}
	requireNoNetns(t, names, "they belong to someone else: delete them (ip netns del NAME) or run the test elsewhere")
	t.Cleanup(func() {
		for _, n := range names {
			if netnsExists(n) {
				if out, err := exec.Command("ip", "netns", "del", n).CombinedOutput(); err != nil {
					t.Errorf("cleanup: ip netns del %s: %v %s", n, err, out)
				}
			}
		}
	})
}

// requireNoNetns fails t now if one of the named namespaces exists.
func requireNoNetns(t *testing.T, names []string, why string) {
	t.Helper()
	var there []string
	for _, n := range names {
		if netnsExists(n) {
			there = append(there, n)
		}
	}
	if len(there) > 0 {
		t.Fatalf("namespace(s) %s exist already, and the recipe creates them: %s", strings.Join(there, ", "), why)
	}
}

// runRecipe runs script exactly as written with bash, in dir, with go's
// directory on PATH, and returns what it printed on stdout and stderr. It
// fails t if bash does not exit 0 within limit; on the limit it kills
// everything the script started.
func runRecipe(t *testing.T, dir, script string, limit time.Duration) (stdout, stderr string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "recipe.sh")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", file)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(goTool())+string(os.PathListSeparator)+os.Getenv("PATH"))
	// Its own process group, so that a hung recipe is killed whole.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the recipe did not end within %v (killed):\n%s\nstdout:\n%s\nstderr:\n%s", limit, script, o.String(), e.String())
	}
	if err != nil {
		t.Fatalf("the recipe failed: %v\n%s\nstdout:\n%s\nstderr:\n%s", err, script, o.String(), e.String())
	}
	return o.String(), e.String()
}

// linkCounts are an interface's counters, as ip -s reports them.
type linkCounts struct {
	RXPackets, TXDropped uint64
}

// linkStats asks ip for the counters of link in namespace ns.
func linkStats(t *testing.T, ns, link string) linkCounts {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns, "-j", "-s", "link", "show", "dev", link).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("ip -n %s -s link show %s: %v: %s", ns, link, err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var links []struct {
		Stats64 struct {
			RX struct {
				Packets uint64 `json:"packets"`
			} `json:"rx"`
			TX struct {
				Dropped uint64 `json:"dropped"`
			} `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -j -s link show: %v in %s", err, out)
	}
	return linkCounts{RXPackets: links[0].Stats64.RX.Packets, TXDropped: links[0].Stats64.TX.Dropped}
}
