//go:build linux

package ethtool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"github.com/xdpio/xdpio/internal/genl"
	"golang.org/x/sys/unix"
)

// Client talks to the kernel's ethtool generic-netlink family in the
// network namespace of the thread that called Dial. It is safe for
// concurrent use.
type Client struct {
	mu     sync.Mutex // serialises requests: one answer per request
	c      *genetlink.Conn
	family genetlink.Family
	ops    map[uint32]bool
}

// Flags of the request header (ETHTOOL_A_HEADER_FLAGS).
const (
	FlagCompactBitsets = unix.ETHTOOL_FLAG_COMPACT_BITSETS // answer bitsets in compact form
	FlagOmitReply      = unix.ETHTOOL_FLAG_OMIT_REPLY      // no reply to a SET
	FlagStats          = unix.ETHTOOL_FLAG_STATS           // include statistics
)

// Dial opens a generic netlink socket in the calling thread's network
// namespace and looks up the ethtool family. It returns an error matching
// ErrNotSupported when the kernel has no ethtool netlink interface.
func Dial() (*Client, error) {
	c, err := genetlink.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("ethtool: open generic netlink socket: %w", err)
	}
	cl, err := NewClient(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	return cl, nil
}

// NewClient wraps an open generic netlink connection (genltest.Dial in
// tests) and looks up the ethtool family on it. The Client owns c.
func NewClient(c *genetlink.Conn) (*Client, error) {
	f, ops, err := genl.LookupFamily(c, unix.ETHTOOL_GENL_NAME)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOENT) {
			return nil, &Error{Op: "family lookup", NotSupported: true,
				Missing: `generic netlink family "ethtool" (kernel built without CONFIG_ETHTOOL_NETLINK?)`, Err: err}
		}
		return nil, fmt.Errorf("ethtool: look up generic netlink family %q: %w", unix.ETHTOOL_GENL_NAME, err)
	}
	// Ask for the kernel's error texts and strict attribute checking. A
	// test connection may not implement options: the requests still work.
	_ = c.SetOption(netlink.ExtendedAcknowledge, true)
	_ = c.SetOption(netlink.GetStrictCheck, true)
	return &Client{c: c, family: f, ops: ops}, nil
}

// Close closes the netlink socket.
func (c *Client) Close() error { return c.c.Close() }

// Family returns the generic netlink family the kernel reported: its ID,
// version, operations and multicast groups.
func (c *Client) Family() genetlink.Family { return c.family }

// Supports reports whether the kernel offers the user-space message cmd
// (an ETHTOOL_MSG_* value).
func (c *Client) Supports(cmd uint8) bool { return c.ops == nil || c.ops[uint32(cmd)] }

// request is one ethtool request: a command, its device and header flags,
// and the attributes after the header.
type request struct {
	cmd    uint8
	dev    Device
	flags  uint32
	encode func(ae *netlink.AttributeEncoder) // attributes after the header; may be nil
	dump   bool                               // a dump request (NLM_F_DUMP): replies up to NLMSG_DONE
}

func opName(cmd uint8) string {
	if n, ok := msgNames[cmd]; ok {
		return n
	}
	return "message " + strconv.Itoa(int(cmd))
}

// encodeRequest returns the attribute payload of r (after the generic
// netlink header).
func encodeRequest(r request) ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Nested(headerAttr, func(nae *netlink.AttributeEncoder) error {
		if r.dev.Index > 0 {
			nae.Uint32(unix.ETHTOOL_A_HEADER_DEV_INDEX, uint32(r.dev.Index))
		}
		if r.dev.Name != "" {
			nae.String(unix.ETHTOOL_A_HEADER_DEV_NAME, r.dev.Name)
		}
		if r.flags != 0 {
			nae.Uint32(unix.ETHTOOL_A_HEADER_FLAGS, r.flags)
		}
		return nil
	})
	if r.encode != nil {
		r.encode(ae)
	}
	return ae.Encode()
}

