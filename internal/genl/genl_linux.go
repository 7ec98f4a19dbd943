//go:build linux

package genl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// NLAFNested is NLA_F_NESTED, the flag the kernel sets in the type of a
// nested attribute.
const NLAFNested = 0x8000

// NewDecoder checks that b is a sequence of whole attributes, descending
// into nests the kernel marks with NLA_F_NESTED, and returns a decoder
// for it. The netlink package tolerates zero-length attributes and skips
// over them; the kernel never sends them, so they are rejected here
// instead of silently dropping the rest of a reply.
func NewDecoder(b []byte) (*netlink.AttributeDecoder, error) {
	if err := checkFraming(b, 0); err != nil {
		return nil, err
	}
	return netlink.NewAttributeDecoder(b)
}

func checkFraming(b []byte, depth int) error {
	if depth > 8 {
		return fmt.Errorf("attributes nested deeper than 8 levels")
	}
	pos := 0
	for pos < len(b) {
		if pos+4 > len(b) {
			return fmt.Errorf("truncated attribute header at byte %d of %d", pos, len(b))
		}
		l := int(binary.NativeEndian.Uint16(b[pos:]))
		typ := binary.NativeEndian.Uint16(b[pos+2:])
		if l < 4 || pos+l > len(b) {
			return fmt.Errorf("attribute length %d at byte %d of %d", l, pos, len(b))
		}
		if typ&NLAFNested != 0 {
			if err := checkFraming(b[pos+4:pos+l], depth+1); err != nil {
				return err
			}
		}
		pos += (l + 3) &^ 3
	}
	return nil
}

// LookupFamily asks the generic netlink controller for a family, like
// genetlink.Conn.GetFamily, and also decodes the family's operations
// (CTRL_ATTR_OPS). A nil ops map means the controller listed none (a test
// server): every message is then tried.
func LookupFamily(c *genetlink.Conn, name string) (genetlink.Family, map[uint32]bool, error) {
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.CTRL_ATTR_FAMILY_NAME, name)
	b, err := ae.Encode()
	if err != nil {
		return genetlink.Family{}, nil, err
	}
	msgs, err := c.Execute(genetlink.Message{
		Header: genetlink.Header{Command: unix.CTRL_CMD_GETFAMILY, Version: 1},
		Data:   b,
	}, unix.GENL_ID_CTRL, netlink.Request)
	if err != nil {
		return genetlink.Family{}, nil, err
	}
	if len(msgs) != 1 {
		return genetlink.Family{}, nil, fmt.Errorf("controller sent %d replies, want 1", len(msgs))
	}
	return DecodeFamily(msgs[0].Data)
}

// DecodeFamily decodes a CTRL_CMD_NEWFAMILY reply: the family and the set
// of its operations (nil when the reply lists none).
func DecodeFamily(b []byte) (genetlink.Family, map[uint32]bool, error) {
	var f genetlink.Family
	var ops map[uint32]bool
	ad, err := NewDecoder(b)
	if err != nil {
		return f, nil, fmt.Errorf("decode family: %w", err)
	}
	for ad.Next() {
		switch ad.Type() &^ NLAFNested {
		case unix.CTRL_ATTR_FAMILY_ID:
			f.ID = ad.Uint16()
		case unix.CTRL_ATTR_FAMILY_NAME:
			f.Name = ad.String()
		case unix.CTRL_ATTR_VERSION:
			f.Version = uint8(ad.Uint32())
		case unix.CTRL_ATTR_OPS:
			ops = map[uint32]bool{}
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				for nad.Next() {
					nad.Nested(func(oad *netlink.AttributeDecoder) error {
						for oad.Next() {
							if oad.Type() == unix.CTRL_ATTR_OP_ID {
								ops[oad.Uint32()] = true
							}
						}
						return nil
					})
				}
				return nil
			})
		case unix.CTRL_ATTR_MCAST_GROUPS:
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				for nad.Next() {
					var g genetlink.MulticastGroup
					nad.Nested(func(gad *netlink.AttributeDecoder) error {
						for gad.Next() {
							switch gad.Type() {
							case unix.CTRL_ATTR_MCAST_GRP_ID:
								g.ID = gad.Uint32()
							case unix.CTRL_ATTR_MCAST_GRP_NAME:
								g.Name = gad.String()
							}
						}
						return nil
					})
					f.Groups = append(f.Groups, g)
				}
				return nil
			})
		}
	}
	if err := ad.Err(); err != nil {
		return genetlink.Family{}, nil, fmt.Errorf("decode family: %w", err)
	}
	if f.ID == 0 {
		return genetlink.Family{}, nil, fmt.Errorf("decode family: no family ID")
	}
	return f, ops, nil
}

// ReplyTimeout bounds the wait for the kernel's answer to one request.
const ReplyTimeout = 10 * time.Second

// Exchange sends msg to the family with an acknowledgement request and
// collects the replies up to the acknowledgement. The kernel sends a GET's
// reply and the ack in separate datagrams, so one receive is not enough
// (and a leftover ack would confuse the next request). Messages with
// another sequence number (left over from an interrupted exchange) are
// dropped. A dump's replies are collected up to NLMSG_DONE. The wait for
// the kernel is bounded by ReplyTimeout. The caller serializes exchanges
// on c.
func Exchange(c *genetlink.Conn, family uint16, msg genetlink.Message, dump bool) ([]genetlink.Message, error) {
	flags := netlink.Request | netlink.Acknowledge
	if dump {
		// A dump ends with NLMSG_DONE (which carries any error); no ack.
		flags = netlink.Request | netlink.Dump
	}
	req, err := c.Send(msg, family, flags)
	if err != nil {
		return nil, err
	}
	seq := req.Header.Sequence
	_ = c.SetReadDeadline(time.Now().Add(ReplyTimeout))
	defer c.SetReadDeadline(time.Time{})
	var out []genetlink.Message
	for {
		gmsgs, nmsgs, err := c.Receive()
		if err != nil {
			var oe *netlink.OpError
			if errors.As(err, &oe) && oe.Sequence != 0 && oe.Sequence != seq {
				continue // an error answering an earlier, abandoned request
			}
			return nil, err
		}
		stale := 0
		for i, nm := range nmsgs {
			if nm.Header.Sequence != seq {
				stale++
				continue
			}
			switch nm.Header.Type {
			case netlink.Error, netlink.Done:
				return out, nil // the acknowledgement (errors come as err)
			}
			out = append(out, gmsgs[i])
		}
		// The netlink package reads a whole multi-part dump in one
		// Receive and drops its NLMSG_DONE: the dump is complete unless
		// everything received belonged to an earlier request.
		if dump && (stale == 0 || len(out) > 0) {
			return out, nil
		}
	}
}
