package cpustat

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Core is one core's use over an interval in percent of its time, the
// columns of `mpstat -P ALL` (guest time is inside user, as in
// /proc/stat).
type Core struct {
	// CPU is the core's number, or "all" for the average over all cores
	// (as mpstat names them).
	CPU     string
	User    float64
	Nice    float64
	System  float64
	IOWait  float64
	IRQ     float64
	SoftIRQ float64
	Steal   float64
	Idle    float64
}

// Busy is the share of the core that was not idle or waiting for I/O.
func (c Core) Busy() float64 {
	return c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal
}

// ErrProcStat reports a /proc/stat that could not be read.
var ErrProcStat = errors.New("malformed /proc/stat")

// ticks is one line of /proc/stat: user nice system idle iowait irq
// softirq steal (in clock ticks; guest and guest_nice are inside user and
// nice).
type ticks [8]uint64

// Stat is a reading of /proc/stat: the "cpu" total line and one line
// per core, in the order listed, with their core numbers.
type Stat struct {
	total ticks
	ids   []int
	cores []ticks
}

// Parse reads the cpu lines of /proc/stat.
func Parse(data []byte) (Stat, error) {
	var st Stat
	seenTotal := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "cpu") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 9 {
			return Stat{}, fmt.Errorf("%w: %q has %d fields, want at least 9", ErrProcStat, line, len(f))
		}
		var t ticks
		for i := range t {
			v, err := strconv.ParseUint(f[1+i], 10, 64)
			if err != nil {
				return Stat{}, fmt.Errorf("%w: %q: %v", ErrProcStat, line, err)
			}
			t[i] = v
		}
		if f[0] == "cpu" {
			if seenTotal {
				return Stat{}, fmt.Errorf("%w: two total lines", ErrProcStat)
			}
			st.total, seenTotal = t, true
			continue
		}
		id, err := strconv.Atoi(f[0][3:])
		if err != nil || id < 0 {
			return Stat{}, fmt.Errorf("%w: bad core name %q", ErrProcStat, f[0])
		}
		st.ids = append(st.ids, id)
		st.cores = append(st.cores, t)
	}
	if err := sc.Err(); err != nil {
		return Stat{}, fmt.Errorf("%w: %v", ErrProcStat, err)
	}
	if !seenTotal {
		return Stat{}, fmt.Errorf("%w: no cpu line", ErrProcStat)
	}
	return st, nil
}

// usage turns the ticks between two readings into percentages.
func usage(id string, a, b ticks) Core {
	var d ticks
	var sum uint64
	for i := range d {
		if b[i] > a[i] { // counters can step back by a tick on some kernels
			d[i] = b[i] - a[i]
		}
		sum += d[i]
	}
	c := Core{CPU: id}
	if sum == 0 {
		c.Idle = 100
		return c
	}
	pct := func(v uint64) float64 { return 100 * float64(v) / float64(sum) }
	c.User, c.Nice, c.System, c.Idle = pct(d[0]), pct(d[1]), pct(d[2]), pct(d[3])
	c.IOWait, c.IRQ, c.SoftIRQ, c.Steal = pct(d[4]), pct(d[5]), pct(d[6]), pct(d[7])
	return c
}

// Since returns each core's use (and the average, "all", first) from a to
// b, and the busy CPU time of all cores in seconds given the clock tick.
func (b Stat) Since(a Stat, ticksPerSec float64) ([]Core, float64) {
	cores := []Core{usage("all", a.total, b.total)}
	prev := map[int]ticks{}
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

// Usage is what a Meter measured.
type Usage struct {
	// User, System and Total are the process's CPU time over wall time,
	// in percent (iperf3's cpu_util_user, _system and _total).
	User, System, Total float64
	// Cores is each core's use, the average over all ("all") first; none
	// when /proc/stat could not be read.
	Cores []Core
	// BusySeconds is the CPU time all cores spent busy (user, nice,
	// system, irq, softirq, steal).
	BusySeconds float64
	// ThreadSeconds is the sum of the CPU times reported with Thread.
	ThreadSeconds float64
}

// Meter measures an interval's CPU: the machine's cores, the process,
// and the threads that report to it.
type Meter struct {
	stat0   Stat
	statErr error
	proc0   procTimes
	wall0   time.Time
	threads chan float64 // each data thread's CPU seconds when it ends
}

// procTimes is the process's CPU time in seconds.
type procTimes struct{ user, system float64 }

// Start begins an interval.
func Start() *Meter {
	m := &Meter{threads: make(chan float64, 1024), wall0: time.Now()}
	m.stat0, m.statErr = readStat()
	m.proc0 = readProcTimes()
	return m
}

// Thread reports a thread's CPU time (from ThreadClock). It never blocks;
// it is safe for concurrent use.
func (m *Meter) Thread(secs float64) {
	select {
	case m.threads <- secs:
	default:
	}
}

// Finish ends the interval and returns its figures. Call it once.
func (m *Meter) Finish() Usage {
	var u Usage
	wall := time.Since(m.wall0).Seconds()
	p := readProcTimes()
	if wall > 0 {
		u.User = 100 * (p.user - m.proc0.user) / wall
		u.System = 100 * (p.system - m.proc0.system) / wall
		u.Total = u.User + u.System
	}
	for len(m.threads) > 0 {
		u.ThreadSeconds += <-m.threads
	}
	if m.statErr == nil {
		if st, err := readStat(); err == nil {
			u.Cores, u.BusySeconds = st.Since(m.stat0, clockTicks)
		}
	}
	return u
}
