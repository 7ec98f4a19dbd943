//go:build linux

package ethtool

import (
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/xdpio/xdpio/internal/netnstest"
	"golang.org/x/sys/unix"
)

// ethtoolQNames are the names `ethtool -Q … --show-coalesce` prints for
// struct ethtool_coalesce's words 1..22 (adaptive rx/tx are on the
// "Adaptive RX: … TX: …" line).
var ethtoolQNames = []string{"", "rx-usecs", "rx-frames", "rx-usecs-irq", "rx-frames-irq", "tx-usecs", "tx-frames",
	"tx-usecs-irq", "tx-frames-irq", "stats-block-usecs", "adaptive-rx", "adaptive-tx", "pkt-rate-low", "rx-usecs-low",
	"rx-frames?-low", "tx-usecs-low", "tx-frames?-low", "pkt-rate-high", "rx-usecs-high", "rx-frames?-high", "tx-usecs-high",
	"tx-frames?-high", "sample-interval"}

// TestPerQueueLayoutEth0 reads queue 0 of eth0 through the raw ioctl and
// compares every word with ethtool -Q's view (read-only).
func TestPerQueueLayoutEth0(t *testing.T) {
	netnstest.RequireTool(t, "ethtool")
	out, err := exec.Command("ethtool", "-Q", "eth0", "queue_mask", "0x1", "--show-coalesce").CombinedOutput()
	if err != nil {
		netnstest.SkipIfMachineLacks(t, "eth0", "has no per-queue coalescing: "+strings.TrimSpace(string(out)))
	}
	words, err := perQueue(Device{Name: "eth0"}, unix.ETHTOOL_GCOALESCE, []int{0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(words) != legacyWords {
		t.Fatalf("%d words", len(words))
	}
	adaptive := regexp.MustCompile(`Adaptive RX: (on|off)\s+TX: (on|off)`).FindStringSubmatch(string(out))
	if adaptive == nil {
		t.Fatalf("ethtool -Q output:\n%s", out)
	}
	for i := 1; i < legacyWords; i++ {
		var want string
		switch i {
		case 10:
			want = map[string]string{"on": "1", "off": "0"}[adaptive[1]]
		case 11:
			want = map[string]string{"on": "1", "off": "0"}[adaptive[2]]
		default:
			m := regexp.MustCompile(`(?m)^` + ethtoolQNames[i] + `: (\d+)$`).FindSubmatch(out)
			if m == nil {
				t.Fatalf("no %s in ethtool -Q:\n%s", ethtoolQNames[i], out)
			}
			want = string(m[1])
		}
		if got := strconv.FormatUint(uint64(words[i]), 10); got != want {
			t.Errorf("word %d (%s): ioctl %s, ethtool %s", i, ethtoolQNames[i], got, want)
		}
	}
	// Through the client: only the parameters COALESCE_GET says eth0
	// supports, with the same values.
	c, err := Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	qs, err := c.QueueCoalesce(Device{Name: "eth0"}, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	sup, _ := c.Coalesce(Device{Name: "eth0"})
	if got, want := CoalesceSetAttrs(qs[0]), CoalesceSetAttrs(sup); len(got) != len(want) {
		t.Errorf("queue 0 reports %v, device supports %v", got, want)
	}
	if qs[0].RXUsecs != nil && *qs[0].RXUsecs != words[1] {
		t.Errorf("rx-usecs %d vs raw %d", *qs[0].RXUsecs, words[1])
	}
	t.Logf("eth0 queue 0: rx-usecs %d rx-frames %d tx-usecs %d tx-frames %d", words[1], words[2], words[5], words[6])
}

func TestPerQueueErrors(t *testing.T) {
	for _, qs := range [][]int{nil, {1, 1}, {2, 1}, {-1}, {MaxQueueCoalesce}} {
		if _, err := perQueue(Device{Name: "eth0"}, unix.ETHTOOL_GCOALESCE, qs, nil); err == nil {
			t.Errorf("queues %v accepted", qs)
		}
	}
	// Fields the ioctl lacks are refused before anything is read.
	var c Client
	err := c.SetQueueCoalesce(Device{Name: "eth0"}, []int{0}, Coalesce{UseCQEModeRX: boolp(true)})
	if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "USE_CQE_MODE_RX") {
		t.Errorf("per-queue CQE mode: %v", err)
	}
	pair := netnstest.New(t, netnstest.Config{Queues: 2})
	pair.A.Do(func() error {
		_, err := perQueue(Device{Index: pair.A.Ifindex}, unix.ETHTOOL_GCOALESCE, []int{0, 1}, nil)
		if !errors.Is(err, ErrNotSupported) || !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("per-queue ioctl on veth: %v", err)
		}
		return nil
	})
}
