//go:build linux

package ethtool

import (
	"encoding/binary"
	"sync"
	"testing"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"golang.org/x/sys/unix"
)

// fakeFamilyID is the family ID the fake kernel gives "ethtool".
const fakeFamilyID = 0x42

// fakeAnswer is what the fake kernel answers one ethtool request with.
type fakeAnswer struct {
	replies []genetlink.Message
	errno   unix.Errno
	msg     string // extack message
	offset  int    // extack offset into the request (from its nlmsghdr)
}

// fakeKernel emulates the kernel side of generic netlink for unit tests:
// the controller's family lookup (with an operation list) and ethtool
// requests answered by handle, each followed by an ack or an extended
// error, in the layout the kernel uses.
type fakeKernel struct {
	ops    []uint32 // operations the family lists; nil lists none
	handle func(cmd uint8, attrs []byte) fakeAnswer

	mu   sync.Mutex
	reqs []genetlink.Message
}

func (f *fakeKernel) client(t *testing.T) *Client {
	t.Helper()
	c, err := NewClient(genetlink.NewConn(nltest.Dial(f.serve)))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (f *fakeKernel) requests() []genetlink.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]genetlink.Message(nil), f.reqs...)
}

func (f *fakeKernel) serve(reqs []netlink.Message) ([]netlink.Message, error) {
	if len(reqs) != 1 {
		return nil, nil // a receive without a request: nothing pending
	}
	req := reqs[0]
	var gm genetlink.Message
	if err := gm.UnmarshalBinary(req.Data); err != nil {
		return nil, err
	}
	if req.Header.Type == unix.GENL_ID_CTRL {
		ae := netlink.NewAttributeEncoder()
		ae.Uint16(unix.CTRL_ATTR_FAMILY_ID, fakeFamilyID)
		ae.String(unix.CTRL_ATTR_FAMILY_NAME, unix.ETHTOOL_GENL_NAME)
		ae.Uint32(unix.CTRL_ATTR_VERSION, 1)
		if f.ops != nil {
			ae.Nested(unix.CTRL_ATTR_OPS, func(nae *netlink.AttributeEncoder) error {
				for i, op := range f.ops {
					nae.Nested(uint16(i+1), func(oae *netlink.AttributeEncoder) error {
						oae.Uint32(unix.CTRL_ATTR_OP_ID, op)
						oae.Uint32(unix.CTRL_ATTR_OP_FLAGS, 0)
						return nil
					})
				}
				return nil
			})
		}
		ae.Nested(unix.CTRL_ATTR_MCAST_GROUPS, func(nae *netlink.AttributeEncoder) error {
			nae.Nested(1, func(gae *netlink.AttributeEncoder) error {
				gae.Uint32(unix.CTRL_ATTR_MCAST_GRP_ID, 7)
				gae.String(unix.CTRL_ATTR_MCAST_GRP_NAME, unix.ETHTOOL_MCGRP_MONITOR_NAME)
				return nil
			})
			return nil
		})
		b, _ := ae.Encode()
		return []netlink.Message{f.wrap(req, genetlink.Message{Header: genetlink.Header{Command: unix.CTRL_CMD_NEWFAMILY, Version: 2}, Data: b})}, nil
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, gm)
	f.mu.Unlock()
	a := f.handle(gm.Header.Command, gm.Data)
	var out []netlink.Message
	for _, r := range a.replies {
		out = append(out, f.wrap(req, r))
	}
	if req.Header.Flags&netlink.Dump != 0 {
		// A dump: every part flagged multi, then NLMSG_DONE with the
		// error code.
		for i := range out {
			out[i].Header.Flags |= netlink.Multi
		}
		done := make([]byte, 4)
		binary.NativeEndian.PutUint32(done, uint32(-int32(a.errno)))
		out = append(out, netlink.Message{Header: netlink.Header{Type: netlink.Done, Flags: netlink.Multi, Sequence: req.Header.Sequence, PID: nltest.PID}, Data: done})
		return out, nil
	}
	out = append(out, ackOrError(req, a))
	return out, nil
}

func (f *fakeKernel) wrap(req netlink.Message, m genetlink.Message) netlink.Message {
	b, _ := m.MarshalBinary()
	return netlink.Message{Header: netlink.Header{Type: req.Header.Type, Sequence: req.Header.Sequence, PID: nltest.PID}, Data: b}
}

// ackOrError builds the kernel's NLMSG_ERROR answer: errno (0 for an
// ack), the request's nlmsghdr and payload, then extack attributes.
func ackOrError(req netlink.Message, a fakeAnswer) netlink.Message {
	hdr := make([]byte, 16)
	reqLen := 16 + len(req.Data)
	binary.NativeEndian.PutUint32(hdr[0:], uint32(reqLen))
	binary.NativeEndian.PutUint16(hdr[4:], uint16(req.Header.Type))
	binary.NativeEndian.PutUint16(hdr[6:], uint16(req.Header.Flags))
	binary.NativeEndian.PutUint32(hdr[8:], req.Header.Sequence)
	binary.NativeEndian.PutUint32(hdr[12:], req.Header.PID)
	data := make([]byte, 4, 4+reqLen)
	binary.NativeEndian.PutUint32(data, uint32(-int32(a.errno)))
	data = append(data, hdr...)
	data = append(data, req.Data...)
	var flags netlink.HeaderFlags
	if a.msg != "" || a.offset != 0 {
		flags |= netlink.AcknowledgeTLVs
		ae := netlink.NewAttributeEncoder()
		if a.msg != "" {
			ae.String(unix.NLMSGERR_ATTR_MSG, a.msg)
		}
		if a.offset != 0 {
			ae.Uint32(unix.NLMSGERR_ATTR_OFFS, uint32(a.offset))
		}
		tlv, _ := ae.Encode()
		data = append(data, tlv...)
	}
	return netlink.Message{Header: netlink.Header{Type: netlink.Error, Flags: flags, Sequence: req.Header.Sequence, PID: nltest.PID}, Data: data}
}

// attrOffset returns the offset, from the start of the request's nlmsghdr,
// of the first attribute of type typ in the top level of attrs (a request
// payload after the generic netlink header), or of a nested one when
// inside is non-zero: typ inside nest "inside".
func attrOffset(t *testing.T, attrs []byte, inside, typ uint16) int {
	t.Helper()
	base := nlmsgHeaderLen + genlHeaderLen
	pos := 0
	for pos+4 <= len(attrs) {
		l := int(binary.NativeEndian.Uint16(attrs[pos:]))
		ty := binary.NativeEndian.Uint16(attrs[pos+2:]) & nlaTypeMask
		if inside == 0 && ty == typ {
			return base + pos
		}
		if inside != 0 && ty == inside {
			return base + pos + 4 + attrOffset(t, attrs[pos+4:pos+l], 0, typ) - base
		}
		pos += (l + 3) &^ 3
	}
	t.Fatalf("attribute %d not in request", typ)
	return 0
}

// attrMap decodes one level of attributes into type → payload.
func attrMap(t *testing.T, b []byte) map[uint16][]byte {
	t.Helper()
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		t.Fatalf("decode attributes: %v", err)
	}
	m := map[uint16][]byte{}
	for ad.Next() {
		m[ad.Type()] = ad.Bytes()
	}
	if err := ad.Err(); err != nil {
		t.Fatalf("decode attributes: %v", err)
	}
	return m
}

func encodeAttrs(t *testing.T, fn func(ae *netlink.AttributeEncoder)) []byte {
	t.Helper()
	ae := netlink.NewAttributeEncoder()
	fn(ae)
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
