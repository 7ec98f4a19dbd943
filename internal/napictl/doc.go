// Package napictl applies NAPI deferral (defer-hard-irqs and
// gro-flush-timeout) to given NAPI instances of a device and puts the
// original values back, also after a crash.
//
// Apply records the originals in /run/xdpio/<ifname>-<ifindex>.json before
// it sets anything, then sets the NAPIs over netdev netlink (napi-set).
// Holder.Close restores them and removes its entries. If the holding
// process dies before Close (SIGKILL, a panic, a power cut of the process
// but not the machine: /run is a tmpfs), its entries stay; the next Apply
// for that device, or RestoreStale (`xdpio napi reset DEV`), sees that the
// holder is gone — its PID no longer runs with the recorded start time —
// and restores the recorded values first.
//
// Entries carry the network namespace of the device, and only entries of
// the caller's namespace are restored: NAPI IDs are per namespace. A NAPI
// another live process holds is never touched: Apply refuses it.
//
// Layering: xsk (Config.NAPIDeferral) and cmd/xdpio (napi reset) use this
// package, which uses internal/netdev; the public package nic also sits on
// internal/netdev, and neither nic nor xsk imports the other.
package napictl
