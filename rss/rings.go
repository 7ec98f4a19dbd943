package rss

import "github.com/xdpio/xdpio/internal/ethtool"

// RingSizes are a device's ring sizes and ring options, as `ethtool -g`
// shows them: RX, RXMini, RXJumbo, TX and their maximums, RXBufLen,
// TCPDataSplit, CQESize, TXPush, RXPush, TXPushBufLen(Max), HDSThresh(Max).
// What the driver does not report reads 0.
type RingSizes = ethtool.Rings

// RingsConfig selects the ring parameters SetRings changes: nil fields
// keep their current value.
type RingsConfig = ethtool.RingsConfig

// TCPDataSplit is the TCP header/data split setting of RingSizes and
// RingsConfig.
type TCPDataSplit = ethtool.TCPDataSplit

// TCP header/data split settings.
const (
	TCPDataSplitUnknown  = ethtool.TCPDataSplitUnknown
	TCPDataSplitDisabled = ethtool.TCPDataSplitDisabled
	TCPDataSplitEnabled  = ethtool.TCPDataSplitEnabled
)

// Rings returns dev's ring sizes (`ethtool -g DEV`). Devices without ring
// parameters (veth) give an error matching ErrNotSupported.
func Rings(dev Device) (RingSizes, error) {
	var r RingSizes
	err := withClient(func(c *ethtool.Client) error {
		var err error
		r, err = c.Rings(dev)
		return err
	})
	return r, err
}

// SetRings changes the ring parameters cfg sets (`ethtool -G DEV rx N …`).
func SetRings(dev Device, cfg RingsConfig) error {
	return withClient(func(c *ethtool.Client) error { return c.SetRings(dev, cfg) })
}
