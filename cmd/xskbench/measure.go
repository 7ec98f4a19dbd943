//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/xdpio/xdpio/internal/trafficgen"
	"github.com/xdpio/xdpio/internal/vethpair"
	"github.com/xdpio/xdpio/xsk"
)

// Options configure a benchmark run.
type Options struct {
	// Queues of each veth end: one socket (and one goroutine) per queue.
	Queues int
	// Sizes are the frame lengths in bytes (without FCS).
	Sizes []int
	// Rounds: every backend is measured once per round, in rotating
	// order; the report gives the median over rounds.
	Rounds int
	// Warmup before, and Window of, each measurement.
	Warmup, Window time.Duration
	// Batch is the receive/transmit batch of every backend.
	Batch int
	// TXBatch is how many frames xdpio's sender puts on the TX ring per
	// Transmit: 0 means the whole ring, as asavie/xdp's sendudp example
	// does with GetDescs(NumFreeTxSlots()).
	TXBatch int
	// RingSize is the size of every AF_XDP ring; NumFrames and FrameSize
	// describe each socket's UMEM (the same for xdpio and asavie/xdp).
	RingSize, NumFrames, FrameSize int
	// TXBudget is xdpio's XDP_MAX_TX_SKB_BUDGET (frames per TX kick in
	// copy mode).
	TXBudget int
	// Spin is how many times an AF_XDP receiver (xdpio and asavie/xdp
	// alike) looks at an empty RX ring before it sleeps in poll.
	Spin int
	// Nap is the RX nap of the xdpio-nap backend (SocketConfig.RXNap) and
	// of asavie-nap, which applies the same policy by hand: while packets
	// flow, a receiver that finds its RX ring empty sleeps this long on a
	// timer instead of blocking in poll on the socket, which spares the
	// kernel a wake-up per NAPI flush.
	Nap time.Duration
	// BusyPoll is SO_BUSY_POLL of the xdpio-busypoll backend's sockets
	// (preferred busy polling; asavie/xdp has no such option) and
	// BusyPollBudget its SO_BUSY_POLL_BUDGET. BusyPollSpin is how many
	// empty busy polls its receiver makes before it sleeps in poll.
	BusyPoll       time.Duration
	BusyPollBudget int
	BusyPollSpin   int
	// NAPIDefer and GROFlushTimeout are the veth's napi_defer_hard_irqs
	// and gro_flush_timeout while xdpio-busypoll runs (reset to 0 after).
	NAPIDefer       int
	GROFlushTimeout time.Duration
	// EagerComplete makes the xdpio sender reclaim completions on every
	// loop instead of only when its frame pool runs short.
	EagerComplete bool
	// Sockets is the number of SO_REUSEPORT kernel UDP sockets.
	Sockets int
	// Flows is the number of UDP source ports the generator uses.
	Flows int
	// Port is the UDP destination port.
	Port uint16
	// Modes and Backends select what to measure (nil: everything).
	Modes, Backends []string
	// Verbose adds per-measurement veth and socket counters to the log.
	Verbose bool

	frame []byte    // the template of the size being measured
	log   io.Writer // progress
	cpu   *cpuMeter
	cBin  string // the built C peer; empty: skipped
}

// Mode names.
const (
	modeRX = "rxdrop"
	modeTX = "txonly"
)

