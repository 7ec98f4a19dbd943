// Package rss tunes a NIC's receive-side scaling (RSS) and models it in
// software.
//
// # Device side
//
// Channels and SetChannels read and set the number of RX/TX queues
// (`ethtool -l/-L`), Rings and SetRings their sizes (`ethtool -g/-G`),
// Table and SetTable the indirection table, hash key, hash function and
// input transformation (`ethtool -x/-X`; Equal and Weights build tables),
// Features and SetFeatures the offload features (`ethtool -k/-K`). They
// talk ethtool netlink and report what a driver lacks as ErrNotSupported.
//
// # Software side
//
// A NIC hashes each received packet's addresses (and, for TCP and UDP,
// ports) with the Toeplitz function under a secret key, and picks the RX
// queue from an indirection table indexed by the hash's low bits. This
// package computes the same thing:
//
//   - Toeplitz is the hash for any key length (DefaultKey is Microsoft's
//     40-byte verification key; Linux drivers mostly pick a random key at
//     boot, which Table reads), table driven: one load and XOR per input byte,
//     verified against Microsoft's RSS verification suite. FlowKey is its
//     input; Symmetric selects the kernel's symmetric-xor and
//     symmetric-or-xor input transformations, and SymmetricKey builds a
//     key that makes the plain hash symmetric. HashFrame hashes an
//     Ethernet frame in place.
//   - Predictor tells the RX queue of a flow from a key, an indirection
//     table and the device's IndexRule (PredictorFor takes them from
//     Table). Its inverse, PlacePorts and Spread, finds the source (or
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
// The software side needs no privileges and no device.
package rss
