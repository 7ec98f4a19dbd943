//go:build linux

package ethtool

import (
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

const (
	ctrlAttrOp     = 10 // CTRL_ATTR_OP (u32), not in x/sys
	nlAttrTypeSint = 16 // NL_ATTR_TYPE_SINT, not in x/sys
	nlAttrTypeUint = 17 // NL_ATTR_TYPE_UINT: 4 or 8 bytes, not in x/sys
)

// attrPolicy is the kernel's validation policy for one attribute, from
// the generic netlink controller's policy dump (CTRL_CMD_GETPOLICY).
type attrPolicy struct {
	typ            uint32 // NL_ATTR_TYPE_*
	minLen, maxLen uint32 // for binary attributes, 0 when absent
	nested         int    // policy index of a nest's attributes, -1 if none
	// Value bounds of unsigned integers and a bit mask they must fit,
	// when the policy has them.
	minVal, maxVal, mask    uint64
	hasMin, hasMax, hasMask bool
}

// kernelPolicy returns the policy the running kernel validates a "do"
// request of ethtool message cmd with: policy index → attribute → policy,
// and the index of the top-level policy.
func kernelPolicy(c *Client, cmd uint8) (map[int]map[uint16]attrPolicy, int, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Uint16(unix.CTRL_ATTR_FAMILY_ID, c.Family().ID)
	ae.Uint32(ctrlAttrOp, uint32(cmd))
	b, err := ae.Encode()
	if err != nil {
		return nil, 0, err
	}
	msgs, err := c.Execute(genetlink.Message{Header: genetlink.Header{Command: unix.CTRL_CMD_GETPOLICY, Version: 1}, Data: b},
		unix.GENL_ID_CTRL, netlink.Request|netlink.Dump)
	if err != nil {
		return nil, 0, fmt.Errorf("policy dump: %w", err)
	}
	pols := map[int]map[uint16]attrPolicy{}
	top := -1
	for _, m := range msgs {
		ad, err := netlink.NewAttributeDecoder(m.Data)
		if err != nil {
			return nil, 0, err
		}
		for ad.Next() {
			switch ad.Type() {
			case unix.CTRL_ATTR_POLICY:
				ad.Nested(func(pad *netlink.AttributeDecoder) error {
					for pad.Next() {
						idx := int(pad.Type())
						if pols[idx] == nil {
							pols[idx] = map[uint16]attrPolicy{}
						}
						pad.Nested(func(aad *netlink.AttributeDecoder) error {
							for aad.Next() {
								attr := aad.Type()
								p := attrPolicy{nested: -1}
								aad.Nested(func(d *netlink.AttributeDecoder) error {
									for d.Next() {
										switch d.Type() {
										case unix.NL_POLICY_TYPE_ATTR_TYPE:
											p.typ = d.Uint32()
										case unix.NL_POLICY_TYPE_ATTR_MIN_LENGTH:
											p.minLen = d.Uint32()
										case unix.NL_POLICY_TYPE_ATTR_MAX_LENGTH:
											p.maxLen = d.Uint32()
										case unix.NL_POLICY_TYPE_ATTR_POLICY_IDX:
											p.nested = int(d.Uint32())
										case unix.NL_POLICY_TYPE_ATTR_MIN_VALUE_U:
											p.minVal, p.hasMin = d.Uint64(), true
										case unix.NL_POLICY_TYPE_ATTR_MAX_VALUE_U:
											p.maxVal, p.hasMax = d.Uint64(), true
										case unix.NL_POLICY_TYPE_ATTR_MASK:
											p.mask, p.hasMask = d.Uint64(), true
										}
									}
									return nil
								})
								pols[idx][attr] = p
							}
							return nil
						})
					}
					return nil
				})
			case unix.CTRL_ATTR_OP_POLICY:
				ad.Nested(func(oad *netlink.AttributeDecoder) error {
					for oad.Next() {
						oad.Nested(func(d *netlink.AttributeDecoder) error {
							for d.Next() {
								if d.Type() == unix.CTRL_ATTR_POLICY_DO {
									top = int(d.Uint32())
								}
							}
							return nil
						})
					}
					return nil
				})
			}
		}
		if err := ad.Err(); err != nil {
			return nil, 0, err
		}
	}
	if top < 0 {
		return nil, 0, fmt.Errorf("policy dump names no do-policy for command %d", cmd)
	}
	return pols, top, nil
}

// checkAgainstPolicy checks every attribute of b (recursively) against
// policy index idx: the attribute must be in the policy, with a payload
// the policy's type accepts.
func checkAgainstPolicy(pols map[int]map[uint16]attrPolicy, idx int, b []byte, path string) error {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return err
	}
	for ad.Next() {
		name := fmt.Sprintf("%s/%d", path, ad.Type())
		p, ok := pols[idx][ad.Type()]
		if !ok {
			return fmt.Errorf("%s: not in the kernel's policy %d", name, idx)
		}
		v := ad.Bytes()
		var num uint64
		switch len(v) {
		case 1:
			num = uint64(v[0])
		case 4:
			num = uint64(binary.NativeEndian.Uint32(v))
		case 8:
			num = binary.NativeEndian.Uint64(v)
		}
		checkRange := func() error {
			if p.hasMin && num < p.minVal || p.hasMax && num > p.maxVal {
				return fmt.Errorf("%s: value %d outside %d..%d", name, num, p.minVal, p.maxVal)
			}
			if p.hasMask && num&^p.mask != 0 {
				return fmt.Errorf("%s: value %#x outside mask %#x", name, num, p.mask)
			}
			return nil
		}
		switch p.typ {
		case unix.NL_ATTR_TYPE_U8:
			if len(v) != 1 {
				return fmt.Errorf("%s: u8 attribute of %d bytes", name, len(v))
			}
			if err := checkRange(); err != nil {
				return err
			}
		case unix.NL_ATTR_TYPE_U32:
			if len(v) != 4 {
				return fmt.Errorf("%s: u32 attribute of %d bytes", name, len(v))
			}
			if err := checkRange(); err != nil {
				return err
			}
		case nlAttrTypeUint:
			if len(v) != 4 && len(v) != 8 {
				return fmt.Errorf("%s: uint attribute of %d bytes", name, len(v))
			}
			if err := checkRange(); err != nil {
				return err
			}
		case unix.NL_ATTR_TYPE_FLAG:
			if len(v) != 0 {
				return fmt.Errorf("%s: flag with %d bytes", name, len(v))
			}
		case unix.NL_ATTR_TYPE_BINARY:
			if p.minLen != 0 && uint32(len(v)) < p.minLen || p.maxLen != 0 && uint32(len(v)) > p.maxLen {
				return fmt.Errorf("%s: binary of %d bytes outside %d..%d", name, len(v), p.minLen, p.maxLen)
			}
		case unix.NL_ATTR_TYPE_NUL_STRING, unix.NL_ATTR_TYPE_STRING:
			if len(v) == 0 || p.typ == unix.NL_ATTR_TYPE_NUL_STRING && v[len(v)-1] != 0 {
				return fmt.Errorf("%s: string %q not NUL-terminated", name, v)
			}
		case unix.NL_ATTR_TYPE_NESTED:
			if ad.TypeFlags()&netlink.Nested == 0 {
				return fmt.Errorf("%s: nest without NLA_F_NESTED", name)
			}
			if p.nested >= 0 {
				if err := checkAgainstPolicy(pols, p.nested, v, name); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("%s: policy type %d not checked by this test", name, p.typ)
		}
	}
	return ad.Err()
}
