package rss

import "github.com/xdpio/xdpio/internal/ethtool"

// ChannelCounts are a device's channel (queue) counts and their maximums,
// as `ethtool -l` shows them. A kind the driver does not have reads 0/0
// ("n/a" in ethtool). Fields: RX, TX, Other, Combined and RXMax, TXMax,
// OtherMax, CombinedMax.
type ChannelCounts = ethtool.Channels

// ChannelsConfig selects the channel counts SetChannels changes: nil
// fields keep their current value. Fields: RX, TX, Other, Combined.
type ChannelsConfig = ethtool.ChannelsConfig

// Channels returns dev's channel counts (`ethtool -l DEV`).
func Channels(dev Device) (ChannelCounts, error) {
	var ch ChannelCounts
	err := withClient(func(c *ethtool.Client) error {
		var err error
		ch, err = c.Channels(dev)
		return err
	})
	return ch, err
}

// SetChannels changes the counts cfg sets (`ethtool -L DEV rx N …`). The
// kernel rejects counts above the maximums, or a configuration that leaves
// no RX or TX queue, with a message the error carries.
func SetChannels(dev Device, cfg ChannelsConfig) error {
	return withClient(func(c *ethtool.Client) error { return c.SetChannels(dev, cfg) })
}
