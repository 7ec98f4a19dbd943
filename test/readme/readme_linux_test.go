//go:build linux

package readme

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
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

// quickStartReady is the ready line the quick start prints on the veth
// pair its recipe builds: vb, with two queues (numrxqueues 2), no
// zero-copy on veth, the program in the driver (veth has native XDP).
const quickStartReady = "ready: vb, queues 0-1, copy mode, driver attach"

// The quick start, pasted into a module of its own and built with the
// quick start's build block as written, refuses to run without its
// interface, and its recipe, run as written five times in a row, counts
// the 100 datagrams it sends every time: it waits for the ready line.
func TestQuickStart(t *testing.T) {
	netnstest.RequirePriv(t)
	netnstest.RequireTool(t, "ip")
	root := moduleRoot(t)
	quick := section(t, readFile(t, filepath.Join(root, "README.md")), "Quick start")
	goBlocks := codeBlocks(quick, "go")
	if len(goBlocks) == 0 || !strings.Contains(goBlocks[0], "package main") {
		t.Fatalf("the quick start's first Go block is not a program (no package main)")
	}
	sh := codeBlocks(quick, "sh")
	build, recipe := blockWith(t, sh, "go build"), blockWith(t, sh, "ip netns add")
	if len(sh) != 2 {
		t.Fatalf("the quick start has %d sh blocks, want 2 (build, run): a new one needs a check here", len(sh))
	}

	// The reader's layout: the program's directory next to the clone,
	// which the build block's replace directive names as ../xdpio.
	dir := t.TempDir()
	prog := filepath.Join(dir, "count")
	if err := os.Mkdir(prog, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(root, filepath.Join(dir, "xdpio")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(prog, "main.go"), []byte(goBlocks[0]), 0o644); err != nil {
		t.Fatal(err)
	}
	runRecipe(t, prog, build, 5*time.Minute)
	bin := filepath.Join(prog, "count")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the build block left no count binary: %v", err)
	}

	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{nil, {"a", "b"}} {
			cmd := exec.Command(bin, args...)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 || stdout.Len() != 0 || stderr.String() != "usage: count IFACE\n" {
				t.Errorf("count %q: %v, stdout %q, stderr %q; want exit status 2 and the usage on stderr", args, err, stdout.String(), stderr.String())
			}
		}
	})

	t.Run("recipe", func(t *testing.T) {
		names := netnsOf(recipe)
		claimNetns(t, names)
		// 100 datagrams of "x\n": 14 + 20 + 8 + 2 bytes each.
		want := quickStartReady + "\n100 packets, 4400 bytes\n"
		for i := range runs {
			requireNoNetns(t, names, "the run before left them")
			stdout, stderr := runRecipe(t, prog, recipe, time.Minute)
			t.Logf("run %d printed:\n%s", i+1, stdout)
			if stderr != "" {
				t.Logf("run %d, stderr:\n%s", i+1, stderr)
			}
			if stdout != want {
				t.Fatalf("run %d of the quick start's recipe printed %q, want %q", i+1, stdout, want)
			}
		}
		requireNoNetns(t, names, "the recipe's last line must delete them")
	})

	t.Run("kernel traffic", func(t *testing.T) { testQuickStartTraffic(t, bin) })
}

// The quick start counts every datagram sent to port 9000 by the kernel's
// UDP stack once it said it is ready, leaves another port to the kernel,
// and exits 0 with its count on SIGINT, its XDP program detached.
func testQuickStartTraffic(t *testing.T, bin string) {
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := pair.B.Command(ctx, bin, pair.B.Link)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	out := bufio.NewReader(stdout)
	ready := make(chan string, 1)
	go func() {
		line, _ := out.ReadString('\n')
		ready <- line
	}()
	select {
	case line := <-ready:
		want := fmt.Sprintf("ready: %s, queues 0-1, copy mode, driver attach\n", pair.B.Link)
		if line != want {
			t.Fatalf("the quick start's first line is %q, want %q; stderr:\n%s", line, want, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the quick start printed no ready line in 10 s; stderr:\n%s", stderr.String())
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
					time.Sleep(time.Millisecond) // within veth's 256-frame ring
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
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the quick start exited with %v after SIGINT; stderr:\n%s", err, stderr.String())
	}
	if !regexp.MustCompile(`^\d+ packets, \d+ bytes\n$`).Match(rest) {
		t.Fatalf("the quick start printed %q after its ready line, want \"N packets, M bytes\"", rest)
	}
	frame := 14 + 20 + 8 + size
	if wantOut := fmt.Sprintf("%d packets, %d bytes\n", want, want*frame); string(rest) != wantOut {
		t.Fatalf("the quick start printed %q, want %q", rest, wantOut)
	}
	if a, err := pair.B.Attrs(); err == nil && a.Xdp != nil && a.Xdp.Attached {
		t.Error("an XDP program is still attached after the quick start exited")
	}
}
