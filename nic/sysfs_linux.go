//go:build linux

package nic

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// sysfsRoot is /sys/class/net; tests do not change it.
const sysfsRoot = "/sys/class/net"

// netnsIno returns the inode of a namespace link such as
// /proc/thread-self/ns/net.
func netnsIno(link string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(link, &st); err != nil {
		return 0, fmt.Errorf("sysfs: %w", err)
	}
	return st.Ino, nil
}

// sysfsDir returns the sysfs directory of the device after checking that
// sysfs can show it: sysfs shows the namespace it was mounted in, taken
// here to be the process's (ip netns exec mounts one for the namespace it
// enters). A device opened by a thread that entered another namespace with
// setns (as --netns does) is not there, or a device of the same name in
// another namespace is.
func sysfsDir(name string, index int, devNS uint64) (string, error) {
	proc, err := netnsIno("/proc/self/ns/net")
	if err != nil {
		return "", err
	}
	if proc != devNS {
		return "", fmt.Errorf("sysfs shows the process's network namespace, not the device's: run the program inside the namespace (ip netns exec)")
	}
	dir := filepath.Join(sysfsRoot, name)
	b, err := os.ReadFile(filepath.Join(dir, "ifindex"))
	if err != nil {
		return "", fmt.Errorf("sysfs: %w", err)
	}
	if got, _ := strconv.Atoi(strings.TrimSpace(string(b))); got != index {
		return "", fmt.Errorf("sysfs: %s has ifindex %d, want %d: sysfs shows another namespace", dir, got, index)
	}
	return dir, nil
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// readSysfs reads the device-wide napi_defer_hard_irqs and
// gro_flush_timeout.
func readSysfs(name string, index int, devNS uint64) (NAPISettings, error) {
	dir, err := sysfsDir(name, index, devNS)
	if err != nil {
		return NAPISettings{}, err
	}
	var s NAPISettings
	v, err := readUint(filepath.Join(dir, "napi_defer_hard_irqs"))
	if err != nil {
		return s, err
	}
	d := uint32(v)
	s.DeferHardIRQs = &d
	v, err = readUint(filepath.Join(dir, "gro_flush_timeout"))
	if err != nil {
		return s, err
	}
	g := time.Duration(v)
	s.GROFlushTimeout = &g
	return s, nil
}

// writeSysfs writes the device-wide files and returns the directory.
func writeSysfs(name string, index int, devNS uint64, s NAPISettings) (string, error) {
	dir, err := sysfsDir(name, index, devNS)
	if err != nil {
		return "", err
	}
	write := func(file string, v uint64) error {
		p := filepath.Join(dir, file)
		if err := os.WriteFile(p, []byte(strconv.FormatUint(v, 10)), 0); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
		return nil
	}
	if s.DeferHardIRQs != nil {
		if err := write("napi_defer_hard_irqs", uint64(*s.DeferHardIRQs)); err != nil {
			return dir, err
		}
	}
	if s.GROFlushTimeout != nil {
		if *s.GROFlushTimeout < 0 {
			return dir, fmt.Errorf("invalid gro-flush-timeout %v: must not be negative", *s.GROFlushTimeout)
		}
		if err := write("gro_flush_timeout", uint64(*s.GROFlushTimeout)); err != nil {
			return dir, err
		}
	}
	return dir + "/{napi_defer_hard_irqs,gro_flush_timeout}", nil
}
