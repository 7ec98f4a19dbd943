package bench

import "golang.org/x/sys/unix"

// systemInfo is this machine as iperf3 describes it in its report's
// system_info: uname's system, node, release, version and machine.
func systemInfo() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "Linux"
	}
	return unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Nodename[:]) + " " +
		unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Version[:]) + " " +
		unix.ByteSliceToString(u.Machine[:])
}
