// Package genl holds what xdpio's generic netlink clients (internal/ethtool
// for the ethtool family, internal/netdev for the netdev family) share on
// top of mdlayher/genetlink: looking a family up together with the
// operations the kernel offers (CTRL_ATTR_OPS, so that a missing operation
// is reported before it is sent), and decoding replies only after checking
// that they are whole attributes.
package genl
