package napictl

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultDir is where records live unless Request.Dir says otherwise.
const DefaultDir = "/run/xdpio"

// Settings are the deferral values Apply sets.
type Settings struct {
	// DeferHardIRQs is how many consecutive empty polls keep hardware
	// IRQs masked.
	DeferHardIRQs uint32
	// GROFlushTimeout is the timer that polls while IRQs are deferred.
	GROFlushTimeout time.Duration
	// IRQSuspendTimeout, when positive, is also set: how long IRQs stay
	// suspended while a busy-polling application keeps finding packets
	// (Linux 6.13). 0 leaves the NAPI's value alone.
	IRQSuspendTimeout time.Duration
}

// Request says what Apply changes.
type Request struct {
	// Ifname and Ifindex name the device (the record's file name).
	Ifname  string
	Ifindex int
	// NAPIs are the NAPI instances to change, all of the device.
	NAPIs []uint32
	// Settings are the values to set.
	Settings Settings
	// Dir holds the records; default DefaultDir.
	Dir string
}

// Entry is one NAPI's original values in a record, with its holder.
type Entry struct {
	NAPI uint32 `json:"napi"`
	// PID and Start (the process's start time in clock ticks after boot,
	// /proc/PID/stat field 22) identify the holder across PID reuse.
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
	// NetNS is the inode of the device's network namespace.
	NetNS uint64 `json:"netns"`
	// DeferHardIRQs and GROFlushTimeoutNS are the originals.
	DeferHardIRQs     uint32 `json:"defer_hard_irqs"`
	GROFlushTimeoutNS int64  `json:"gro_flush_timeout_ns"`
	// IRQSuspendTimeoutNS is the original irq-suspend-timeout, recorded
	// only when the holder set one.
	IRQSuspendTimeoutNS *int64 `json:"irq_suspend_timeout_ns,omitempty"`
	// Applied are the values the holder set (for reports).
	AppliedDeferHardIRQs     uint32 `json:"applied_defer_hard_irqs"`
	AppliedGROFlushTimeoutNS int64  `json:"applied_gro_flush_timeout_ns"`
	AppliedIRQSuspendNS      int64  `json:"applied_irq_suspend_timeout_ns,omitempty"`
}

// Record is the content of /run/xdpio/<ifname>-<ifindex>.json.
type Record struct {
	Ifname  string  `json:"ifname"`
	Ifindex int     `json:"ifindex"`
	Entries []Entry `json:"entries"`
}

// Path returns the record file of a device.
func Path(dir, ifname string, ifindex int) string {
	if dir == "" {
		dir = DefaultDir
	}
	return filepath.Join(dir, ifname+"-"+strconv.Itoa(ifindex)+".json")
}

// readRecord reads a record; a missing file is an empty record.
func readRecord(path string) (Record, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Record{}, nil
	}
	if err != nil {
		return Record{}, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("napictl: %s: %w", path, err)
	}
	return r, nil
}

// writeRecord replaces the record atomically (temporary file, fsync,
// rename), or removes the file when the record has no entries.
func writeRecord(path string, r Record) error {
	if len(r.Entries) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".record-")
	if err != nil {
		return err
	}
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("napictl: write %s: %w", path, err)
	}
	return nil
}

// procStart returns the start time of process pid (clock ticks after
// boot), or an error when it does not run.
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStat(string(b))
}

// parseStat returns the start time (field 22) of a /proc/PID/stat line,
// or an error for a zombie or a malformed line.
func parseStat(s string) (uint64, error) {
	// The command name (field 2) is in parentheses and may hold spaces
	// and parentheses: the last ')' ends it.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat: no command name")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return 0, fmt.Errorf("stat: %d fields", len(f)+2)
	}
	if f[0] == "Z" || f[0] == "X" {
		return 0, fmt.Errorf("stat: the process is a zombie")
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// alive reports whether the holder of e still runs.
func alive(e Entry) bool {
	st, err := procStart(e.PID)
	return err == nil && st == e.Start
}
