//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// cpuMeter measures the CPU time the benchmark consumes: this process
// (generator, receivers and senders, and the kernel work they do, which
// on veth runs mostly in their context) plus the ksoftirqd threads (the
// kernel work deferred out of their context). Dividing packets by it
// gives a rate that does not depend on how much CPU other tenants of a
// shared machine took during the window.
type cpuMeter struct {
	softirqd []string // /proc/PID/stat paths of ksoftirqd threads
	tick     time.Duration
	// pids are child processes under test (the C peer): their threads'
	// CPU time counts too.
	pids []int
}

func newCPUMeter() *cpuMeter {
	m := &cpuMeter{tick: 10 * time.Millisecond} // USER_HZ is 100 on Linux
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(filepath.Join(d, "comm"))
		if err == nil && strings.HasPrefix(string(comm), "ksoftirqd/") {
			m.softirqd = append(m.softirqd, filepath.Join(d, "stat"))
		}
	}
	return m
}

// used returns the CPU time consumed so far.
func (m *cpuMeter) used() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	d := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	for _, pid := range m.pids {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/[0-9]*/schedstat", pid))
		for _, t := range tasks {
			d += schedstat(t)
		}
	}
	for _, p := range m.softirqd {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// Fields after the parenthesised comm: state is field 3, utime
		// and stime are fields 14 and 15.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseUint(f[11], 10, 64)
		st, _ := strconv.ParseUint(f[12], 10, 64)
		d += time.Duration(u+st) * m.tick
	}
	return d
}
