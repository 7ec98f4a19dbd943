//go:build lab && linux

package xsk_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/test/lab/labctl"
	"github.com/xdpio/xdpio/xsk"
)

// inputIRQs returns the interrupt count of each RX queue of the virtio-net
// NIC name, from /proc/interrupts (lines "virtioN-input.Q").
func inputIRQs(t *testing.T, name string) map[int]uint64 {
	t.Helper()
	dev, err := filepath.EvalSymlinks("/sys/class/net/" + name + "/device")
	if err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Base(dev) + "-input."
	b, err := os.ReadFile("/proc/interrupts")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]uint64{}
	lines := strings.Split(string(b), "\n")
	cpus := len(strings.Fields(lines[0]))
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < cpus+2 || !strings.HasPrefix(f[len(f)-1], prefix) {
			continue
		}
		q, err := strconv.Atoi(strings.TrimPrefix(f[len(f)-1], prefix))
		if err != nil {
			continue
		}
		for _, v := range f[1 : 1+cpus] {
			n, _ := strconv.ParseUint(v, 10, 64)
			out[q] += n
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s* line in /proc/interrupts", prefix)
	}
	return out
}

type irqRun struct {
	frames, irqs, polls, naps uint64
	// wakes is how often the busiest socket's receiver waited (polls and
	// naps): a goroutine that owns several sockets (a Poller) counts one
	// wait on each of them, so summing over sockets would count one
	// wake-up several times.
	wakes uint64
	cpu   time.Duration
}

func (r irqRun) String() string {
	return fmt.Sprintf("%d frames, %d IRQs (%.2f/frame), %d polls, %d naps, CPU %.1f µs/frame",
		r.frames, r.irqs, float64(r.irqs)/float64(max(r.frames, 1)), r.polls, r.naps, float64(r.cpu.Microseconds())/float64(max(r.frames, 1)))
}

// irqTrial opens the NIC with cfg, receives with rc while the host sends
// flows × per frames at gap, and returns what it took.
func irqTrial(t *testing.T, c *labctl.Client, name string, cfg xsk.Config, rc xsk.RunConfig, per int, gap time.Duration) irqRun {
	t.Helper()
	d, err := xsk.Open(name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var count atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- d.Receive(ctx, rc, func(s *xsk.Socket, b *xsk.Batch) { count.Add(int64(b.Len())) })
	}()
	flows := labFlows(40, 256)
	want := int64(len(flows) * per)
	irq0, cpu0 := inputIRQs(t, name), guestCPU(t)
	if _, err := c.SendGap(flows, per, gap); err != nil {
		cancel()
		<-done
		t.Fatal(err)
	}
	waitCount(&count, want, 10*time.Second)
	irq1, cpu1 := inputIRQs(t, name), guestCPU(t)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r := irqRun{frames: uint64(count.Load()), cpu: time.Duration(cpu1 - cpu0)}
	for q := range irq1 {
		r.irqs += irq1[q] - irq0[q]
	}
	for _, s := range d.Sockets() {
		st, _ := s.Stats()
		r.polls += st.Polls
		r.naps += st.Naps
		r.wakes = max(r.wakes, st.Polls+st.Naps)
	}
	if r.frames != uint64(want) {
		t.Errorf("received %d of %d frames", r.frames, want)
	}
	return r
}

