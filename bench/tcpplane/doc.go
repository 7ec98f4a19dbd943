// Package tcpplane is the data plane of xdpio bench's TCP mode: a one-way
// TCP stream per test stream, framed by xdpio itself and carried over
// AF_XDP at both ends (no kernel TCP, no congestion control, no ACKs).
//
// A Sender (OpenSender) opens one AF_XDP socket per queue it uses, with no
// XDP program, and sends each flow's writes as TCP segments built by
// package offload's frame builder from a per-flow template: with software
// TSO each write is one super-packet cut by offload.SegmentPayload,
// without it every segment is built on its own. It finds the next hop's
// MAC the way the kernel would (package internal/nexthop) and can take
// its source ports from a plane.Placer.
//
// A Receiver (OpenReceiver) holds the data port in the kernel and takes
// TCP to it on every RX queue with an XDP filter (the control connection
// stays with the kernel), checks each frame's checksums with
// offload.VerifyRX, parses it and accounts it to its flow: in order,
// ahead of a gap, late, or with a bad checksum.
//
// Both count each flow into a Counter, the engine's stream, as they go,
// and return the whole test's figures (iperf3.TCPSenderStats,
// iperf3.TCPReceiverStats) when stopped. The control protocol and the
// report are package bench's.
//
// TCP mode runs over the AF_XDP data plane (xskplane.DataPlane) only, or a
// data plane that implements Plane (tests' fakes): with any other, and on
// systems other than Linux, the Open functions fail with an error matching
// errors.ErrUnsupported.
package tcpplane
