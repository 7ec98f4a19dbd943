// Package offload does in software what NICs offload in hardware, on plain
// Ethernet frames held in []byte: the Internet checksum and pseudo-header
// sums, RX checksum verdicts from one CHECKSUM_COMPLETE-style sum, TX
// checksum fill, TCP segmentation (TSO), UDP segmentation and receive
// coalescing (GRO).
//
// It knows nothing of sockets and needs no privilege, so it serves any packet
// source: AF_XDP frames from package xsk, a pcap file, a test.
package offload
