package netnstest

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// KernelVersion returns the running kernel's release, as uname -r shows
// it, cut to its numbers ("6.18.44").
func KernelVersion() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", fmt.Errorf("uname: %w", err)
	}
	r := unix.ByteSliceToString(u.Release[:])
	if i := strings.IndexFunc(r, func(c rune) bool { return c != '.' && (c < '0' || c > '9') }); i >= 0 {
		r = r[:i]
	}
	return strings.TrimSuffix(r, "."), nil
}
