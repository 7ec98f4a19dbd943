// Package netdev is a client for the kernel's "netdev" generic-netlink
// family (Documentation/netlink/specs/netdev.yaml): what a device offers to
// XDP and AF_XDP (dev-get), its queues with their NAPI instance and bound
// AF_XDP socket (queue-get), the NAPI instances with their IRQ, thread and
// software interrupt-coalescing settings (napi-get, napi-set), and
// per-queue statistics (qstats-get).
//
// A Client is built on internal/genl's Conn, as internal/ethtool's is: one
// generic netlink socket in the network namespace of the thread that
// called Dial, one request at a time, safe for concurrent use; its errors
// are genl.Error values, as ethtool's are. Whether the running kernel has an
// operation or a request attribute is decided in one place, Client.check,
// from the family's operation list (CTRL_CMD_GETFAMILY) and its policy dump
// (CTRL_CMD_GETPOLICY), never from the kernel version; errors then match
// ErrNotSupported and name what is missing. Errors from the kernel carry its
// extended-ack text.
//
// The decoders take bytes from the kernel and are fuzzed with committed
// seed corpora (testdata/fuzz). Attributes this package does not know are
// kept, not dropped: Dev.Unknown, NAPI.Unknown and QStats.Unknown.
package netdev