// Backend names.
const (
	beGen   = "generator" // the generator into an XDP_DROP program
	beXDPIO = "xdpio"
	// beXDPIOBusy is xdpio with preferred busy polling: the receiving
	// goroutines run veth's NAPI themselves.
	beXDPIOBusy = "xdpio-busypoll"
	beAsavie    = "asavie"
	// beAsavieDoc is asavie/xdp with the receive loop its README and
	// examples show: a poll syscall before every receive.
	beAsavieDoc = "asavie-doc"
	// beXDPIONap is xdpio with SocketConfig.RXNap; beAsavieNap is asavie's
	// tuned loop with the same nap policy written into the loop.
	beXDPIONap  = "xdpio-nap"
	beAsavieNap = "asavie-nap"
	// The -group backends receive every queue in one thread that waits on
	// all the sockets at once (xdpio: xsk.Poller; asavie/xdp and C: poll
	// on all their descriptors, written into the loop), instead of a
	// thread per queue; -group-nap adds the nap policy.
	beXDPIOGroup    = "xdpio-group"
	beXDPIOGroupNap = "xdpio-group-nap"
	// beXDPIOCoalesce is the library's way to do what xdpio-group-nap does
	// by hand: one coalesce.GroupReceiver for every queue, rx-usecs -nap.
	beXDPIOCoalesce  = "xdpio-coalesce"
	beAsavieGroup    = "asavie-group"
	beAsavieGroupNap = "asavie-group-nap"
	beCGroup         = "c-group"
	beCGroupNap      = "c-group-nap"
	beSocket         = "socket"
	// beSocketGRO is kernel UDP sockets with UDP_GRO (gro on veth-b).
	beSocketGRO = "socket-gro"
	// beXDPNet is package xdpnet's ReadBatch (one goroutine, copying,
	// checksums verified); beXDPNetQueues its per-queue in-place readers.
	beXDPNet       = "xdpnet"
	beXDPNetQueues = "xdpnet-queues"
	// beXDPNetNap and beXDPNetQueuesNap are the same with RXNap = -nap.
	beXDPNetNap = "xdpnet-nap"
	// beXDPIOTouch is xdpio's rxdrop reading the first byte of every
	// frame: the bare receiver to hold a parsing one against.
	beXDPIOTouch = "xdpio-touch"
	// beXDPIORun is xsk's runner with its defaults (Device.Receive,
	// Device.Send: RunConfig{}): the loop the README starts a user on.
	beXDPIORun        = "xdpio-run"
	beXDPNetQueuesNap = "xdpnet-queues-nap"
	// beSocketGSO (txonly) is kernel UDP sockets writing UDP_SEGMENT
	// batches: the kernel's fastest UDP sender.
	beSocketGSO = "socket-gso"
	// beXDPIORule, beXDPIOExpr and beXDPIOExpr10 are xdpio's rxdrop with
	// a filter that every generated frame passes: the hand-built rule
	// xsk.UDPPort(-port), the expression "udp dst port PORT" compiled by
	// package filter, and a 10-clause expression ending in the same
	// test. Next to each other they give the cost of the compiled filter
	// against the hand-built one, and of a longer expression. Measured
	// only when -backends names them.
	beXDPIORule   = "xdpio-rule"
	beXDPIOExpr   = "xdpio-expr"
	beXDPIOExpr10 = "xdpio-expr10"
	// beC is the C peer (c/xskpeer.c): inside this process through cgo
	// when the binary has cgo, else as a child process built with the
	// system's compiler when there is one. beCProc is always the child
	// process (run only when named): next to beC it shows what a
	// separate address space costs on this machine.
	beC     = "c"
	beCProc = "c-proc"
	// beCNap is the C peer with xdpio's RXNap policy in its rxdrop loop.
	beCNap = "c-nap"
)

var (
	rxBackends = []string{beGen, beXDPIORun, beXDPIO, beXDPIONap, beXDPIOGroup, beXDPIOGroupNap, beXDPIOCoalesce, beXDPIOBusy, beAsavie, beAsavieDoc, beAsavieNap, beAsavieGroup, beAsavieGroupNap, beSocket, beSocketGRO, beXDPIOTouch, beXDPNet, beXDPNetQueues, beXDPNetNap, beXDPNetQueuesNap, beC, beCNap, beCGroup, beCGroupNap, beCProc, beXDPIORule, beXDPIOExpr, beXDPIOExpr10}
	txBackends = []string{beXDPIORun, beXDPIO, beAsavie, beC, beCProc, beSocketGSO}
	// onRequest are backends measured only when -backends names them.
	onRequest = []string{beCProc, beXDPIORule, beXDPIOExpr, beXDPIOExpr10}
)

func (o *Options) wants(mode, backend string) bool {
	return (len(o.Modes) == 0 || slices.Contains(o.Modes, mode)) &&
		(len(o.Backends) == 0 && !slices.Contains(onRequest, backend) || slices.Contains(o.Backends, backend))
}

