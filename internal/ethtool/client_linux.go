//go:build linux

package ethtool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"github.com/xdpio/xdpio/internal/genl"
	"golang.org/x/sys/unix"
)

// Client talks to the kernel's ethtool generic-netlink family in the
// network namespace of the thread that called Dial. It is safe for
// concurrent use. Close, Family and Supports (whether the kernel offers an
// ETHTOOL_MSG_* message) come from the embedded genl.Conn.
type Client struct {
	*genl.Conn
}

// Flags of the request header (ETHTOOL_A_HEADER_FLAGS).
const (
	FlagCompactBitsets = unix.ETHTOOL_FLAG_COMPACT_BITSETS // answer bitsets in compact form
	FlagOmitReply      = unix.ETHTOOL_FLAG_OMIT_REPLY      // no reply to a SET
	FlagStats          = unix.ETHTOOL_FLAG_STATS           // include statistics
)

const missingFamily = `generic netlink family "ethtool" (kernel built without CONFIG_ETHTOOL_NETLINK?)`

// Dial opens a generic netlink socket in the calling thread's network
// namespace and looks up the ethtool family. It returns an error matching
// ErrNotSupported when the kernel has no ethtool netlink interface.
func Dial() (*Client, error) {
	c, err := genl.Dial(family, missingFamily)
	if err != nil {
		return nil, err
	}
	return &Client{c}, nil
}

// NewClient wraps an open generic netlink connection (genltest.Dial in
// tests) and looks up the ethtool family on it. The Client owns c.
func NewClient(c *genetlink.Conn) (*Client, error) {
	gc, err := genl.Open(c, family, missingFamily)
	if err != nil {
		return nil, err
	}
	return &Client{gc}, nil
}

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
		return nil, &Error{Family: family, Op: op, Target: r.dev.target(), Err: err}
	}
	if !c.Supports(r.cmd) {
		return nil, &Error{Family: family, Op: op, Target: r.dev.target(), NotSupported: true,
			Missing: "the running kernel has no ETHTOOL_MSG_" + op,
			Err:     unix.EOPNOTSUPP}
	}
	data, err := encodeRequest(r)
	if err != nil {
		return nil, &Error{Family: family, Op: op, Target: r.dev.target(), Err: fmt.Errorf("encode request: %w", err)}
	}
	msgs, err := c.Do(r.cmd, unix.ETHTOOL_GENL_VERSION, data, r.dump)
	if err != nil {
		return nil, wrapKernelError(r.cmd, r.dev, data, err)
	}
	return msgs, nil
}

// wrapKernelError turns a netlink error into an *Error (genl.KernelError,
// with the attribute at the extack offset named from the request's
// attribute tree) and says what is missing when it means "not supported".
func wrapKernelError(cmd uint8, dev Device, req []byte, err error) error {
	e := genl.KernelError(family, opName(cmd), dev.target(), req, err, func(req []byte, off int) string {
		return attrAt(requestTrees[cmd], req, off)
	})
	switch {
	case e.NotSupported:
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
