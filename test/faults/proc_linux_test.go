//go:build linux

package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xdpio/xdpio/internal/netnstest"
)

// binDir holds the programs under test, built once per test binary run
// (the first test that needs them builds them all).
var (
	binDir    string
	buildOnce sync.Once
	buildErr  error
)

// packages are the programs under test, by binary name.
var packages = map[string]string{
	"rxdrop":  "./examples/rxdrop",
	"txonly":  "./examples/txonly",
	"l2fwd":   "./examples/l2fwd",
	"udpecho": "./examples/udpecho",
	"xdpio":   "./cmd/xdpio",
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "xdpio-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// goTool is the go command: the one on PATH, else the toolchain's own.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go" // not on PATH: exec reports it
}

// binary returns the path of the named program, building all of them (one
// go build) the first time.
func binary(t *testing.T, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		out, err := exec.Command(goTool(), "env", "GOMOD").Output()
		gomod := strings.TrimSpace(string(out))
		if err != nil || gomod == "" || gomod == os.DevNull {
			buildErr = fmt.Errorf("go env GOMOD: %q, %v: not inside the module", gomod, err)
			return
		}
		args := []string{"build", "-o", binDir + string(filepath.Separator)}
		for _, pkg := range packages {
			args = append(args, pkg)
		}
		cmd := exec.Command(goTool(), args...)
		cmd.Dir = filepath.Dir(gomod)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	if _, ok := packages[name]; !ok {
		t.Fatalf("no program %q", name)
	}
	return filepath.Join(binDir, name)
}

// syncBuffer is a bytes.Buffer safe for a command's copying goroutines
// that remembers when each part was written.
type syncBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes []timedWrite
}

type timedWrite struct {
	end int // offset in b after the write
	at  time.Time
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	s.writes = append(s.writes, timedWrite{s.b.Len(), time.Now()})
	return n, err
}