func (o *Options) validate() error {
	switch {
	case o.Queues < 1:
		return fmt.Errorf("queues %d: must be at least 1", o.Queues)
	case len(o.Sizes) == 0:
		return errors.New("no frame size given")
	case o.Rounds < 1:
		return fmt.Errorf("rounds %d: must be at least 1", o.Rounds)
	case o.Window <= 0 || o.Warmup < 0:
		return fmt.Errorf("window %v, warm-up %v: window must be positive, warm-up not negative", o.Window, o.Warmup)
	case o.Batch < 1 || o.Batch > o.RingSize:
		return fmt.Errorf("batch %d: must be between 1 and the ring size %d", o.Batch, o.RingSize)
	case o.TXBatch < 0 || o.TXBatch > o.RingSize:
		return fmt.Errorf("tx batch %d: must be between 0 (the ring) and the ring size %d", o.TXBatch, o.RingSize)
	case o.Sockets < 1:
		return fmt.Errorf("sockets %d: must be at least 1", o.Sockets)
	}
	for _, m := range o.Modes {
		if m != modeRX && m != modeTX {
			return fmt.Errorf("mode %q: want %s or %s", m, modeRX, modeTX)
		}
	}
	for _, b := range o.Backends {
		if !slices.Contains(rxBackends, b) && !slices.Contains(txBackends, b) {
			return fmt.Errorf("backend %q: want one of %s, or for txonly %s", b, strings.Join(rxBackends, ", "), beSocketGSO)
		}
	}
	for _, s := range o.Sizes {
		if s < 60 || s > o.FrameSize-256 || s > 1514 {
			return fmt.Errorf("frame size %d: must be between 60 and 1514", s)
		}
	}
	return nil
}

// Sample is one measurement.
type Sample struct {
	// PPS is what arrived per second over the window.
	PPS float64 `json:"pps"`
	// OfferedPPS is what the generator (rxdrop) or the sender (txonly)
	// put out per second over the same window.
	OfferedPPS float64 `json:"offered_pps"`
	// CPUs is how many CPUs the benchmark kept busy on average (this
	// process and ksoftirqd), and PerCPU is PPS per busy CPU: packets per
	// CPU-second, which other tenants of the machine affect less.
	CPUs   float64 `json:"cpus"`
	PerCPU float64 `json:"pps_per_cpu"`
	// AppNsPerPkt is the CPU time of the application's own threads (the
	// receive or send loops, syscalls included; not the generator, not
	// softirq work on other CPUs) per packet: what the library costs.
	AppNsPerPkt float64 `json:"app_ns_per_pkt,omitempty"`
	// AppSysNsPerPkt is the part of AppNsPerPkt spent in the kernel
	// (system time, at 10 ms tick resolution): syscalls, and in copy mode
	// the kernel's TX work done in the sender's kick.
	AppSysNsPerPkt float64 `json:"app_sys_ns_per_pkt,omitempty"`
	// NAPIIDs are the sockets' SO_INCOMING_NAPI_ID at the end of the
	// window (xdpio-busypoll only): 0 means busy polling could not run.
	NAPIIDs []int `json:"napi_ids,omitempty"`
}

// Result is the summary of one backend at one size.
type Result struct {
	Mode        string  `json:"mode"`
	Size        int     `json:"size"`
	Backend     string  `json:"backend"`
	PPS         float64 `json:"pps_median"`
	OfferedPPS  float64 `json:"offered_pps_median"`
	PerCPU      float64 `json:"pps_per_cpu_median"`
	AppNsPerPkt float64 `json:"app_ns_per_pkt_median,omitempty"`
	// AppSysNsPerPkt is the median of the samples' system part.
	AppSysNsPerPkt float64  `json:"app_sys_ns_per_pkt_median,omitempty"`
	Samples        []Sample `json:"samples"`
}

// Ratio compares two backends at one size.
type Ratio struct {
	Mode  string  `json:"mode"`
	Size  int     `json:"size"`
	Name  string  `json:"name"` // e.g. "xdpio/asavie"
	Value float64 `json:"value"`
	// Paired is the median over rounds of the two backends' ratio within
	// each round: they ran seconds apart, so a noisy neighbour that
	// slowed one round slowed both, and this is steadier than Value on a
	// shared machine.
	Paired float64 `json:"paired"`
	// PerCPU is the same ratio of packets per CPU-second.
	PerCPU float64 `json:"per_cpu"`
	// AppCost is how many times more CPU per packet the second backend's
	// own threads spend than the first's (b's app ns/pkt ÷ a's).
	AppCost float64 `json:"app_cost,omitempty"`
	Goal    float64 `json:"goal,omitempty"`
	Met     *bool   `json:"met,omitempty"`
}

// Report is the benchmark's output.
type Report struct {
	Queues   int      `json:"queues"`
	Rounds   int      `json:"rounds"`
	WindowS  float64  `json:"window_s"`
	WarmupS  float64  `json:"warmup_s"`
	Batch    int      `json:"batch"`
	Results  []Result `json:"results"`
	Ratios   []Ratio  `json:"ratios"`
	Elapsed  float64  `json:"elapsed_s"`
	Warnings []string `json:"warnings,omitempty"`
	// Skipped names backends that could not run here, with the reason
	// (the C peer without a C compiler or kernel headers).
	Skipped map[string]string `json:"skipped,omitempty"`
}

