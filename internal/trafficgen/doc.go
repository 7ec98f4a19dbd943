// Package trafficgen is a fast UDP packet generator for the project's
// benchmarks, built on the kernel's XDP "live frames" test-run mode
// (BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES), the method of
// xdp-trafficgen.
//
// A tiny XDP program, written with cilium/ebpf's asm package, is run by the
// kernel in a loop over page-pool frames initialised from one template
// frame. It stamps a pseudo-random source port (one of Flows) on each frame
// without breaking the UDP checksum, counts the frame in a per-CPU map and
// returns XDP_TX, which sends it out of the interface named in the context
// (the sender's veth), so it arrives on the peer as if a NIC had received
// it. One worker per CPU runs on a locked OS thread pinned to its CPU: on
// veth the receiving queue of such a frame is the sending CPU, so the
// workers spread the frames over the receiver's queues.
//
// The per-CPU counter is exact, so a run stops after exactly the requested
// number of packets (the program drops, instead of sending, once a CPU's
// share is used up) or after its duration, whichever comes first.
//
// BuildFrame keeps a frame builder of its own, written byte by byte apart
// from offload.Headers (the module's one builder, which xdpnet and the
// examples use) on purpose: the generator's frames are the traffic the
// module's parsers and receivers are tested against, so they must not
// share a bug with the code under test; it is a test oracle, and its
// tests check it against gopacket.
//
// Counter is the other half: an XDP program that counts and drops (or
// passes) every frame on an interface, to measure what arrived.
//
//	var g *trafficgen.Generator
//	err := pair.A.Do(func() (err error) {
//		g, err = trafficgen.New(trafficgen.Config{Ifindex: pair.A.Ifindex, ...})
//		return err
//	})
//	res, err := g.Run(ctx, 1_000_000, 2*time.Second)
package trafficgen