// TestLabBusyPollIRQSuspend: with epoll busy polling and the queues'
// irq-suspend-timeout set, the device's RX IRQs stay suspended while the
// receivers keep finding packets — counted in /proc/interrupts against
// the same traffic received the default way.
func TestLabBusyPollIRQSuspend(t *testing.T) {
	name := labctl.Virtio(t)
	if qs := inputIRQs(t, name); len(qs) == 0 {
		t.Fatal("no RX queue interrupts")
	}
	nd := labctl.OpenNIC(t, name)
	if q, err := nd.Queues(); err != nil || len(q) == 0 || q[0].NAPIID == 0 {
		netnstest.SkipIfNotSupported(t, fmt.Errorf("%s links no queue to a NAPI on this kernel (netdev queue-get), so busy polling has no NAPI to drive: %w", name, xsk.ErrNotSupported))
	}
	c := labctl.DialTB(t)
	base := zcConfig(xsk.BindAuto)
	// At the sender's pace (a frame every 0.1-1 ms: the guest keeps up)
	// the default receiver takes about one IRQ per frame. A busy poll
	// longer than the gaps keeps finding packets, so the suspension
	// holds: IRQs stay off while the application drives the queues.
	const per = 4
	def := irqTrial(t, c, name, base, xsk.RunConfig{}, per, 0)
	susp := base
	susp.NAPIDeferral = &xsk.NAPIDeferral{DeferHardIRQs: 100, GROFlushTimeout: 50 * time.Microsecond, IRQSuspendTimeout: 20 * time.Millisecond}
	bp := irqTrial(t, c, name, susp, xsk.RunConfig{Shape: xsk.ShapePerQueue, BusyPoll: xsk.BusyPoll{Timeout: 5 * time.Millisecond}}, per, 0)
	labNote(t, "busy poll (5 ms) + irq-suspend (20 ms) vs default runner, at the host sender's pace: IRQs/frame %.3f vs %.3f (%s | %s)",
		float64(bp.irqs)/float64(max(bp.frames, 1)), float64(def.irqs)/float64(max(def.frames, 1)), bp, def)
	if bp.irqs*2 > def.irqs {
		t.Errorf("IRQs with suspension %d, without %d: want at most half", bp.irqs, def.irqs)
	}
}

// TestLabNAPIMeasure measures NAPI deferral against the kernel default at
// the host sender's pace (equal rate): guest CPU per frame, IRQs per frame
// and frames per wake-up of the runner.
func TestLabNAPIMeasure(t *testing.T) {
	name := labctl.Virtio(t)
	nd := labctl.OpenNIC(t, name)
	if q, err := nd.Queues(); err != nil || len(q) == 0 || q[0].NAPIID == 0 {
		netnstest.SkipIfNotSupported(t, fmt.Errorf("%s links no queue to a NAPI on this kernel (netdev queue-get): %w", name, xsk.ErrNotSupported))
	}
	c := labctl.DialTB(t)
	base := zcConfig(xsk.BindAuto)
	deferred := base
	deferred.NAPIDeferral = &xsk.NAPIDeferral{DeferHardIRQs: 2, GROFlushTimeout: 200 * time.Microsecond}
	var def, dfr []irqRun
	for round := 0; round < 3; round++ {
		def = append(def, irqTrial(t, c, name, base, xsk.RunConfig{}, 8, 20*time.Microsecond))
		dfr = append(dfr, irqTrial(t, c, name, deferred, xsk.RunConfig{}, 8, 20*time.Microsecond))
	}
	med := medianOf[irqRun]
	cpu := func(r irqRun) float64 { return float64(r.cpu.Nanoseconds()) / float64(max(r.frames, 1)) }
	irq := func(r irqRun) float64 { return float64(r.irqs) / float64(max(r.frames, 1)) }
	// One receiver goroutine on the guest's 2 CPUs (ShapeAuto), so its
	// waits are the busiest socket's.
	wake := func(r irqRun) float64 { return float64(r.frames) / float64(max(r.wakes, 1)) }
	labNote(t, "NAPI deferral (defer 2, flush 200µs) vs default, host pausing 20 µs between frames: CPU/frame %.0f vs %.0f ns (%.2fx), IRQs/frame %.3f vs %.3f, frames per wake-up %.2f vs %.2f (median of 3)",
		med(dfr, cpu), med(def, cpu), med(dfr, cpu)/med(def, cpu), med(dfr, irq), med(def, irq), med(dfr, wake), med(def, wake))
}
