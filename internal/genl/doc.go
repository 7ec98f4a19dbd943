// Package genl holds what xdpio's generic netlink clients (internal/ethtool
// for the ethtool family, internal/netdev for the netdev family) share on
// top of mdlayher/genetlink: a Conn bound to one family (looked up
// together with the operations the kernel offers, CTRL_ATTR_OPS, so that a
// missing operation is reported before it is sent; extended acks and
// strict checking asked for; one request at a time, each answered before
// the next is sent), the one Error type of their requests with
// KernelError, the one place where a kernel errno becomes ErrNotSupported,
// and decoding replies only after checking that they are whole
// attributes. Package genlfuzz is the fuzz scaffolding of their decoders.
package genl