// do sends r and returns the replies (none for a SET without reply).
func (c *Client) do(r request) ([]genetlink.Message, error) {
	op := opName(r.cmd)
	global := r.cmd == unix.ETHTOOL_MSG_STRSET_GET && r.dev == (Device{})
	if err := r.dev.validate(); err != nil && !global {
		return nil, &Error{Op: op, Device: r.dev, Err: err}
	}
	if !c.Supports(r.cmd) {
		return nil, &Error{Op: op, Device: r.dev, NotSupported: true,
			Missing: "the running kernel has no ETHTOOL_MSG_" + op,
			Err:     unix.EOPNOTSUPP}
	}
	data, err := encodeRequest(r)
	if err != nil {
		return nil, &Error{Op: op, Device: r.dev, Err: fmt.Errorf("encode request: %w", err)}
	}
	msg := genetlink.Message{Header: genetlink.Header{Command: r.cmd, Version: unix.ETHTOOL_GENL_VERSION}, Data: data}
	c.mu.Lock()
	msgs, err := c.exchange(msg, r.dump)
	c.mu.Unlock()
	if err != nil {
		return nil, wrapKernelError(r.cmd, r.dev, data, err)
	}
	return msgs, nil
}

// exchange is genl.Exchange on the client's connection and family. The
// caller holds c.mu.
func (c *Client) exchange(msg genetlink.Message, dump bool) ([]genetlink.Message, error) {
	return genl.Exchange(c.c, c.family.ID, msg, dump)
}

// wrapKernelError turns a netlink error into an *Error: it keeps the
// kernel's extack text, names the attribute at the extack offset, and
// decides whether it means "not supported". This is the one place where
// kernel codes become ErrNotSupported.
func wrapKernelError(cmd uint8, dev Device, req []byte, err error) error {
	e := &Error{Op: opName(cmd), Device: dev, Err: err}
	var oe *netlink.OpError
	if errors.As(err, &oe) {
		e.Message = oe.Message
		if oe.Offset >= nlmsgHeaderLen+genlHeaderLen {
			e.Attr = attrAt(requestTrees[cmd], req, oe.Offset-nlmsgHeaderLen-genlHeaderLen)
		}
		if oe.Err != nil {
			e.Err = oe.Err
		}
	}
	switch {
	case errors.Is(e.Err, unix.EOPNOTSUPP), errors.Is(e.Err, unix.Errno(enotsupp)):
		e.NotSupported = true
		if e.Attr != "" && !strings.HasPrefix(e.Attr, "ETHTOOL_A_HEADER") {
			e.Missing = e.Attr
		} else {
			e.Missing = "the driver of " + dev.String() + " does not implement " + e.Op
		}
	case cmd == unix.ETHTOOL_MSG_COALESCE_SET && errors.Is(e.Err, unix.EINVAL) &&
		e.Attr != "" && strings.Contains(e.Message, "unsupported parameter"):
		// ethnl_set_coalesce_validate: a parameter outside the driver's
		// supported_coalesce_params is EINVAL with the attribute blamed.
		e.NotSupported = true
		e.Missing = "coalescing parameter " + e.Attr
	}
	return e
}

func nativeUint16(b []byte) uint16 { return binary.NativeEndian.Uint16(b) }

func itoa(i int) string { return strconv.Itoa(i) }

// decodeError names the reply being decoded in a decode failure.
func decodeError(what string, err error) error {
	return fmt.Errorf("decode %s reply: %w", what, err)
}

// oneReply returns the single reply message of a GET and checks its
// command.
func oneReply(op string, msgs []genetlink.Message, cmd uint8) ([]byte, error) {
	if len(msgs) != 1 {
		return nil, fmt.Errorf("%s: got %d reply messages, want 1", op, len(msgs))
	}
	if msgs[0].Header.Command != cmd {
		return nil, fmt.Errorf("%s: reply has command %d, want %d", op, msgs[0].Header.Command, cmd)
	}
	return msgs[0].Data, nil
}

// decodeHeader decodes a reply header nest into a Device.
func decodeHeader(ad *netlink.AttributeDecoder) Device {
	var d Device
	ad.Nested(func(nad *netlink.AttributeDecoder) error {
		for nad.Next() {
			switch nad.Type() {
			case unix.ETHTOOL_A_HEADER_DEV_INDEX:
				d.Index = int(nad.Uint32())
			case unix.ETHTOOL_A_HEADER_DEV_NAME:
				d.Name = nad.String()
			}
		}
		return nil
	})
	return d
}

func u32p(v uint32) *uint32 { return &v }
func boolp(v bool) *bool    { return &v }

// causeText spells a kernel errno by its name (EINVAL, EOPNOTSUPP, …),
// which says exactly what the kernel answered; other causes as they are.
func causeText(err error) string {
	if en, ok := err.(unix.Errno); ok {
		if en == unix.EOPNOTSUPP {
			return "EOPNOTSUPP" // ErrnoName says ENOTSUP, the same number
		}
		if n := unix.ErrnoName(en); n != "" {
			return n
		}
		if en == enotsupp {
			return "ENOTSUPP"
		}
	}
	return err.Error()
}
