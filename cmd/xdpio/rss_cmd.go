package main

import (
	"github.com/spf13/cobra"
)

// rssSubcommands lists the constructors of the `xdpio rss` subcommands.
// Files that add one (rss_hash.go, …) append to it from an init function, so
// the subcommands can be developed side by side without editing this file.
var rssSubcommands []func(g *globals) *cobra.Command

func init() {
	subcommands = append(subcommands, newRSSCmd)
}

// newRSSCmd builds `xdpio rss`, the parent of the RSS subcommands
// (show, set, hash, …).
func newRSSCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "rss",
		Short: "Show and set the RSS indirection table, hash key and hash function; compute RSS hashes",
		Args:  cobra.NoArgs,
	}
	for _, mk := range rssSubcommands {
		c.AddCommand(mk(g))
	}
	return c
}
