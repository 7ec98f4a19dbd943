//go:build linux

package netdev

import (
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// lookupFamily asks the generic netlink controller for a family and also
// decodes its operation list (CTRL_ATTR_OPS).
func lookupFamily(c *genetlink.Conn, name string) (genetlink.Family, map[uint32]bool, error) {
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
	return decodeFamily(msgs[0].Data)
}

// decodeFamily decodes a CTRL_CMD_NEWFAMILY reply: the family and the set
// of its operations (nil when the reply lists none).
func decodeFamily(b []byte) (genetlink.Family, map[uint32]bool, error) {
	var f genetlink.Family
	var ops map[uint32]bool
	ad, err := newDecoder(b)
	if err != nil {
		return f, nil, fmt.Errorf("decode family: %w", err)
	}
	for ad.Next() {
		switch ad.Type() &^ nlaFNested {
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

// attrAt returns the type of the top-level request attribute that holds
// byte off of the request payload b (the extack's offset, less the
// netlink and generic netlink headers), or 0.
func attrAt(b []byte, off int) uint16 {
	pos := 0
	for pos+4 <= len(b) {
		l := int(binary.NativeEndian.Uint16(b[pos:]))
		if l < 4 {
			return 0
		}
		if off >= pos && off < pos+l {
			return binary.NativeEndian.Uint16(b[pos+2:]) &^ nlaFNested
		}
		pos += (l + 3) &^ 3
	}
	return 0
}
