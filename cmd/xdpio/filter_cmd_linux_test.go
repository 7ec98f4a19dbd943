//go:build linux

package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"golang.org/x/sys/unix"

	"github.com/xdpio/xdpio/internal/capset"
	"github.com/xdpio/xdpio/internal/netnstest"
)

// TestFilterCheckSignal: SIGTERM or SIGINT while `xdpio filter check
// --pcap` works through a capture that never ends (a FIFO this test keeps
// feeding) ends the command promptly, with exit status 1, "filter check:
// interrupted" on stderr and nothing on stdout. The process is this test
// binary running xdpio's main (see TestMain), so the signal goes through
// main's signal.NotifyContext and exit status as in the built xdpio.
// Before, the command looked at no signal and read on for ever.
func TestFilterCheckSignal(t *testing.T) {
	netnstest.RequirePriv(t) // BPF_PROG_RUN
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			fifo := filepath.Join(t.TempDir(), "endless.pcap")
			if err := unix.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "filter", "check", "udp or tcp[tcpflags] & tcp-syn != 0", "--pcap", fifo)
			cmd.Env = append(os.Environ(), demoServerEnv+"=1")
			var stdout, stderr syncBuffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var waitErr error
			exited := make(chan struct{})
			go func() {
				waitErr = cmd.Wait()
				close(exited)
			}()
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
			})

			// Opening blocks until the command opens the capture (or
			// until the cleanup opens it, should the command end
			// first); then feed frames until the command goes away.
			working := make(chan struct{})
			go func() {
				w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
				if err != nil {
					return
				}
				defer w.Close()
				bw := bufio.NewWriter(w)
				pw := pcapgo.NewWriter(bw)
				if pw.WriteFileHeader(262144, layers.LinkTypeEthernet) != nil {
					return
				}
				frames := capset.Frames()
				for n := 0; ; n++ {
					f := frames[n%len(frames)]
					ci := gopacket.CaptureInfo{Timestamp: time.Unix(int64(n), 0), CaptureLength: len(f), Length: len(f)}
					if pw.WritePacket(ci, f) != nil {
						return // the reader is gone
					}
					if n == 3*verdictBatch {
						// Whole batches went through the XDP program.
						close(working)
					}
				}
			}()
			t.Cleanup(func() {
				// Unblock the writer's open if the command never opened
				// the capture.
				if r, err := os.OpenFile(fifo, os.O_RDONLY|unix.O_NONBLOCK, 0); err == nil {
					r.Close()
				}
			})
			select {
			case <-working:
			case <-exited:
				t.Fatalf("the command ended before the signal: %v\nstderr: %s", waitErr, stderr.String())
			case <-time.After(60 * time.Second):
				t.Fatal("the command did not read the capture")
			}

			sent := time.Now()
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				t.Fatalf("still running 10 s after %v\nstderr: %s", sig, stderr.String())
			}
			took := time.Since(sent)
			var ee *exec.ExitError
			if !errors.As(waitErr, &ee) || ee.ExitCode() != 1 {
				t.Errorf("exit: %v, want status 1", waitErr)
			}
			if got := strings.TrimSpace(stderr.String()); got != "xdpio: filter check: interrupted" {
				t.Errorf("stderr %q, want xdpio: filter check: interrupted", got)
			}
			if stdout.String() != "" {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
			if took > 3*time.Second {
				t.Errorf("exited %v after %v, want promptly", took, sig)
			}
			t.Logf("exited %v after %v", took, sig)
		})
	}
}
