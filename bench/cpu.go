package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/xdpio/xdpio/bench/iperf3"
)

// CoreCPU is one core's use over a test in percent of its time, the
// columns of `mpstat -P ALL` (guest time is inside user, as in
// /proc/stat).
type CoreCPU struct {
	// CPU is the core's number, or "all" for the average over all cores
	// (as mpstat names them).
	CPU     string  `json:"cpu"`
	User    float64 `json:"user"`
	Nice    float64 `json:"nice"`
	System  float64 `json:"system"`
	IOWait  float64 `json:"iowait"`
	IRQ     float64 `json:"irq"`
	SoftIRQ float64 `json:"softirq"`
	Steal   float64 `json:"steal"`
	Idle    float64 `json:"idle"`
}

// Busy is the share of the core that was not idle or waiting for I/O.
func (c CoreCPU) Busy() float64 {
	return c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal
}

// HostCPU is what one end measured of its machine over a test: the CPU
// use of each core (mpstat -P ALL) and the time the threads that moved the
// datagrams ran (the engine's send or receive loops, each locked to its
// thread). It is not part of iperf3's report.
type HostCPU struct {
	Cores []CoreCPU `json:"cores"`
	// BusySeconds is the CPU time all cores spent busy during the test
	// (user, nice, system, irq, softirq, steal): the whole machine's cost
	// of the test when nothing else runs.
	BusySeconds float64 `json:"busy_seconds"`
	// DataThreadSeconds is the CPU time of the threads that sent or
	// received the test's datagrams (user and system, from
	// CLOCK_THREAD_CPUTIME_ID).
	DataThreadSeconds float64 `json:"data_thread_seconds"`
}

// ErrProcStat reports a /proc/stat that could not be read.
var ErrProcStat = errors.New("malformed /proc/stat")

// cpuTicks is one line of /proc/stat: user nice system idle iowait irq
// softirq steal (in clock ticks; guest and guest_nice are inside user and
// nice).
type cpuTicks [8]uint64

// cpuStat is a reading of /proc/stat: the "cpu" total line and one line
// per core, in the order listed, with their core numbers.
type cpuStat struct {
	total cpuTicks
	ids   []int
	cores []cpuTicks
}

// parseProcStat reads the cpu lines of /proc/stat.
func parseProcStat(data []byte) (cpuStat, error) {
	var st cpuStat
	seenTotal := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "cpu") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 9 {
			return cpuStat{}, fmt.Errorf("%w: %q has %d fields, want at least 9", ErrProcStat, line, len(f))
		}
		var t cpuTicks
		for i := range t {
			v, err := strconv.ParseUint(f[1+i], 10, 64)
			if err != nil {
				return cpuStat{}, fmt.Errorf("%w: %q: %v", ErrProcStat, line, err)
			}
			t[i] = v
		}
		if f[0] == "cpu" {
			if seenTotal {
				return cpuStat{}, fmt.Errorf("%w: two total lines", ErrProcStat)
			}
			st.total, seenTotal = t, true
			continue
		}
		id, err := strconv.Atoi(f[0][3:])
		if err != nil || id < 0 {
			return cpuStat{}, fmt.Errorf("%w: bad core name %q", ErrProcStat, f[0])
		}
		st.ids = append(st.ids, id)
		st.cores = append(st.cores, t)
	}
	if err := sc.Err(); err != nil {
		return cpuStat{}, fmt.Errorf("%w: %v", ErrProcStat, err)
	}
	if !seenTotal {
		return cpuStat{}, fmt.Errorf("%w: no cpu line", ErrProcStat)
	}
	return st, nil
}

// usage turns the ticks between two readings into percentages.
func usage(id string, a, b cpuTicks) CoreCPU {
	var d cpuTicks
	var sum uint64
	for i := range d {
		if b[i] > a[i] { // counters can step back by a tick on some kernels
			d[i] = b[i] - a[i]
		}
		sum += d[i]
	}
	c := CoreCPU{CPU: id}
	if sum == 0 {
		c.Idle = 100
		return c
	}
	pct := func(v uint64) float64 { return 100 * float64(v) / float64(sum) }
	c.User, c.Nice, c.System, c.Idle = pct(d[0]), pct(d[1]), pct(d[2]), pct(d[3])
	c.IOWait, c.IRQ, c.SoftIRQ, c.Steal = pct(d[4]), pct(d[5]), pct(d[6]), pct(d[7])
	return c
}

// since returns each core's use (and the average, "all", first) from a to
// b, and the busy CPU time of all cores in seconds given the clock tick.
func (b cpuStat) since(a cpuStat, ticksPerSec float64) ([]CoreCPU, float64) {
	cores := []CoreCPU{usage("all", a.total, b.total)}
	prev := map[int]cpuTicks{}
	for i, id := range a.ids {
		prev[id] = a.cores[i]
	}
	for i, id := range b.ids {
		if p, ok := prev[id]; ok {
			cores = append(cores, usage(strconv.Itoa(id), p, b.cores[i]))
		}
	}
	var busy uint64
	for _, i := range []int{0, 1, 2, 5, 6, 7} {
		if b.total[i] > a.total[i] {
			busy += b.total[i] - a.total[i]
		}
	}
	return cores, float64(busy) / ticksPerSec
}

// cpuMeter measures a test's CPU: the machine's cores, the process, and
// the data threads that report to it.
type cpuMeter struct {
	stat0   cpuStat
	statErr error
	proc0   procTimes
	wall0   time.Time
	threads chan float64 // each data thread's CPU seconds when it ends
}

// procTimes is the process's CPU time in seconds.
type procTimes struct{ user, system float64 }

func startCPUMeter() *cpuMeter {
	m := &cpuMeter{threads: make(chan float64, 1024), wall0: time.Now()}
	m.stat0, m.statErr = readProcStat()
	m.proc0 = readProcTimes()
	return m
}

// thread reports a data thread's CPU time. It never blocks.
func (m *cpuMeter) thread(secs float64) {
	select {
	case m.threads <- secs:
	default:
	}
}

// finish fills res's iperf3 CPU figures (process CPU time over wall time,
// in percent) and returns the host's figures.
func (m *cpuMeter) finish(res *iperf3.Results) *HostCPU {
	wall := time.Since(m.wall0).Seconds()
	p := readProcTimes()
	if wall > 0 {
		res.CPUUtilUser = 100 * (p.user - m.proc0.user) / wall
		res.CPUUtilSystem = 100 * (p.system - m.proc0.system) / wall
		res.CPUUtilTotal = res.CPUUtilUser + res.CPUUtilSystem
	}
	h := &HostCPU{}
	for len(m.threads) > 0 {
		h.DataThreadSeconds += <-m.threads
	}
	if m.statErr == nil {
		if st, err := readProcStat(); err == nil {
			h.Cores, h.BusySeconds = st.since(m.stat0, clockTicks)
		}
	}
	return h
}
