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
			"eth9: reading coalesce is not supported by the driver"},
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
