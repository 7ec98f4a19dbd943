//go:build !linux

package bench

import "net"

// controlMSS reads no MSS outside Linux: the client then uses DefaultBlksize.
func controlMSS(net.Conn) int { return 0 }
