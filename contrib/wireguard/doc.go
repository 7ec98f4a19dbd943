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
// # Performance
//
// BenchmarkTunnelTUN runs iperf3's TCP through wireguard-go on kernel
// TUNs in two namespaces over a veth pair, against wireguard-go's own
// StdNetBind (UDP GSO and GRO):
//
//	go test -run NONE -bench TunnelTUN -benchtime 1x ./contrib/wireguard
//
// Where every frame is handled, as on a NIC without UDP segmentation
// offload (the veths' tx-udp-segmentation off), the AF_XDP bind carries
// about 1.3 times the throughput at 0.6 times the CPU per byte. On veth as
// it is, StdNetBind's GSO packets cross to the other end whole, up to 44
// packets as one, a shortcut no NIC has: there it carries more than twice
// the AF_XDP bind's throughput. On netstack TUNs (BenchmarkTunnel)
// wireguard-go hands the bind one packet at a time, and both binds are
// bound by the per-packet cost of the netstack.
//
// It is a separate Go module, so that xdpio's own module does not pull in
// wireguard-go and gVisor.
package wireguard