// measure runs every selected mode, size and backend o.Rounds times on
// pair (frames flow from A to B for rxdrop, from B to A for txonly) and
// summarises. Progress goes to log.
func measure(ctx context.Context, pair *vethpair.Pair, o Options, log io.Writer) (*Report, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	o.Queues = pair.Queues
	o.log = log
	o.cpu = newCPUMeter()
	// The kernel-socket receiver needs NAPI on veth-b without an XDP
	// program: GRO on gives it.
	if out, err := pair.B.Command(ctx, "ethtool", "-K", pair.B.Link, "gro", "on").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ethtool -K %s gro on: %w: %s", pair.B.Link, err, out)
	}
	skipped := map[string]string{}
	needProc := o.wants(modeRX, beCProc) || o.wants(modeTX, beCProc) || (!cPeerInProcess && (o.wants(modeRX, beC) || o.wants(modeTX, beC) || o.wants(modeRX, beCNap) || o.wants(modeRX, beCGroup) || o.wants(modeRX, beCGroupNap)))
	if needProc {
		dir, err := os.MkdirTemp("", "xskbench-c")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		if o.cBin, err = buildCPeer(ctx, dir); err != nil {
			skipped[beCProc] = err.Error()
			if !cPeerInProcess {
				skipped[beC] = err.Error()
				skipped[beCNap] = err.Error()
				skipped[beCGroup] = err.Error()
				skipped[beCGroupNap] = err.Error()
			}
			fmt.Fprintf(log, "xskbench: skipping the C peer as a process: %v\n", err)
		}
	}
	gens := map[int]*trafficgen.Generator{}
	defer func() {
		for _, g := range gens {
			g.Close()
		}
	}()
	for _, size := range o.Sizes {
		err := pair.A.Do(func() (err error) {
			gens[size], err = trafficgen.New(trafficgen.Config{
				Ifindex: pair.A.Ifindex,
				Frame: trafficgen.FrameSpec{
					SrcMAC: pair.A.MAC, DstMAC: pair.B.MAC, Src: pair.A.IPv4, Dst: pair.B.IPv4,
					SrcPort: 40000, DstPort: o.Port, Size: size,
				},
				Flows: o.Flows,
			})
			return err
		})
		if err != nil {
			return nil, err
		}
	}

	samples := map[string][]Sample{}
	key := func(mode string, size int, be string) string { return fmt.Sprintf("%s/%d/%s", mode, size, be) }
	for round := 0; round < o.Rounds; round++ {
		for _, size := range o.Sizes {
			o.frame = gens[size].Frame()
			for _, be := range rotate(rxBackends, round) {
				if !o.wants(modeRX, be) || skipped[be] != "" {
					continue
				}
				t0 := time.Now()
				s, err := measureRX(ctx, pair, &o, gens[size], be)
				if err != nil {
					return nil, fmt.Errorf("round %d, rxdrop %d B, %s: %w", round+1, size, be, err)
				}
				fmt.Fprintf(log, "round %d  rxdrop %4d B  %-9s %7.3f Mpps (offered %.3f) %.2f CPUs %.3f Mpps/CPU [%.1fs]\n", round+1, size, be, s.PPS/1e6, s.OfferedPPS/1e6, s.CPUs, s.PerCPU/1e6, time.Since(t0).Seconds())
				samples[key(modeRX, size, be)] = append(samples[key(modeRX, size, be)], s)
			}
			for _, be := range rotate(txBackends, round) {
				if !o.wants(modeTX, be) || skipped[be] != "" {
					continue
				}
				t0 := time.Now()
				s, err := measureTX(ctx, pair, &o, be)
				if err != nil {
					return nil, fmt.Errorf("round %d, txonly %d B, %s: %w", round+1, size, be, err)
				}
				fmt.Fprintf(log, "round %d  txonly %4d B  %-9s %7.3f Mpps (sent %.3f) %.2f CPUs %.3f Mpps/CPU [%.1fs]\n", round+1, size, be, s.PPS/1e6, s.OfferedPPS/1e6, s.CPUs, s.PerCPU/1e6, time.Since(t0).Seconds())
				samples[key(modeTX, size, be)] = append(samples[key(modeTX, size, be)], s)
			}
		}
	}

	rep := &Report{Queues: o.Queues, Rounds: o.Rounds, WindowS: o.Window.Seconds(), WarmupS: o.Warmup.Seconds(), Batch: o.Batch}
	if len(skipped) > 0 {
		rep.Skipped = skipped
	}
	med := map[string]float64{}
	medCPU := map[string]float64{}
	medApp := map[string]float64{}
	for _, mode := range []string{modeRX, modeTX} {
		bes := rxBackends
		if mode == modeTX {
			bes = txBackends
		}
		for _, size := range o.Sizes {
			for _, be := range bes {
				ss := samples[key(mode, size, be)]
				if len(ss) == 0 {
					continue
				}
				r := Result{Mode: mode, Size: size, Backend: be, Samples: ss}
				r.PPS = median(ss, func(s Sample) float64 { return s.PPS })
				r.OfferedPPS = median(ss, func(s Sample) float64 { return s.OfferedPPS })
				r.PerCPU = median(ss, func(s Sample) float64 { return s.PerCPU })
				r.AppNsPerPkt = median(ss, func(s Sample) float64 { return s.AppNsPerPkt })
				r.AppSysNsPerPkt = median(ss, func(s Sample) float64 { return s.AppSysNsPerPkt })
				medApp[key(mode, size, be)] = r.AppNsPerPkt
				med[key(mode, size, be)] = r.PPS
				medCPU[key(mode, size, be)] = r.PerCPU
				rep.Results = append(rep.Results, r)
			}
			ratio := func(name, a, b string, goal float64) {
				x, okA := med[key(mode, size, a)]
				y, okB := med[key(mode, size, b)]
				if !okA || !okB || y == 0 {
					return
				}
				r := Ratio{Mode: mode, Size: size, Name: name, Value: x / y, Goal: goal}
				sa, sb := samples[key(mode, size, a)], samples[key(mode, size, b)]
				var per []Sample
				for i := range min(len(sa), len(sb)) {
					if sb[i].PPS > 0 {
						per = append(per, Sample{PPS: sa[i].PPS / sb[i].PPS})
					}
				}
				if len(per) > 0 {
					r.Paired = median(per, func(s Sample) float64 { return s.PPS })
				}
				if c := medCPU[key(mode, size, b)]; c > 0 {
					r.PerCPU = medCPU[key(mode, size, a)] / c
				}
				if c := medApp[key(mode, size, a)]; c > 0 {
					r.AppCost = medApp[key(mode, size, b)] / c
				}
				if goal > 0 {
					met := r.Value >= goal
					r.Met = &met
				}
				rep.Ratios = append(rep.Ratios, r)
			}
			ratio("xdpio-run/c", beXDPIORun, beC, 1.0)
			ratio("xdpio-run/asavie", beXDPIORun, beAsavie, 0)
			ratio("xdpio-run/xdpio", beXDPIORun, beXDPIO, 0)
			if mode == modeTX {
				ratio("xdpio-run/socket-gso", beXDPIORun, beSocketGSO, 0)
				ratio("c/socket-gso", beC, beSocketGSO, 0)
			}
			ratio("xdpio/asavie", beXDPIO, beAsavie, 1.5)
			ratio("xdpio/c", beXDPIO, beC, 0)
			ratio("c/asavie", beC, beAsavie, 0)
			ratio("c/c-proc", beC, beCProc, 0)
			if mode == modeRX {
				ratio("xdpio-run/asavie-doc", beXDPIORun, beAsavieDoc, 1.3)
				ratio("xdpio-expr/xdpio-rule", beXDPIOExpr, beXDPIORule, 0.95)
				ratio("xdpio-expr10/xdpio-expr", beXDPIOExpr10, beXDPIOExpr, 0.9)
				ratio("xdpio-run/c-group-nap", beXDPIORun, beCGroupNap, 1.0)
				ratio("xdpio-run/generator", beXDPIORun, beGen, 0)
				ratio("c/generator", beC, beGen, 0)
				ratio("xdpio-nap/asavie", beXDPIONap, beAsavie, 1.5)
				ratio("xdpio-nap/asavie-doc", beXDPIONap, beAsavieDoc, 1.5)
				ratio("xdpio-nap/asavie-nap", beXDPIONap, beAsavieNap, 0)
				ratio("xdpio-nap/socket", beXDPIONap, beSocket, 2)
				ratio("xdpio-nap/xdpio", beXDPIONap, beXDPIO, 0)
				ratio("xdpio-nap/c-nap", beXDPIONap, beCNap, 0)
				ratio("xdpio-group/asavie", beXDPIOGroup, beAsavie, 1.5)
				ratio("xdpio-group/asavie-group", beXDPIOGroup, beAsavieGroup, 0)
				ratio("xdpio-group/c-group", beXDPIOGroup, beCGroup, 0)
				ratio("xdpio-group-nap/asavie", beXDPIOGroupNap, beAsavie, 1.5)
				ratio("xdpio-group-nap/asavie-doc", beXDPIOGroupNap, beAsavieDoc, 1.5)
				ratio("xdpio-group-nap/asavie-group-nap", beXDPIOGroupNap, beAsavieGroupNap, 0)
				ratio("xdpio-group-nap/c-group-nap", beXDPIOGroupNap, beCGroupNap, 0)
				ratio("xdpio-group-nap/c", beXDPIOGroupNap, beC, 0)
				ratio("xdpio-coalesce/asavie", beXDPIOCoalesce, beAsavie, 0)
				ratio("xdpio-busypoll/asavie", beXDPIOBusy, beAsavie, 1.5)
				ratio("xdpio-busypoll/xdpio", beXDPIOBusy, beXDPIO, 0)
				ratio("xdpio/asavie-doc", beXDPIO, beAsavieDoc, 1.5)
				ratio("xdpio/socket", beXDPIO, beSocket, 2)
				ratio("generator/xdpio", beGen, beXDPIO, 0)
				if ss := samples[key(mode, size, beXDPIOBusy)]; len(ss) > 0 && !slices.ContainsFunc(ss, func(s Sample) bool { return slices.ContainsFunc(s.NAPIIDs, func(id int) bool { return id != 0 }) }) {
					rep.Warnings = append(rep.Warnings, fmt.Sprintf("rxdrop %d B: %s: no socket ever had a NAPI ID (SO_INCOMING_NAPI_ID 0), so busy polling never ran: the device's XDP receive queues carry none (veth on this kernel)", size, beXDPIOBusy))
				}
				// The generator must outrun every receiver: a receiver
				// that took (nearly) everything offered was limited by
				// the generator, not by itself.
				for _, r := range rep.Results {
					if r.Mode == modeRX && r.Size == size && r.Backend != beGen && r.PPS > 0.95*r.OfferedPPS {
						rep.Warnings = append(rep.Warnings, fmt.Sprintf("rxdrop %d B: %s received %.2f of %.2f Mpps offered: the generator, not the receiver, may be the limit", size, r.Backend, r.PPS/1e6, r.OfferedPPS/1e6))
					}
				}
			}
		}
	}
	rep.Elapsed = time.Since(start).Seconds()
	return rep, nil
}

