package main

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/xdpio/xdpio/nic"
)

// Errors from ethtool requests read in a user's words: no netlink
// message or attribute names, no errno names, and the error is still
// the one it wraps.
func TestErrorsInUserWords(t *testing.T) {
	for _, tc := range []struct {
		err  *nic.RequestError
		want string
	}{
		{&nic.RequestError{Family: "ethtool", Op: "CHANNELS_GET", Target: "eth9", Message: "no device matches name", Attr: "ETHTOOL_A_CHANNELS_HEADER.ETHTOOL_A_HEADER_DEV_NAME", Err: syscall.ENODEV},
			"eth9: no such network device"},
		{&nic.RequestError{Family: "ethtool", Op: "COALESCE_GET", Target: "eth9", NotSupported: true, Missing: "the driver of eth9 does not implement COALESCE_GET", Err: syscall.EOPNOTSUPP},
			"eth9: interrupt coalescing (ethtool -c/-C) is not supported by the driver"},
		{&nic.RequestError{Family: "ethtool", Op: "RINGS_GET", Target: "eth9", NotSupported: true, Missing: "the driver of eth9 does not implement RINGS_GET", Err: syscall.EOPNOTSUPP},
			"eth9: ring parameters (ethtool -g/-G) are not supported by the driver"},
		{&nic.RequestError{Family: "ethtool", Op: "RSS_GET", Target: "eth9", NotSupported: true, Missing: "the driver of eth9 does not implement RSS_GET", Err: syscall.EOPNOTSUPP},
			"eth9: RSS (ethtool -x/-X) is not supported by the driver"},
		{&nic.RequestError{Family: "ethtool", Op: "PERQUEUE_SCOALESCE", Target: "eth9", NotSupported: true, Missing: "per-queue coalescing (ETHTOOL_PERQUEUE) by the driver of eth9", Err: syscall.EOPNOTSUPP},
			"eth9: per-queue interrupt coalescing (ethtool -Q … --coalesce) is not supported by the driver"},
		{&nic.RequestError{Family: "ethtool", Op: "COALESCE_SET", Target: "eth9", NotSupported: true, Missing: "coalescing parameter ETHTOOL_A_COALESCE_RX_USECS_IRQ"},
			"eth9: setting coalesce is not supported by the driver (coalescing parameter rx-usecs-irq)"},
		{&nic.RequestError{Family: "ethtool", Op: "CHANNELS_SET", Target: "eth9", Message: "requested channel count exceeds maximum", Attr: "ETHTOOL_A_CHANNELS_RX_COUNT", Err: syscall.EINVAL},
			"eth9: setting channels failed: requested channel count exceeds maximum (rx): invalid argument"},
		{&nic.RequestError{Family: "ethtool", Op: "RINGS_SET", Target: "eth9", Err: syscall.EPERM},
			"eth9: setting rings needs root (CAP_NET_ADMIN): permission denied"},
	} {
		err := inUserWords(fmt.Errorf("channels set: %w", tc.err))
		if got := err.Error(); got != "channels set: "+tc.want || strings.Contains(got, "ETHTOOL_") || strings.Contains(got, "_GET") || strings.Contains(got, "_SET") {
			t.Errorf("%v\n got %q\nwant %q", tc.err, got, "channels set: "+tc.want)
		}
		var ee *nic.RequestError
		if !errors.As(err, &ee) || ee != tc.err {
			t.Errorf("%q no longer wraps the ethtool error", err)
		}
	}
	var ue *usageError
	if err := inUserWords(usagef("x")); !errors.As(err, &ue) || err.Error() != "x" {
		t.Errorf("a usage error changed: %v", err)
	}
}

