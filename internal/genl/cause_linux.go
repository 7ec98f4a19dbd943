//go:build linux

package genl

import "golang.org/x/sys/unix"

// ENOTSUPP is the kernel-internal "not supported" (524), which some
// drivers leak to user space; it means the same as EOPNOTSUPP.
const ENOTSUPP = unix.Errno(524)

// causeText spells a kernel errno by its name (EINVAL, EOPNOTSUPP, …),
// which says exactly what the kernel answered; other causes as they are.
func causeText(err error) string {
	if en, ok := err.(unix.Errno); ok {
		if en == unix.EOPNOTSUPP {
			return "EOPNOTSUPP" // ErrnoName says ENOTSUP, the same number
		}
		if n := unix.ErrnoName(en); n != "" {
			return n
		}
		if en == ENOTSUPP {
			return "ENOTSUPP"
		}
	}
	return err.Error()
}
