//go:build !linux

package netdev

import "errors"

var errNotLinux = &Error{Family: family, Op: "dial", NotSupported: true, Missing: "netdev netlink (Linux only)", Err: errors.New("not Linux")}

// Client is unavailable on this system; Dial returns ErrNotSupported.
type Client struct{}

// Dial returns an error matching ErrNotSupported: netdev netlink exists
// only on Linux.
func Dial() (*Client, error) { return nil, errNotLinux }

// Close does nothing.
func (c *Client) Close() error { return nil }

// Supports reports false.
func (c *Client) Supports(cmd uint8) bool { return false }

// SupportsAttr reports false.
func (c *Client) SupportsAttr(cmd uint8, attr uint16) bool { return false }

// Dev returns ErrNotSupported.
func (c *Client) Dev(ifindex int) (Dev, error) { return Dev{}, errNotLinux }

// Devs returns ErrNotSupported.
func (c *Client) Devs() ([]Dev, error) { return nil, errNotLinux }

// Queues returns ErrNotSupported.
func (c *Client) Queues(ifindex int) ([]Queue, error) { return nil, errNotLinux }

// Queue returns ErrNotSupported.
func (c *Client) Queue(ifindex int, typ QueueType, id uint32) (Queue, error) {
	return Queue{}, errNotLinux
}

// NAPIs returns ErrNotSupported.
func (c *Client) NAPIs(ifindex int) ([]NAPI, error) { return nil, errNotLinux }

// NAPI returns ErrNotSupported.
func (c *Client) NAPI(id uint32) (NAPI, error) { return NAPI{}, errNotLinux }

// SetNAPI returns ErrNotSupported.
func (c *Client) SetNAPI(id uint32, cfg NAPIConfig) error { return errNotLinux }

// QStats returns ErrNotSupported.
func (c *Client) QStats(ifindex int) ([]QStats, error) { return nil, errNotLinux }

// NetNS returns 0.
func (c *Client) NetNS() uint64 { return 0 }

// Monitor is unavailable on this system.
type Monitor struct{}

// Notification is a device notification.
type Notification struct {
	Cmd uint8
	Dev Dev
}

// Monitor returns ErrNotSupported.
func (c *Client) Monitor() (*Monitor, error) { return nil, errNotLinux }

// Close does nothing.
func (m *Monitor) Close() error { return nil }
