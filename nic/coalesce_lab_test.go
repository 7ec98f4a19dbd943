//go:build lab && linux

package nic_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/xdpio/xdpio/internal/ethtool"
	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/test/lab/labctl"
)

// labU32 lists the u32 parameters the kernel's netdevsim selftest
// (tools/testing/selftests/drivers/net/netdevsim/ethtool-coalesce.sh)
// round-trips, with their uapi attribute names. netdevsim stores the whole
// struct ethtool_coalesce as given; the CQE modes, TX aggregation and DIM
// profiles live in kernel_ethtool_coalesce, which it does not keep.
var labU32 = []struct {
	attr  string
	field func(*nic.Coalesce) **uint32
}{
	{"ETHTOOL_A_COALESCE_RX_USECS", func(h *nic.Coalesce) **uint32 { return &h.RXUsecs }},
	{"ETHTOOL_A_COALESCE_RX_MAX_FRAMES", func(h *nic.Coalesce) **uint32 { return &h.RXMaxFrames }},
	{"ETHTOOL_A_COALESCE_RX_USECS_IRQ", func(h *nic.Coalesce) **uint32 { return &h.RXUsecsIRQ }},
	{"ETHTOOL_A_COALESCE_RX_MAX_FRAMES_IRQ", func(h *nic.Coalesce) **uint32 { return &h.RXMaxFramesIRQ }},
	{"ETHTOOL_A_COALESCE_TX_USECS", func(h *nic.Coalesce) **uint32 { return &h.TXUsecs }},
	{"ETHTOOL_A_COALESCE_TX_MAX_FRAMES", func(h *nic.Coalesce) **uint32 { return &h.TXMaxFrames }},
	{"ETHTOOL_A_COALESCE_TX_USECS_IRQ", func(h *nic.Coalesce) **uint32 { return &h.TXUsecsIRQ }},
	{"ETHTOOL_A_COALESCE_TX_MAX_FRAMES_IRQ", func(h *nic.Coalesce) **uint32 { return &h.TXMaxFramesIRQ }},
	{"ETHTOOL_A_COALESCE_STATS_BLOCK_USECS", func(h *nic.Coalesce) **uint32 { return &h.StatsBlockUsecs }},
	{"ETHTOOL_A_COALESCE_PKT_RATE_LOW", func(h *nic.Coalesce) **uint32 { return &h.PktRateLow }},
	{"ETHTOOL_A_COALESCE_RX_USECS_LOW", func(h *nic.Coalesce) **uint32 { return &h.RXUsecsLow }},
	{"ETHTOOL_A_COALESCE_RX_MAX_FRAMES_LOW", func(h *nic.Coalesce) **uint32 { return &h.RXMaxFramesLow }},
	{"ETHTOOL_A_COALESCE_TX_USECS_LOW", func(h *nic.Coalesce) **uint32 { return &h.TXUsecsLow }},
	{"ETHTOOL_A_COALESCE_TX_MAX_FRAMES_LOW", func(h *nic.Coalesce) **uint32 { return &h.TXMaxFramesLow }},
	{"ETHTOOL_A_COALESCE_PKT_RATE_HIGH", func(h *nic.Coalesce) **uint32 { return &h.PktRateHigh }},
	{"ETHTOOL_A_COALESCE_RX_USECS_HIGH", func(h *nic.Coalesce) **uint32 { return &h.RXUsecsHigh }},
	{"ETHTOOL_A_COALESCE_RX_MAX_FRAMES_HIGH", func(h *nic.Coalesce) **uint32 { return &h.RXMaxFramesHigh }},
	{"ETHTOOL_A_COALESCE_TX_USECS_HIGH", func(h *nic.Coalesce) **uint32 { return &h.TXUsecsHigh }},
	{"ETHTOOL_A_COALESCE_TX_MAX_FRAMES_HIGH", func(h *nic.Coalesce) **uint32 { return &h.TXMaxFramesHigh }},
	{"ETHTOOL_A_COALESCE_RATE_SAMPLE_INTERVAL", func(h *nic.Coalesce) **uint32 { return &h.RateSampleInterval }},
}

func labGet(t *testing.T, dev *nic.Device) nic.Coalesce {
	t.Helper()
	h, err := dev.Coalesce()
	if err != nil {
		t.Fatalf("Coalesce(%s): %v", dev.Name(), err)
	}
	return h
}

// TestLabCoalesceNetdevsimRoundTrip sets each parameter netdevsim supports
// to a random value, one at a time, and requires the kernel to read back
// exactly that change with every other parameter unchanged (as the kernel's
// ethtool-coalesce.sh selftest does). Oracle: netdevsim's stored struct,
// read back with COALESCE_GET.
func TestLabCoalesceNetdevsimRoundTrip(t *testing.T) {
	dev := labctl.OpenNIC(t, labctl.Netdevsim(t))
	orig := labGet(t, dev)
	t.Cleanup(func() {
		if err := dev.SetCoalesce(orig); err != nil {
			t.Errorf("restore: %v", err)
		}
	})
	for _, p := range labU32 {
		if *p.field(&orig) == nil {
			t.Errorf("Get reports %s as unsupported; netdevsim supports every parameter", p.attr)
		}
	}
	rng := rand.New(rand.NewPCG(7, 2026))
	for round := range 3 {
		for _, p := range labU32 {
			before := labGet(t, dev)
			v := rng.Uint32N(1 << 20)
			if old := *p.field(&before); old != nil && *old == v {
				v++
			}
			var set nic.Coalesce
			*p.field(&set) = &v
			if err := dev.SetCoalesce(set); err != nil {
				t.Fatalf("round %d: Set %s=%d: %v", round, p.attr, v, err)
			}
			want := before
			*p.field(&want) = &v
			if diff := cmp.Diff(want, labGet(t, dev)); diff != "" {
				t.Errorf("round %d: after Set %s=%d (-want +got):\n%s", round, p.attr, v, diff)
			}
		}
	}
}

