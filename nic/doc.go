// Package nic describes a network device the way AF_XDP needs to know it
// and tunes it: which queues it has and which NAPI instance, IRQ and
// AF_XDP socket serve each (Queues), the kernel's software interrupt
// coalescing per NAPI instance — defer-hard-irqs, gro-flush-timeout,
// irq-suspend-timeout — read and set per NAPI, per queue or for the whole
// device (NAPIs, SetNAPI), per-queue counters with the difference between
// two snapshots (QueueStats, Delta), and what the device offers to XDP and
// AF_XDP (XDPFeatures).
//
// Open returns a long-lived *Device bound to the network namespace of the
// calling thread; it is safe for concurrent use. Everything goes through
// the kernel's netdev generic-netlink family. On kernels whose netdev
// family has no napi-set (before Linux 6.13), SetNAPI on the whole device
// falls back to the device-wide sysfs files napi_defer_hard_irqs and
// gro_flush_timeout, and NAPIChange.Fallback says so; a narrower selection
// is then ErrNotSupported, since sysfs cannot address one NAPI.
//
// Errors that mean the kernel or the driver lacks something match
// ErrNotSupported and name what is missing; errors from the kernel carry
// its extended-ack text.
package nic
