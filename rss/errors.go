package rss

import "github.com/xdpio/xdpio/internal/ethtool"

// ErrNotSupported is matched (errors.Is) by errors of the device functions
// (Channels, Rings, Table, Features and their setters) when the kernel or
// the device's driver lacks the operation or parameter. The error text
// names what is missing; the kernel's errno stays reachable with errors.Is.
var ErrNotSupported = ethtool.ErrNotSupported

// Device names a network interface by Name, by Index, or both. The device
// functions run in the calling thread's network namespace.
type Device = ethtool.Device

// DeviceError is the error type of the device functions: the ethtool
// message, the device, the kernel's extended-ack text (Message) and the
// request attribute the kernel blamed (Attr). Use errors.As to read them.
type DeviceError = ethtool.Error

// withClient dials an ethtool client in the calling thread's namespace,
// runs fn and closes the client.
func withClient(fn func(c *ethtool.Client) error) error {
	c, err := ethtool.Dial()
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}
