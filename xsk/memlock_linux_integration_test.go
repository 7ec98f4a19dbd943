//go:build linux

package xsk_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/xsk"
)

// TestHelperOpenMemlock is not a test: TestOpenFitsMemlock runs the test
// binary with a small RLIMIT_MEMLOCK and without CAP_IPC_LOCK.
func TestHelperOpenMemlock(t *testing.T) {
	ifname := os.Getenv("XDPIO_HELPER_MEMLOCK_IFACE")
	if ifname == "" {
		t.Skip("helper process for TestOpenFitsMemlock")
	}
	d, err := xsk.Open(ifname, xsk.Config{})
	if err != nil {
		fmt.Printf("default: error %v\n", err)
	} else {
		for _, s := range d.Sockets() {
			st, _ := s.Stats()
			b := s.NewBatch(64)
			fmt.Printf("default: queue %d owns %d frames, alloc %d\n", s.Queue(), st.FramesOwned, s.Alloc(b, 64))
			s.Free(b)
		}
		d.Close()
	}
	_, err = xsk.Open(ifname, xsk.Config{UMEM: xsk.UMEMConfig{NumFrames: 4096}})
	fmt.Printf("explicit: error %v\n", err)
	os.Exit(0)
}

// With CAP_NET_ADMIN and CAP_BPF but not CAP_IPC_LOCK, the kernel charges
// a UMEM to RLIMIT_MEMLOCK (8 MiB by default: less than one 4096-frame
// UMEM of 4 KiB frames). Open's default then sizes each queue's UMEM to
// fit, and a UMEM the caller asked for that does not fit fails with an
// error naming the limit.
func TestOpenFitsMemlock(t *testing.T) {
	prlimit := netnstest.RequireTool(t, "prlimit")
	setpriv := netnstest.RequireTool(t, "setpriv")
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := pair.B.Command(ctx, prlimit, "--memlock=8388608:8388608", setpriv, "--inh-caps=-ipc_lock", "--bounding-set=-ipc_lock",
		os.Args[0], "-test.run=^TestHelperOpenMemlock$")
	cmd.Env = append(os.Environ(), "XDPIO_HELPER_MEMLOCK_IFACE="+pair.B.Link)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	text := string(out)
	t.Logf("helper:\n%s", text)
	// 8 MiB, three quarters of it for 2 queues of 4 KiB frames: 768, so 512.
	for q := 0; q < 2; q++ {
		// Half of them stay out of the fill ring, for sending.
		if !strings.Contains(text, fmt.Sprintf("default: queue %d owns 512 frames, alloc 64", q)) {
			t.Errorf("default Open under an 8 MiB memlock limit: want 512 frames on queue %d, 64 of them for Alloc", q)
		}
	}
	if !strings.Contains(text, "explicit: error") || !strings.Contains(text, "RLIMIT_MEMLOCK, 8192 KiB here") {
		t.Errorf("Open of a 16 MiB UMEM under an 8 MiB limit: want an error naming the limit")
	}
}
