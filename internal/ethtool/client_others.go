//go:build !linux

package ethtool

import "errors"

var errNotLinux = &Error{Family: family, Op: "dial", NotSupported: true, Missing: "ethtool netlink (Linux only)", Err: errors.New("not Linux")}

// Client is unavailable on this system; Dial returns ErrNotSupported.
type Client struct{}

// Dial returns an error matching ErrNotSupported: ethtool netlink exists
// only on Linux.
func Dial() (*Client, error) { return nil, errNotLinux }

// Close does nothing.
func (c *Client) Close() error { return nil }

// Channels returns ErrNotSupported.
func (c *Client) Channels(Device) (Channels, error) { return Channels{}, errNotLinux }

// SetChannels returns ErrNotSupported.
func (c *Client) SetChannels(Device, ChannelsConfig) error { return errNotLinux }

// Rings returns ErrNotSupported.
func (c *Client) Rings(Device) (Rings, error) { return Rings{}, errNotLinux }

// SetRings returns ErrNotSupported.
func (c *Client) SetRings(Device, RingsConfig) error { return errNotLinux }

// Coalesce returns ErrNotSupported.
func (c *Client) Coalesce(Device) (Coalesce, error) { return Coalesce{}, errNotLinux }

// SetCoalesce returns ErrNotSupported.
func (c *Client) SetCoalesce(Device, Coalesce) error { return errNotLinux }

// Features returns ErrNotSupported.
func (c *Client) Features(Device) (Features, error) { return nil, errNotLinux }

// SetFeatures returns ErrNotSupported.
func (c *Client) SetFeatures(Device, map[string]bool) (FeaturesResult, error) {
	return FeaturesResult{}, errNotLinux
}

// RSS returns ErrNotSupported.
func (c *Client) RSS(Device, uint32) (RSS, error) { return RSS{}, errNotLinux }

// SetRSS returns ErrNotSupported.
func (c *Client) SetRSS(Device, RSSConfig) error { return errNotLinux }

// StringSet returns ErrNotSupported.
func (c *Client) StringSet(Device, uint32) ([]string, error) { return nil, errNotLinux }

// DriverStats returns ErrNotSupported.
func (c *Client) DriverStats(Device) ([]Stat, error) { return nil, errNotLinux }

// RSSHashFuncs returns ErrNotSupported.
func (c *Client) RSSHashFuncs() ([]string, error) { return nil, errNotLinux }

// CoalesceAttrName returns "": attribute numbers are Linux's.
func CoalesceAttrName(typ uint16) string { return "" }

// CoalesceSetAttrs returns nil: attribute numbers are Linux's.
func CoalesceSetAttrs(c Coalesce) []uint16 { return nil }

// MaxQueueCoalesce is the number of queues the per-queue ioctl addresses.
const MaxQueueCoalesce = 4096

// QueueCoalesce returns ErrNotSupported.
func (c *Client) QueueCoalesce(Device, []int) ([]Coalesce, error) { return nil, errNotLinux }

// SetQueueCoalesce returns ErrNotSupported.
func (c *Client) SetQueueCoalesce(Device, []int, Coalesce) error { return errNotLinux }

// CreateRSSContext returns ErrNotSupported.
func (c *Client) CreateRSSContext(Device, RSSConfig) (uint32, error) { return 0, errNotLinux }

// DeleteRSSContext returns ErrNotSupported.
func (c *Client) DeleteRSSContext(Device, uint32) error { return errNotLinux }

// RSSContexts returns ErrNotSupported.
func (c *Client) RSSContexts(Device) ([]RSS, error) { return nil, errNotLinux }

// RXQueues returns ErrNotSupported.
func (c *Client) RXQueues(Device) (int, error) { return 0, errNotLinux }

// MaxRXQueues returns ErrNotSupported.
func (c *Client) MaxRXQueues(Device) (int, error) { return 0, errNotLinux }