// TestLabCoalesceNetdevsimAdaptive turns adaptive RX and TX on and off, each
// alone, and requires the other parameters unchanged.
func TestLabCoalesceNetdevsimAdaptive(t *testing.T) {
	dev := labctl.OpenNIC(t, labctl.Netdevsim(t))
	orig := labGet(t, dev)
	t.Cleanup(func() { dev.SetCoalesce(orig) })
	for _, p := range []struct {
		name  string
		field func(*nic.Coalesce) **bool
	}{
		{"adaptive-rx", func(h *nic.Coalesce) **bool { return &h.UseAdaptiveRX }},
		{"adaptive-tx", func(h *nic.Coalesce) **bool { return &h.UseAdaptiveTX }},
	} {
		for _, on := range []bool{true, false, true, false} {
			before := labGet(t, dev)
			var set nic.Coalesce
			*p.field(&set) = &on
			if err := dev.SetCoalesce(set); err != nil {
				t.Fatalf("Set %s %v: %v", p.name, on, err)
			}
			want := before
			*p.field(&want) = &on
			if diff := cmp.Diff(want, labGet(t, dev)); diff != "" {
				t.Errorf("after Set %s %v (-want +got):\n%s", p.name, on, diff)
			}
		}
	}
}

// TestLabCoalesceVirtioUnsupported asks virtio-net, which supports only a
// few parameters, for one it lacks: Set must refuse before sending with
// ErrNotSupported naming the attribute, and change nothing. The raw client
// sends it anyway: the kernel's own refusal must map to ErrNotSupported
// too.
func TestLabCoalesceVirtioUnsupported(t *testing.T) {
	dev := labctl.OpenNIC(t, labctl.Virtio(t))
	before := labGet(t, dev)
	t.Logf("virtio-net supports: %s", nic.SupportedCoalesce(before))
	if before.RXUsecsIRQ != nil {
		t.Fatalf("virtio-net reports rx-usecs-irq; pick another unsupported parameter")
	}
	v := uint32(17)
	err := dev.SetCoalesce(nic.Coalesce{RXUsecsIRQ: &v})
	if !errors.Is(err, nic.ErrNotSupported) {
		t.Fatalf("Set rx-usecs-irq on virtio-net: %v, want ErrNotSupported", err)
	}
	if !strings.Contains(err.Error(), "ETHTOOL_A_COALESCE_RX_USECS_IRQ") {
		t.Errorf("error %q does not name ETHTOOL_A_COALESCE_RX_USECS_IRQ", err)
	}
	if diff := cmp.Diff(before, labGet(t, dev)); diff != "" {
		t.Errorf("refused Set changed the device (-before +after):\n%s", diff)
	}

	c, err := ethtool.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.SetCoalesce(ethtool.Device{Name: dev.Name()}, nic.Coalesce{RXUsecsIRQ: &v})
	t.Logf("kernel's answer to COALESCE_SET rx-usecs-irq: %v", err)
	if !errors.Is(err, nic.ErrNotSupported) {
		t.Errorf("raw COALESCE_SET rx-usecs-irq on virtio-net: %v, want ErrNotSupported", err)
	}
}

// TestLabCoalescePerQueue reads per-queue coalescing (the ETHTOOL_PERQUEUE
// ioctl): netdevsim has no per-queue operations and must give
// ErrNotSupported; virtio-net has them and answers for each queue with the
// parameters it supports.
func TestLabCoalescePerQueue(t *testing.T) {
	nsim := labctl.OpenNIC(t, labctl.Netdevsim(t))
	_, err := nsim.QueueCoalesce([]int{0, 1})
	t.Logf("netdevsim GetQueues: %v", err)
	if !errors.Is(err, nic.ErrNotSupported) {
		t.Errorf("GetQueues on netdevsim: %v, want ErrNotSupported", err)
	}
	vio := labctl.OpenNIC(t, labctl.Virtio(t))
	hs, err := vio.QueueCoalesce([]int{0, 1, 2, 3})
	if err != nil {
		t.Fatalf("GetQueues on virtio-net: %v", err)
	}
	if len(hs) != 4 {
		t.Fatalf("GetQueues returned %d entries for 4 queues", len(hs))
	}
	for q, h := range hs {
		if h.RXMaxFrames == nil {
			t.Errorf("queue %d: rx-frames not reported", q)
		}
		if h.RXUsecsIRQ != nil {
			t.Errorf("queue %d: rx-usecs-irq reported; virtio-net does not support it", q)
		}
	}
	t.Logf("virtio-net queue 0: %s", nic.SupportedCoalesce(hs[0]))
}
