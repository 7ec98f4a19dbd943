// Package nic controls a network device as a whole: everything `ethtool`
// and the kernel's netdev family tune, on one long-lived client.
//
// Open returns a *Device bound to the network namespace of the calling
// thread, holding one ethtool and one netdev generic-netlink socket; it is
// safe for concurrent use (requests are serialised, each answered before
// the next is sent), and after Close its methods fail with ErrClosed.
//
// # Ethtool
//
// Channels and SetChannels read and set the RX/TX/other/combined channel
// counts (`ethtool -l/-L`; RXQueues is the RX queue count AF_XDP binds
// to); Rings and SetRings the ring sizes and ring options (`ethtool
// -g/-G`); Features and SetFeatures the offload features, by kernel name
// or by ethtool's offload groups (`ethtool -k/-K`, Offloads); RSS,
// RSSContext, RSSContexts and SetRSS the RSS indirection table, hash key,
// hash function, input transformation and per-flow-type hash fields
// (`ethtool -x/-X`, `-N rx-flow-hash`), CreateRSSContext and
// DeleteRSSContext additional RSS contexts; Coalesce and SetCoalesce the
// hardware interrupt coalescing (`ethtool -c/-C`), QueueCoalesce and
// SetQueueCoalesce per queue (`ethtool -Q … --coalesce`, the
// ETHTOOL_PERQUEUE ioctl, which has no netlink message). Setters send only
// what their argument sets; the kernel keeps everything else. RSS's
// Predictor models the device's RSS in software (package rss).
//
// # Netdev
//
// Queues says which NAPI instance, IRQ and AF_XDP socket serve each queue;
// NAPIs and SetNAPI read and set the kernel's software interrupt
// coalescing per NAPI instance — defer-hard-irqs, gro-flush-timeout,
// irq-suspend-timeout — per NAPI, per queue or for the whole device;
// QueueStats snapshots the per-queue counters (Snapshot.Delta turns two
// into rates), and Stats falls back, for drivers without them, to the
// driver's per-queue `ethtool -S` counters (veth) or the device's totals
// (lo), saying which in Snapshot.Source; XDPFeatures says what the device offers to XDP and AF_XDP.
// On kernels whose netdev family has no napi-set (before Linux 6.13),
// SetNAPI on the whole device falls back to the device-wide sysfs files
// napi_defer_hard_irqs and gro_flush_timeout, and NAPIChange.Fallback says
// so; a narrower selection is then ErrNotSupported, since sysfs cannot
// address one NAPI. A kernel without the netdev family (before 6.3) still
// opens a Device: its netdev methods return ErrNotSupported.
//
// # Errors
//
// Errors that mean the kernel or the driver lacks something match
// ErrNotSupported and name what is missing; the kernel's errno stays
// reachable with errors.Is (unix.EOPNOTSUPP, unix.EINVAL, …). A request
// the kernel refused is a *RequestError carrying its extended-ack text and
// the attribute it blamed; other failures of a Device's own operations are
// an *Error naming the operation and the device. Open of a name the
// calling thread's network namespace has no interface by (none at all, or
// it is in another namespace) matches ErrNoDevice.
package nic