// rotate returns s rotated left by r, so that every backend takes every
// position in the order over the rounds.
func rotate(s []string, r int) []string {
	r %= len(s)
	return append(append([]string(nil), s[r:]...), s[:r]...)
}

func median(ss []Sample, f func(Sample) float64) float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = f(s)
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func newRX(be string, o *Options) receiver {
	switch be {
	case beC:
		return &cPeer{bin: o.cBin, inproc: cPeerInProcess}
	case beCNap:
		return &cPeer{bin: o.cBin, inproc: cPeerInProcess, nap: true}
	case beCGroup:
		return &cPeer{bin: o.cBin, inproc: cPeerInProcess, group: true}
	case beCGroupNap:
		return &cPeer{bin: o.cBin, inproc: cPeerInProcess, group: true, nap: true}
	case beAsavieGroup:
		return &asavieRX{group: true}
	case beAsavieGroupNap:
		return &asavieRX{group: true, nap: true}
	case beCProc:
		return &cPeer{bin: o.cBin}
	case beGen:
		return &dropRX{}
	case beXDPIO:
		return &xdpioRX{}
	case beXDPIORun:
		return &xdpioRX{run: true}
	case beXDPIOBusy:
		return &xdpioRX{busyPoll: true}
	case beXDPIONap:
		return &xdpioRX{nap: true}
	case beXDPIOGroup:
		return &xdpioRX{group: true}
	case beXDPIOGroupNap:
		return &xdpioRX{group: true, nap: true}
	case beXDPIOCoalesce:
		return &xdpioRX{coalesce: true}
	case beAsavieNap:
		return &asavieRX{nap: true}
	case beAsavie:
		return &asavieRX{}
	case beAsavieDoc:
		return &asavieRX{doc: true}
	case beXDPIOTouch:
		return &xdpioRX{touch: true}
	case beXDPIORule:
		return &xdpioRX{program: func(o *Options) xsk.ProgramConfig {
			return xsk.ProgramConfig{Filter: []xsk.Rule{xsk.UDPPort(o.Port)}}
		}}
	case beXDPIOExpr:
		return &xdpioRX{program: func(o *Options) xsk.ProgramConfig {
			return xsk.ProgramConfig{Expr: fmt.Sprintf("udp dst port %d", o.Port)}
		}}
	case beXDPIOExpr10:
		return &xdpioRX{program: func(o *Options) xsk.ProgramConfig { return xsk.ProgramConfig{Expr: expr10(o.Port)} }}
	case beXDPNet:
		return &xdpnetRX{}
	case beXDPNetQueues:
		return &xdpnetRX{queues: true}
	case beXDPNetNap:
		return &xdpnetRX{nap: true}
	case beXDPNetQueuesNap:
		return &xdpnetRX{queues: true, nap: true}
	case beSocketGRO:
		return &socketGRORx{}
	}
	return &socketRX{}
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// measureRX runs the generator from A into backend be on B.
func measureRX(ctx context.Context, pair *vethpair.Pair, o *Options, gen *trafficgen.Generator, be string) (s Sample, err error) {
	rx := newRX(be, o)
	defer func() { err = errors.Join(err, rx.stop()) }()
	if err := rx.start(pair.B, o); err != nil {
		return s, err
	}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := gen.Run(gctx, 0, o.Warmup+o.Window+5*time.Second)
		done <- err
	}()
	defer func() {
		cancel()
		err = errors.Join(err, <-done)
	}()
	if x, ok := rx.(*xdpioRX); ok && x.busyPoll {
		defer func() { s.NAPIIDs = x.napiIDs() }()
	}
	if !o.Verbose {
		return window(ctx, o, rx.count, gen.Sent, appCPUOf(rx), appSysOf(rx))
	}
	a0, _ := vethStats(ctx, pair.A)
	b0, _ := vethStats(ctx, pair.B)
	x0 := extra(rx)
	t0 := time.Now()
	s, err = window(ctx, o, rx.count, gen.Sent, appCPUOf(rx), appSysOf(rx))
	secs := time.Since(t0).Seconds()
	a1, _ := vethStats(ctx, pair.A)
	b1, _ := vethStats(ctx, pair.B)
	x1 := extra(rx)
	fmt.Fprintf(o.log, "    %s: veth-a: %s\n    veth-b: %s\n    sockets: %s\n", be, diff(a0, a1, secs), diff(b0, b1, secs), diff(x0, x1, secs))
	return s, err
}

