// Package ethtool is a client for the kernel's ethtool generic-netlink
// family: the control plane xdpio uses to read and tune a NIC's channels,
// ring sizes, interrupt coalescing, offload features and RSS table.
//
// A Client is built on internal/genl's Conn and bound to the network
// namespace of the thread that called Dial; it is safe for concurrent use.
// Every request names its device by index, by name, or both (Device).
// Errors are *Error (genl.Error) values that carry the ethtool message, the
// device, the kernel's extended-ack text and the request attribute the
// kernel blamed;
// errors.Is(err, ErrNotSupported) reports a message, attribute or device
// operation the running kernel or driver does not offer, and the kernel's
// errno stays reachable with errors.Is (unix.EOPNOTSUPP, unix.EINVAL, …).
//
// Setters send only the attributes the caller set (pointer fields), so the
// kernel keeps every other parameter as it is. A Monitor receives the
// notifications the kernel multicasts when any process changes channels,
// rings, coalescing, features or RSS.
//
// The package is Linux-only; on other systems Dial returns ErrNotSupported.
package ethtool
