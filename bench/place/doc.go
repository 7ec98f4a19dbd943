// Package place gives each stream a benchmark client dials a source port
// that the server NIC's RSS hash sends to a chosen RX queue: round robin
// over the queues of its indirection table, predicted in software with
// package rss. The data planes take it as a plane.Placer.
package place
