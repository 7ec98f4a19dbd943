package wireguard

import "net/netip"

// Endpoint is a peer's address. The source is whatever the conn's address
// and the kernel's route give, so it keeps none.
type Endpoint struct {
	netip.AddrPort
}

// ClearSrc does nothing: the source comes from the route.
func (e *Endpoint) ClearSrc() {}

// SrcToString returns "".
func (e *Endpoint) SrcToString() string { return "" }

// DstToString returns the peer's address as "ip:port".
func (e *Endpoint) DstToString() string { return e.AddrPort.String() }

// DstToBytes returns the peer's address and port, for WireGuard's cookie
// MACs (as wireguard-go's StdNetEndpoint does).
func (e *Endpoint) DstToBytes() []byte {
	b, _ := e.AddrPort.MarshalBinary()
	return b
}

// DstIP returns the peer's IP address.
func (e *Endpoint) DstIP() netip.Addr { return e.AddrPort.Addr() }

// SrcIP returns the zero address.
func (e *Endpoint) SrcIP() netip.Addr { return netip.Addr{} }