// when returns the time the first occurrence of sub was written, or the
// zero time.
func (s *syncBuffer) when(sub string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := strings.Index(s.b.String(), sub)
	if i < 0 {
		return time.Time{}
	}
	for _, w := range s.writes {
		if w.end >= i+len(sub) {
			return w.at
		}
	}
	return time.Time{}
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a program running as a subprocess in a namespace.
type proc struct {
	name        string
	cmd         *exec.Cmd
	stdout      syncBuffer
	stderr      syncBuffer
	start, end  time.Time
	done        chan struct{}
	waitErr     error
	hung        atomic.Bool // the context's timeout killed it
	interrupted atomic.Bool // the test signalled it on purpose
}

// startProc starts argv inside h's namespace (`ip netns exec`, which execs
// the program in place: the process is the program). ctx bounds it: if it
// ends first, the process is killed and counted as hung. The test's
// cleanup kills what still runs.
func startProc(t *testing.T, ctx context.Context, h *netnstest.Host, argv ...string) *proc {
	t.Helper()
	p := &proc{name: filepath.Base(argv[0]), done: make(chan struct{})}
	for _, a := range argv {
		if strings.HasPrefix(a, binDir) {
			p.name = filepath.Base(a) // after a wrapper
			break
		}
	}
	p.cmd = h.Command(ctx, argv[0], argv[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.Cancel = func() error {
		p.hung.Store(true)
		return p.cmd.Process.Kill()
	}
	p.cmd.WaitDelay = 2 * time.Second
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", argv, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		p.end = time.Now()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.interrupted.Store(true)
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits up to d for the process to exit and reports whether it did.
func (p *proc) wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// status describes how the process ended: "exit N" or "signal S".
func (p *proc) status() string {
	if !p.exited() {
		return "running"
	}
	ps := p.cmd.ProcessState
	if ps == nil {
		return fmt.Sprintf("not started: %v", p.waitErr)
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "signal " + ws.Signal().String()
	}
	return "exit " + strconv.Itoa(ps.ExitCode())
}

// code is the exit status, -1 if it was killed by a signal or still runs.
func (p *proc) code() int {
	if !p.exited() || p.cmd.ProcessState == nil {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// signal sends sig on purpose (not a hang).
func (p *proc) signal(sig syscall.Signal) error {
	p.interrupted.Store(true)
	return p.cmd.Process.Signal(sig)
}

// benchError returns the first failed test the bench server reported, on
// stdout or stderr ("stopped" on SIGTERM is not one), and when it came.
func (p *proc) benchError() (string, time.Time) {
	for _, b := range []*syncBuffer{&p.stdout, &p.stderr} {
		for _, m := range benchErrorRe.FindAllString(b.String(), -1) {
			if strings.HasSuffix(m, "bench server: stopped") {
				continue
			}
			return m, b.when(m)
		}
	}
	return "", time.Time{}
}

// waitOutput waits up to d for s to appear in stdout or stderr.
func (p *proc) waitOutput(s string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if strings.Contains(p.stdout.String(), s) || strings.Contains(p.stderr.String(), s) {
			return true
		}
		if time.Now().After(deadline) || p.exited() {
			return strings.Contains(p.stdout.String(), s) || strings.Contains(p.stderr.String(), s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// output is everything the process printed, for failure messages.
func (p *proc) output() string {
	return fmt.Sprintf("--- %s (%s) stdout:\n%s--- stderr:\n%s", p.name, p.status(), p.stdout.String(), p.stderr.String())
}

// checkExe checks that the process is the program itself (ip netns exec,
// prlimit and setpriv exec it in place), so that a signal reaches it.
func (p *proc) checkExe(t *testing.T, want string) {
	t.Helper()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("%s: read its executable: %v", p.name, err)
	}
	if real, err := filepath.EvalSymlinks(want); err == nil {
		want = real
	}
	if exe != want {
		t.Fatalf("process %d is %s, not %s: a signal would not reach the program", p.cmd.Process.Pid, exe, want)
	}
}

// procFile returns /proc/PID/name of the process ("status", "limits").
func (p *proc) procFile(name string) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/%s", p.cmd.Process.Pid, name))
	return string(b)
}

// command runs name with args inside h's namespace, entered through the
// pair's handle (so it works after `ip netns del` too), and returns its
// combined output.
func command(ctx context.Context, h *netnstest.Host, name string, args ...string) (string, error) {
	var out []byte
	var runErr error
	err := h.Do(func() error {
		// The child is forked from this locked thread: it starts in the
		// namespace.
		out, runErr = exec.CommandContext(ctx, name, args...).CombinedOutput()
		return nil
	})
	if err != nil {
		return "", err
	}
	if runErr != nil {
		return string(out), fmt.Errorf("%s %s in %s: %w: %s", name, strings.Join(args, " "), h.NS, runErr, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// mustCommand is command that fails the test on error.
func mustCommand(t *testing.T, ctx context.Context, h *netnstest.Host, name string, args ...string) string {
	t.Helper()
	out, err := command(ctx, h, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// xdpState tells whether an XDP program is attached to h's veth: its ID,
// or gone when the device no longer exists.
func xdpState(h *netnstest.Host) (id uint32, gone bool, err error) {
	a, err := h.Attrs()
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return 0, true, nil
	}
	if err != nil {
		return 0, false, err
	}
	if a.Xdp != nil && a.Xdp.Attached {
		return a.Xdp.ProgId, false, nil
	}
	return 0, false, nil
}

// xdpLeft checks that no XDP program is left on h's veth and returns the
// summary's word for it.
func xdpLeft(t *testing.T, h *netnstest.Host) string {
	t.Helper()
	id, gone, err := xdpState(h)
	switch {
	case err != nil:
		t.Errorf("read %s's XDP state: %v", h.Link, err)
		return "?"
	case gone:
		return "no (device gone)"
	case id != 0:
		t.Errorf("XDP program %d still attached to %s after the program exited", id, h.Link)
		return fmt.Sprintf("YES (prog %d)", id)
	}
	return "no"
}

// waitXDPGone polls until no XDP program is attached to h's veth, up to
// d, and returns how long it took from since, or -1.
func waitXDPGone(h *netnstest.Host, since time.Time, d time.Duration) time.Duration {
	deadline := time.Now().Add(d)
	for {
		id, gone, err := xdpState(h)
		if err == nil && (gone || id == 0) {
			return time.Since(since)
		}
		if time.Now().After(deadline) {
			return -1
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ethtoolStats returns `ethtool -S` of h's veth.
func ethtoolStats(ctx context.Context, h *netnstest.Host) (map[string]uint64, error) {
	out, err := command(ctx, h, "ethtool", "-S", h.Link)
	if err != nil {
		return nil, err
	}
	m := map[string]uint64{}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			m[k] = n
		}
	}
	return m, nil
}

// redirects is the number of frames h's veth redirected to AF_XDP sockets
// (the rx_queue_N_xdp_redirect counters): frames that reached the
// program's sockets.
func redirects(ctx context.Context, h *netnstest.Host) (uint64, error) {
	m, err := ethtoolStats(ctx, h)
	if err != nil {
		return 0, err
	}
	var n uint64
	for k, v := range m {
		if strings.HasPrefix(k, "rx_queue_") && strings.HasSuffix(k, "_xdp_redirect") {
			n += v
		}
	}
	return n, nil
}

// currentRX is the RX channel count `ethtool -l` reports as current.
func currentRX(ctx context.Context, h *netnstest.Host) (int, error) {
	out, err := command(ctx, h, "ethtool", "-l", h.Link)
	if err != nil {
		return 0, err
	}
	_, cur, ok := strings.Cut(out, "Current hardware settings:")
	if !ok {
		return 0, fmt.Errorf("ethtool -l %s: no current settings in %q", h.Link, out)
	}
	for _, line := range strings.Split(cur, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "RX:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("ethtool -l %s: no RX count in %q", h.Link, cur)
}

// dropped is what h's veth counts as dropped on the way in and out.
func dropped(h *netnstest.Host) (uint64, error) {
	a, err := h.Attrs()
	if err != nil {
		return 0, err
	}
	if a.Statistics == nil {
		return 0, fmt.Errorf("%s: no statistics", h.Link)
	}
	return a.Statistics.RxDropped + a.Statistics.TxDropped, nil
}