// extra returns a backend's own counters, if it has any.
func extra(r receiver) map[string]uint64 {
	if x, ok := r.(interface{ stats() map[string]uint64 }); ok {
		return x.stats()
	}
	return nil
}

// measureTX sends from B with backend be and counts at A.
func measureTX(ctx context.Context, pair *vethpair.Pair, o *Options, be string) (s Sample, err error) {
	var c *trafficgen.Counter
	if err := pair.A.Do(func() (err error) {
		c, err = trafficgen.AttachCounter(pair.A.Ifindex, trafficgen.Drop)
		return err
	}); err != nil {
		return s, err
	}
	defer func() { err = errors.Join(err, c.Close()) }()
	var tx sender
	switch be {
	case beXDPIO:
		tx = &xdpioTX{rx: c}
	case beXDPIORun:
		tx = &xdpioTX{rx: c, run: true}
	case beSocketGSO:
		tx = &socketGSOTx{rx: c}
	case beC:
		tx = &cPeer{bin: o.cBin, inproc: cPeerInProcess, tx: true, rx: c}
	case beCProc:
		tx = &cPeer{bin: o.cBin, tx: true, rx: c}
	default:
		tx = &asavieTX{rx: c}
	}
	defer func() { err = errors.Join(err, tx.stop()) }()
	if err := tx.start(pair.B, o); err != nil {
		return s, err
	}
	return window(ctx, o, tx.count, func() (uint64, error) { return tx.sent(), nil }, appCPUOf(tx), appSysOf(tx))
}

