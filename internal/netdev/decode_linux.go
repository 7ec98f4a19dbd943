//go:build linux

package netdev

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/xdpio/xdpio/internal/genl"
	"golang.org/x/sys/unix"
)

const nlaFNested = genl.NLAFNested

// newDecoder is genl.NewDecoder.
var newDecoder = genl.NewDecoder

// uintAttr decodes an NLA_UINT: 4 or 8 bytes, native endian.
func uintAttr(b []byte) (uint64, error) {
	switch len(b) {
	case 4:
		return uint64(binary.NativeEndian.Uint32(b)), nil
	case 8:
		return binary.NativeEndian.Uint64(b), nil
	}
	return 0, fmt.Errorf("uint attribute of %d bytes, want 4 or 8", len(b))
}

func u32Attr(b []byte, what string) (uint32, error) {
	if len(b) != 4 {
		return 0, fmt.Errorf("%s: %d bytes, want 4", what, len(b))
	}
	return binary.NativeEndian.Uint32(b), nil
}

func nsDuration(v uint64, what string) (time.Duration, error) {
	if v > math.MaxInt64 {
		return 0, fmt.Errorf("%s: %d ns does not fit a time.Duration", what, v)
	}
	return time.Duration(v), nil
}

func keepUnknown(m *map[uint16][]byte, typ uint16, b []byte) {
	if *m == nil {
		*m = map[uint16][]byte{}
	}
	(*m)[typ] = append([]byte(nil), b...)
}

// DecodeDev decodes a dev-get reply.
func DecodeDev(b []byte) (Dev, error) {
	var d Dev
	ad, err := newDecoder(b)
	if err != nil {
		return d, fmt.Errorf("decode dev-get reply: %w", err)
	}
	var derr error
	for ad.Next() && derr == nil {
		v := ad.Bytes()
		switch ad.Type() {
		case AttrDevIfindex:
			var x uint32
			x, derr = u32Attr(v, "ifindex")
			d.Ifindex = int(x)
		case AttrDevPad:
		case AttrDevXDPFeatures:
			d.XDPFeatures, derr = u64Attr(v, "xdp-features")
		case AttrDevXDPZCMaxSegs:
			d.XDPZCMaxSegs, derr = u32Attr(v, "xdp-zc-max-segs")
		case AttrDevXDPRxMetadataFeatures:
			d.XDPRxMetadataFeatures, derr = u64Attr(v, "xdp-rx-metadata-features")
		case AttrDevXSKFeatures:
			d.XSKFeatures, derr = u64Attr(v, "xsk-features")
		default:
			keepUnknown(&d.Unknown, ad.Type(), v)
		}
	}
	if derr == nil {
		derr = ad.Err()
	}
	if derr == nil && d.Ifindex == 0 {
		derr = fmt.Errorf("no ifindex")
	}
	if derr != nil {
		return Dev{}, fmt.Errorf("decode dev-get reply: %w", derr)
	}
	return d, nil
}

func u64Attr(b []byte, what string) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%s: %d bytes, want 8", what, len(b))
	}
	return binary.NativeEndian.Uint64(b), nil
}

// DecodeQueue decodes a queue-get reply.
func DecodeQueue(b []byte) (Queue, error) {
	var q Queue
	ad, err := newDecoder(b)
	if err != nil {
		return q, fmt.Errorf("decode queue-get reply: %w", err)
	}
	var derr error
	seen := 0
	for ad.Next() && derr == nil {
		v := ad.Bytes()
		var x uint32
		switch ad.Type() {
		case AttrQueueID:
			q.ID, derr = u32Attr(v, "id")
			seen |= 1
		case AttrQueueIfindex:
			x, derr = u32Attr(v, "ifindex")
			q.Ifindex = int(x)
			seen |= 2
		case AttrQueueType:
			x, derr = u32Attr(v, "type")
			q.Type = QueueType(x)
			seen |= 4
		case AttrQueueNAPIID:
			q.NAPIID, derr = u32Attr(v, "napi-id")
		case AttrQueueDMABuf:
			q.DMABuf, derr = u32Attr(v, "dmabuf")
		case AttrQueueIOUring, AttrQueueIOUring | nlaFNested:
			q.IOUring = true
		case AttrQueueXSK, AttrQueueXSK | nlaFNested:
			q.XSK = true
		}
	}
	if derr == nil {
		derr = ad.Err()
	}
	if derr == nil && seen != 7 {
		derr = fmt.Errorf("reply lacks id, ifindex or type")
	}
	if derr != nil {
		return Queue{}, fmt.Errorf("decode queue-get reply: %w", derr)
	}
	return q, nil
}

