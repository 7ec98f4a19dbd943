//go:build linux

package netdev

import (
	"fmt"
	"time"

	"github.com/mdlayher/genetlink"
	"golang.org/x/sys/unix"
)

// Notification is one dev-add-ntf, dev-del-ntf or dev-change-ntf the
// kernel multicast on the netdev "mgmt" group: a device appeared,
// disappeared, or changed what it offers to XDP (its XDP features change,
// for example, when veth's GRO is toggled).
type Notification struct {
	// Cmd is CmdDevAddNtf, CmdDevDelNtf or CmdDevChangeNtf.
	Cmd uint8
	// Dev is the device as the notification describes it.
	Dev Dev
}

// Kind returns "add", "del", "change" or "op-N".
func (n Notification) Kind() string {
	switch n.Cmd {
	case CmdDevAddNtf:
		return "add"
	case CmdDevDelNtf:
		return "del"
	case CmdDevChangeNtf:
		return "change"
	}
	return OpName(n.Cmd)
}

// Monitor receives netdev device notifications in the namespace it was
// opened in. Receive must not be called concurrently; Close may be called
// at any time.
type Monitor struct {
	c *genetlink.Conn
}

// Monitor opens a separate socket in the calling thread's namespace and
// joins the family's "mgmt" multicast group.
func (c *Client) Monitor() (*Monitor, error) {
	var group uint32
	for _, g := range c.Family().Groups {
		if g.Name == "mgmt" {
			group = g.ID
		}
	}
	if group == 0 {
		return nil, &Error{Family: family, Op: "monitor", NotSupported: true, Missing: `multicast group "mgmt"`, Err: unix.EOPNOTSUPP}
	}
	conn, err := genetlink.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("netdev monitor: open socket: %w", err)
	}
	if err := conn.JoinGroup(group); err != nil {
		conn.Close()
		return nil, fmt.Errorf("netdev monitor: join group %d: %w", group, err)
	}
	return &Monitor{c: conn}, nil
}

// Receive blocks until notifications arrive, or until deadline when it is
// not zero, and decodes them. Messages of other commands are skipped.
func (m *Monitor) Receive(deadline time.Time) ([]Notification, error) {
	if err := m.c.SetReadDeadline(deadline); err != nil {
		return nil, fmt.Errorf("netdev monitor: %w", err)
	}
	msgs, _, err := m.c.Receive()
	if err != nil {
		return nil, fmt.Errorf("netdev monitor: receive: %w", err)
	}
	var out []Notification
	for _, msg := range msgs {
		switch msg.Header.Command {
		case CmdDevAddNtf, CmdDevDelNtf, CmdDevChangeNtf:
		default:
			continue
		}
		d, err := DecodeDev(msg.Data)
		if err != nil {
			return out, fmt.Errorf("netdev monitor: %w", err)
		}
		out = append(out, Notification{Cmd: msg.Header.Command, Dev: d})
	}
	return out, nil
}

// Close leaves the group and closes the socket.
func (m *Monitor) Close() error { return m.c.Close() }
