package main

import (
	"github.com/spf13/cobra"
)

// pcapSubcommands lists the constructors of the `xdpio pcap` subcommands.
// Files that add one (pcap_verify.go, pcap_checksum.go, pcap_segment.go, …)
// append to it from an init function, so the subcommands can be developed
// side by side without editing this file.
var pcapSubcommands []func(g *globals) *cobra.Command

func init() {
	subcommands = append(subcommands, newPcapCmd)
}

// newPcapCmd builds `xdpio pcap`, the parent of the capture-processing
// subcommands (segment, verify, checksum).
func newPcapCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "pcap",
		Short: "Run the software offloads over a capture file (pcap or pcapng): segment, verify, checksum",
		Args:  cobra.NoArgs,
	}
	for _, mk := range pcapSubcommands {
		c.AddCommand(mk(g))
	}
	return c
}