// appSysOf returns the system-time clock of the backend's application
// threads, if it has one.
func appSysOf(b any) func() time.Duration {
	if x, ok := b.(interface{ appSys() time.Duration }); ok {
		return x.appSys
	}
	return nil
}

// appCPUOf returns the backend's application-thread CPU clock, if it has
// loops.
func appCPUOf(b any) func() time.Duration {
	if x, ok := b.(interface{ appCPU() time.Duration }); ok {
		return x.appCPU
	}
	return nil
}

// window waits the warm-up, then reads both counters at the start and
// end of the window.
func window(ctx context.Context, o *Options, got, offered func() (uint64, error), app, sys func() time.Duration) (Sample, error) {
	if err := sleep(ctx, o.Warmup); err != nil {
		return Sample{}, err
	}
	// Offered before received at the start, received before offered at
	// the end: then every frame counted as received was either offered in
	// the window or already on its way when it began (a ring's worth),
	// however long this goroutine is kept from running between the reads.
	g0, err := offered()
	if err != nil {
		return Sample{}, err
	}
	r0, err := got()
	if err != nil {
		return Sample{}, err
	}
	c0 := o.cpu.used()
	var a0, a1, s0, s1 time.Duration
	if app != nil {
		a0 = app()
	}
	if sys != nil {
		s0 = sys()
	}
	t0 := time.Now()
	if err := sleep(ctx, o.Window); err != nil {
		return Sample{}, err
	}
	c1 := o.cpu.used()
	if app != nil {
		a1 = app()
	}
	if sys != nil {
		s1 = sys()
	}
	r1, err := got()
	if err != nil {
		return Sample{}, err
	}
	g1, err := offered()
	if err != nil {
		return Sample{}, err
	}
	dt := time.Since(t0).Seconds()
	s := Sample{PPS: float64(r1-r0) / dt, OfferedPPS: float64(g1-g0) / dt, CPUs: (c1 - c0).Seconds() / dt}
	if s.CPUs > 0 {
		s.PerCPU = s.PPS / s.CPUs
	}
	if app != nil && r1 > r0 {
		s.AppNsPerPkt = float64(a1-a0) / float64(r1-r0)
	}
	if sys != nil && r1 > r0 {
		s.AppSysNsPerPkt = float64(s1-s0) / float64(r1-r0)
	}
	return s, nil
}

