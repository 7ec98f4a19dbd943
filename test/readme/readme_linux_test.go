//go:build linux

package readme

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// quickStart returns the first Go block under "## Quick start" in README.md.
func quickStart(t *testing.T, root string) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	i := strings.Index(s, "\n## Quick start")
	if i < 0 {
		t.Fatal(`README.md has no "## Quick start" section`)
	}
	s = s[i:]
	start := strings.Index(s, "```go\n")
	if start < 0 {
		t.Fatal("the quick start has no Go block")
	}
	s = s[start+len("```go\n"):]
	end := strings.Index(s, "\n```")
	if end < 0 {
		t.Fatal("the quick start's Go block does not end")
	}
	return s[:end+1]
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go" // not on PATH: exec reports it
}

// The quick start, pasted into a module of its own, builds, counts every
// datagram sent to port 9000 and no other, and exits 0 with its count on
// SIGINT.
func TestQuickStart(t *testing.T) {
	netnstest.RequirePriv(t)
	out, err := exec.Command(goTool(), "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	src := quickStart(t, root)
	if !strings.Contains(src, "package main") {
		t.Fatalf("the quick start is not a program (no package main):\n%s", src)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	gomod := fmt.Sprintf("module count\n\ngo 1.26\n\nrequire github.com/xdpio/xdpio v0.0.0\n\nreplace github.com/xdpio/xdpio => %s\n", root)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", "count", "."}} {
		cmd := exec.Command(goTool(), args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := pair.B.Command(ctx, filepath.Join(dir, "count"), pair.B.Link)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// The program is ready once its XDP program is attached.
	ready := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if a, err := pair.B.Attrs(); err == nil && a.Xdp != nil && a.Xdp.Attached {
			ready = true
			break
		}
	}
	if !ready {
		t.Fatalf("the quick start attached no XDP program in 10 s; stderr:\n%s", stderr.String())
	}

	const want, size = 1000, 100
	sendTo := func(port uint16, n int) {
		err := pair.A.Do(func() error {
			c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(pair.B.IPv4, port)))
			if err != nil {
				return err
			}
			defer c.Close()
			buf := make([]byte, size)
			for i := range n {
				if _, err := c.Write(buf); err != nil {
					return err
				}
				if i%64 == 63 {
					time.Sleep(time.Millisecond)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Another port stays with the kernel: a socket in B gets it all.
	var other *net.UDPConn
	if err := pair.B.Do(func() (err error) {
		other, err = net.ListenUDP("udp4", &net.UDPAddr{IP: pair.B.IPv4.AsSlice(), Port: 9001})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	otherGot := make(chan int, 1)
	go func() {
		buf, n := make([]byte, 2048), 0
		other.SetReadDeadline(time.Now().Add(5 * time.Second))
		for n < 100 {
			if _, err := other.Read(buf); err != nil {
				break
			}
			n++
		}
		otherGot <- n
	}()
	sendTo(9000, want)
	sendTo(9001, 100)
	if n := <-otherGot; n != 100 {
		t.Errorf("the kernel's socket on port 9001 got %d of 100 datagrams while the quick start ran", n)
	}
	time.Sleep(200 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the quick start exited with %v after SIGINT; stderr:\n%s", err, stderr.String())
	}
	m := regexp.MustCompile(`^(\d+) packets, (\d+) bytes\n$`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("the quick start printed %q, want \"N packets, M bytes\"", stdout.String())
	}
	frame := 14 + 20 + 8 + size
	if wantOut := fmt.Sprintf("%d packets, %d bytes\n", want, want*frame); stdout.String() != wantOut {
		t.Fatalf("the quick start printed %q, want %q", stdout.String(), wantOut)
	}
	if a, err := pair.B.Attrs(); err == nil && a.Xdp != nil && a.Xdp.Attached {
		t.Error("an XDP program is still attached after the quick start exited")
	}
}