// netdev failures read in words too: the device's name, not its ifindex,
// no attribute or errno names, and still ErrNotSupported where they were.
func TestNetdevErrorsInUserWords(t *testing.T) {
	for _, tc := range []struct {
		err          *nic.RequestError
		want         string
		notSupported bool
	}{
		{&nic.RequestError{Family: "netdev", Op: "qstats-get", Target: "ifindex 5", Attr: "ifindex", NotSupported: true, Missing: "the device's driver does not implement qstats-get", Err: syscall.EOPNOTSUPP},
			"veth0: per-queue statistics (netdev qstats) are not supported by the driver", true},
		{&nic.RequestError{Family: "netdev", Op: "napi-set", Target: "ifindex 5", NotSupported: true, Missing: "the running kernel has no netdev napi-set operation", Err: syscall.EOPNOTSUPP},
			"veth0: NAPI settings (netdev napi-set) are not supported: the running kernel has no netdev napi-set operation", true},
		{&nic.RequestError{Family: "netdev", Op: "napi-set", Target: "napi 8193", Message: "integer out of range", Attr: "defer-hard-irqs", Err: syscall.ERANGE},
			"veth0: NAPI settings (netdev napi-set) failed: integer out of range (defer-hard-irqs): numerical result out of range", false},
		{&nic.RequestError{Family: "netdev", Op: "queue-get", Target: "ifindex 5", Err: syscall.EPERM},
			"veth0: queue information (netdev queue-get) need root (CAP_NET_ADMIN): permission denied", false},
	} {
		err := inUserWords(fmt.Errorf("stats: %w", &nic.Error{Op: "queue stats", Device: "veth0", NotSupported: tc.notSupported, Err: tc.err}))
		got := err.Error()
		if got != "stats: "+tc.want || strings.Contains(got, "ifindex") || strings.Contains(got, "EOPNOTSUPP") || strings.Contains(got, "attribute") {
			t.Errorf("%v\n got %q\nwant %q", tc.err, got, "stats: "+tc.want)
		}
		var ee *nic.RequestError
		if !errors.As(err, &ee) || ee != tc.err || errors.Is(err, nic.ErrNotSupported) != tc.notSupported {
			t.Errorf("%q no longer wraps the netdev error as it did", err)
		}
	}
	// Between the nic.Error and the request, the context stays.
	inner := &nic.RequestError{Family: "netdev", Op: "queue-get", Target: "ifindex 5", Err: syscall.EINVAL}
	err := inUserWords(&nic.Error{Op: "get NAPIs", Device: "veth0", Err: fmt.Errorf("no RX queue 5: %w", inner)})
	if want := "nic veth0: get NAPIs: no RX queue 5: queue information (netdev queue-get) failed: invalid argument"; err.Error() != want {
		t.Errorf("got %q, want %q", err, want)
	}
	// A netdev error without the nic.Error naming the device stays as it is.
	raw := &nic.RequestError{Family: "netdev", Op: "dev-get", Target: "ifindex 5", Err: syscall.EINVAL}
	if err := inUserWords(raw); err != raw {
		t.Errorf("bare netdev error rewritten: %v", err)
	}
}

// A device the namespace lacks: what to look at, in the namespace the
// command ran in.
func TestNoDeviceWords(t *testing.T) {
	cause := &nic.Error{Op: "open", Device: "eth9", Err: fmt.Errorf("lookup: %w", nic.ErrNoDevice)}
	for _, tc := range []struct{ netns, want string }{
		{"", `no network interface "eth9" in this network namespace (see ip link; --netns NS runs the command in another)`},
		{"lab", `no network interface "eth9" in network namespace "lab" (see ip -n lab link)`},
	} {
		err := noDeviceWords(fmt.Errorf("channels show: %w", cause), tc.netns)
		if err.Error() != tc.want || !errors.Is(err, nic.ErrNoDevice) || exitStatus(err) != 1 {
			t.Errorf("netns %q: %q (status %d), want %q", tc.netns, err, exitStatus(err), tc.want)
		}
	}
	other := &nic.Error{Op: "open", Device: "eth9", Err: syscall.EMFILE}
	if err := noDeviceWords(other, ""); err != other {
		t.Errorf("another open error rewritten: %v", err)
	}
}