// DecodeNAPI decodes a napi-get reply.
func DecodeNAPI(b []byte) (NAPI, error) {
	n := NAPI{IRQ: -1}
	ad, err := newDecoder(b)
	if err != nil {
		return n, fmt.Errorf("decode napi-get reply: %w", err)
	}
	var derr error
	seen := 0
	for ad.Next() && derr == nil {
		v := ad.Bytes()
		var x uint32
		var u uint64
		switch ad.Type() {
		case AttrNAPIIfindex:
			x, derr = u32Attr(v, "ifindex")
			n.Ifindex = int(x)
			seen |= 1
		case AttrNAPIID:
			n.ID, derr = u32Attr(v, "id")
			seen |= 2
		case AttrNAPIIRQ:
			x, derr = u32Attr(v, "irq")
			n.IRQ = int(int32(x))
		case AttrNAPIPID:
			x, derr = u32Attr(v, "pid")
			n.PID = int(int32(x))
		case AttrNAPIDeferHardIRQs:
			x, derr = u32Attr(v, "defer-hard-irqs")
			n.DeferHardIRQs = &x
		case AttrNAPIGROFlushTimeout:
			if u, derr = uintAttr(v); derr == nil {
				var d time.Duration
				d, derr = nsDuration(u, "gro-flush-timeout")
				n.GROFlushTimeout = &d
			}
		case AttrNAPIIRQSuspendTimeout:
			if u, derr = uintAttr(v); derr == nil {
				var d time.Duration
				d, derr = nsDuration(u, "irq-suspend-timeout")
				n.IRQSuspendTimeout = &d
			}
		case AttrNAPIThreaded:
			x, derr = u32Attr(v, "threaded")
			th := Threaded(x)
			n.Threaded = &th
		default:
			keepUnknown(&n.Unknown, ad.Type(), v)
		}
	}
	if derr == nil {
		derr = ad.Err()
	}
	if derr == nil && seen != 3 {
		derr = fmt.Errorf("reply lacks id or ifindex")
	}
	if derr != nil {
		return NAPI{IRQ: -1}, fmt.Errorf("decode napi-get reply: %w", derr)
	}
	return n, nil
}

// DecodeQStats decodes a qstats-get reply row.
func DecodeQStats(b []byte) (QStats, error) {
	var s QStats
	ad, err := newDecoder(b)
	if err != nil {
		return s, fmt.Errorf("decode qstats-get reply: %w", err)
	}
	var derr error
	for ad.Next() && derr == nil {
		v := ad.Bytes()
		var x uint32
		switch t := ad.Type(); t {
		case AttrQStatsIfindex:
			x, derr = u32Attr(v, "ifindex")
			s.Ifindex = int(x)
		case AttrQStatsQueueType:
			x, derr = u32Attr(v, "queue-type")
			s.Type = QueueType(x)
		case AttrQStatsQueueID:
			s.ID, derr = u32Attr(v, "queue-id")
		case AttrQStatsScope:
		default:
			var u uint64
			if u, derr = uintAttr(v); derr == nil {
				s.Set(Counter(t), u)
			} else {
				derr = fmt.Errorf("%s: %w", Counter(t), derr)
			}
		}
	}
	if derr == nil {
		derr = ad.Err()
	}
	if derr != nil {
		return QStats{}, fmt.Errorf("decode qstats-get reply: %w", derr)
	}
	return s, nil
}

// EncodeNAPIConfig appends the set fields of cfg as napi attributes.
func EncodeNAPIConfig(ae *netlink.AttributeEncoder, cfg NAPIConfig) {
	if cfg.DeferHardIRQs != nil {
		ae.Uint32(AttrNAPIDeferHardIRQs, *cfg.DeferHardIRQs)
	}
	if cfg.GROFlushTimeout != nil {
		ae.Uint64(AttrNAPIGROFlushTimeout, uint64(*cfg.GROFlushTimeout))
	}
	if cfg.IRQSuspendTimeout != nil {
		ae.Uint64(AttrNAPIIRQSuspendTimeout, uint64(*cfg.IRQSuspendTimeout))
	}
	if cfg.Threaded != nil {
		ae.Uint32(AttrNAPIThreaded, uint32(*cfg.Threaded))
	}
}

// decodePolicyDump decodes the messages of a CTRL_CMD_GETPOLICY dump into
// op → the attributes its "do" policy accepts.
func decodePolicyDump(msgs [][]byte) (map[uint8]map[uint16]bool, error) {
	opDo := map[uint8]uint32{}
	pols := map[uint32]map[uint16]bool{}
	for _, m := range msgs {
		ad, err := newDecoder(m)
		if err != nil {
			return nil, fmt.Errorf("decode policy dump: %w", err)
		}
		for ad.Next() {
			switch ad.Type() &^ nlaFNested {
			case unix.CTRL_ATTR_OP_POLICY:
				ad.Nested(func(od *netlink.AttributeDecoder) error {
					for od.Next() {
						op := od.Type() &^ nlaFNested
						od.Nested(func(pd *netlink.AttributeDecoder) error {
							for pd.Next() {
								if pd.Type()&^nlaFNested == unix.CTRL_ATTR_POLICY_DO {
									opDo[uint8(op)] = pd.Uint32()
								}
							}
							return nil
						})
					}
					return nil
				})
			case unix.CTRL_ATTR_POLICY:
				ad.Nested(func(pd *netlink.AttributeDecoder) error {
					for pd.Next() {
						idx := uint32(pd.Type() &^ nlaFNested)
						if pols[idx] == nil {
							pols[idx] = map[uint16]bool{}
						}
						pd.Nested(func(aad *netlink.AttributeDecoder) error {
							for aad.Next() {
								pols[idx][aad.Type()&^nlaFNested] = true
							}
							return nil
						})
					}
					return nil
				})
			}
		}
		if err := ad.Err(); err != nil {
			return nil, fmt.Errorf("decode policy dump: %w", err)
		}
	}
	out := map[uint8]map[uint16]bool{}
	for op, idx := range opDo {
		attrs := pols[idx]
		if attrs == nil {
			attrs = map[uint16]bool{}
		}
		out[op] = attrs
	}
	return out, nil
}
