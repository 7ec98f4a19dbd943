// Package rss models a NIC's receive-side scaling (RSS) in software. The
// device side — channels, rings, features, the RSS table, key, hash
// function and hashed fields — is package nic's (Device.Channels,
// Device.RSS, Device.SetRSS, …); nic.RSS.Predictor turns what a device
// reports into this package's Predictor.
//
// A NIC hashes each received packet's addresses (and, for TCP and UDP,
// ports) with the Toeplitz function under a secret key, and picks the RX
// queue from an indirection table indexed by the hash's low bits. This
// package computes the same thing:
//
//   - Toeplitz is the hash for any key length (DefaultKey is Microsoft's
//     40-byte verification key; Linux drivers mostly pick a random key at
//     boot, which nic.Device.RSS reads), table driven: one load and XOR
//     per input byte, verified against Microsoft's RSS verification
//     suite. FlowKey is its
//     input; Symmetric selects the kernel's symmetric-xor and
//     symmetric-or-xor input transformations, and SymmetricKey builds a
//     key that makes the plain hash symmetric. HashFrame hashes an
//     Ethernet frame in place.
//   - Equal and Weights build indirection tables, as `ethtool -X DEV
//     equal N` and `weight W0 W1 …` do, for a device (nic.RSSConfig) or
//     a Dispatcher.
//   - Predictor tells the RX queue of a flow from a key, an indirection
//     table and the device's IndexRule (nic.RSS.Predictor takes them from
//     a device). Its inverse, PlacePorts and Spread, finds the source (or
//     destination) ports that put flows on chosen queues, so that a client
//     opening P connections can land them on P distinct queues of the
//     server. Placement uses the hash's linearity over GF(2) instead of
//     hashing every candidate.
//   - Dispatcher spreads frames from one source (an AF_XDP socket of a
//     device without RSS, or with fewer queues than cores) over worker
//     goroutines by flow hash, keeping each flow in order, with bounded
//     queues, backpressure or counted drops, an optional weighted table,
//     and statistics that account for every frame. ParseFlowKey is its
//     frame parser.
//
// Nothing here needs privileges or a device.
package rss
