// Package wireguard runs wireguard-go over AF_XDP: Bind is a conn.Bind on
// package xdpnet, so a WireGuard device's UDP datagrams skip the kernel's
// network stack on the interface it is given.
//
//	bind := wireguard.NewBind("eth0", wireguard.Options{})
//	dev := device.NewDevice(tunDevice, bind, logger)
//
// Bind.Open listens on every RX queue of the interface (one xdpnet conn,
// dual-stack unless Options.Addr says otherwise) and returns one
// ReceiveFunc per RX queue, plus one for the conn's kernel socket:
// wireguard-go runs a goroutine per ReceiveFunc, so each queue is read by
// a goroutine of its own, without locks. Send writes a batch through the
// queue the peer's flow hashes to. Endpoints are cached per address, so
// that receiving allocates nothing.
//
// It is a separate Go module, so that xdpio's own module does not pull in
// wireguard-go and gVisor.
package wireguard