// printTable writes the human-readable report.
func printTable(w io.Writer, rep *Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "mode\tsize\tbackend\tMpps (median)\toffered Mpps\tMpps/CPU\tapp ns/pkt\tof it sys\tsamples (Mpps)\t\n")
	for _, r := range rep.Results {
		var ss []string
		for _, s := range r.Samples {
			ss = append(ss, fmt.Sprintf("%.2f", s.PPS/1e6))
		}
		app, sys := "-", "-"
		if r.AppNsPerPkt > 0 {
			app = fmt.Sprintf("%.1f", r.AppNsPerPkt)
			sys = fmt.Sprintf("%.0f%%", 100*r.AppSysNsPerPkt/r.AppNsPerPkt)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.3f\t%.3f\t%.3f\t%s\t%s\t%s\t\n", r.Mode, r.Size, r.Backend, r.PPS/1e6, r.OfferedPPS/1e6, r.PerCPU/1e6, app, sys, strings.Join(ss, " "))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "mode\tsize\tratio\tpps\tpps (paired)\tgoal\tper CPU\tapp CPU/pkt\t\n")
	for _, r := range rep.Ratios {
		goal := "-"
		if r.Met != nil {
			goal = fmt.Sprintf("≥%.1f %s", r.Goal, map[bool]string{true: "met", false: "MISSED"}[*r.Met])
		}
		app := "-"
		if r.AppCost > 0 {
			app = fmt.Sprintf("%.2f", r.AppCost)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.2f\t%.2f\t%s\t%.2f\t%s\t\n", r.Mode, r.Size, r.Name, r.Value, r.Paired, goal, r.PerCPU, app)
	}
	tw.Flush()
	for _, w2 := range rep.Warnings {
		fmt.Fprintf(w, "warning: %s\n", w2)
	}
	for be, why := range rep.Skipped {
		fmt.Fprintf(w, "skipped %s: %s\n", be, why)
	}
	fmt.Fprintf(w, "(%d queues, %d rounds × %.1f s windows after %.1f s warm-up, batch %d; %.0f s in all)\n",
		rep.Queues, rep.Rounds, rep.WindowS, rep.WarmupS, rep.Batch, rep.Elapsed)
}

// expr10 is a 10-clause expression every generated frame (UDP to port,
// from the generator's addresses) passes after evaluating all clauses.
func expr10(port uint16) string {
	return fmt.Sprintf("not arp and not icmp and not tcp port 22 and not port 53 and not ip6 "+
		"and not ether broadcast and len >= 60 and ip[8] != 0 and not src net 203.0.113.0/24 and udp dst port %d", port)
}
