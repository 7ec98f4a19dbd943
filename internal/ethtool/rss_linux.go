//go:build linux

package ethtool

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// maxIndir bounds a decoded indirection table (drivers use at most a few
// thousand entries).
const maxIndir = 1 << 16

// RSS returns dev's RSS configuration for context ctx (0: the default
// context) (RSS_GET, `ethtool -x`). HFuncNames is filled from the kernel's
// ETH_SS_RSS_HASH_FUNCS string set when it has one.
func (c *Client) RSS(dev Device, ctx uint32) (RSS, error) {
	msgs, err := c.do(request{cmd: unix.ETHTOOL_MSG_RSS_GET, dev: dev, encode: func(ae *netlink.AttributeEncoder) {
		if ctx != 0 {
			ae.Uint32(aRSSContext, ctx)
		}
	}})
	if err != nil {
		return RSS{}, err
	}
	b, err := oneReply("RSS_GET", msgs, msgRSSGetReply)
	if err != nil {
		return RSS{}, &Error{Family: family, Op: "RSS_GET", Target: dev.target(), Err: err}
	}
	r, err := decodeRSS(b)
	if err != nil {
		return RSS{}, &Error{Family: family, Op: "RSS_GET", Target: dev.target(), Err: err}
	}
	r.Context = ctx
	if names, err := c.StringSet(Device{}, ssRSSHashFuncs); err == nil {
		r.HFuncNames = make(map[uint32]string, len(names))
		for i, n := range names {
			if i < 32 {
				r.HFuncNames[1<<uint(i)] = n
			}
		}
	}
	return r, nil
}

// RSSHashFuncs returns the kernel's RSS hash function names by bit
// (ETH_SS_RSS_HASH_FUNCS): bit 1<<i is names[i].
func (c *Client) RSSHashFuncs() ([]string, error) {
	return c.StringSet(Device{}, ssRSSHashFuncs)
}

// SetRSS changes what cfg sets in RSS context cfg.Context (RSS_SET,
// `ethtool -X`); the kernel keeps the rest. Kernels before RSS_SET existed
// (Linux 6.17) get the ETHTOOL_SRSSH ioctl instead, which sets all but
// the hashed fields (FlowHash: an error matching ErrNotSupported).
func (c *Client) SetRSS(dev Device, cfg RSSConfig) error {
	if len(cfg.Indir) > maxIndir {
		return &Error{Family: family, Op: "RSS_SET", Target: dev.target(), Attr: "ETHTOOL_A_RSS_INDIR",
			Err: fmt.Errorf("indirection table of %d entries is too large", len(cfg.Indir))}
	}
	if !c.Supports(msgRSSSet) {
		// Before Linux 6.17: the ioctl ethtool -X uses.
		return setRSSIoctl(dev, cfg)
	}
	_, err := c.do(request{cmd: msgRSSSet, dev: dev, encode: encodeRSSSet(cfg)})
	return err
}

func encodeRSSSet(cfg RSSConfig) func(*netlink.AttributeEncoder) {
	return func(ae *netlink.AttributeEncoder) {
		if cfg.Context != 0 {
			ae.Uint32(aRSSContext, cfg.Context)
		}
		putU32(ae, aRSSHFunc, cfg.HFunc)
		if cfg.Indir != nil {
			b := make([]byte, 4*len(cfg.Indir))
			for i, q := range cfg.Indir {
				binary.NativeEndian.PutUint32(b[4*i:], q)
			}
			ae.Bytes(aRSSIndir, b)
		}
		if cfg.Key != nil {
			ae.Bytes(aRSSHKey, cfg.Key)
		}
		putU32(ae, aRSSInputXfrm, cfg.InputXfrm)
		if cfg.FlowHash != nil {
			types := make([]int, 0, len(cfg.FlowHash))
			for f := range cfg.FlowHash {
				types = append(types, int(f))
			}
			sort.Ints(types)
			ae.Nested(aRSSFlowHash, func(nae *netlink.AttributeEncoder) error {
				for _, f := range types {
					nae.Uint32(uint16(f), uint32(cfg.FlowHash[FlowType(f)]))
				}
				return nil
			})
		}
	}
}

// decodeRSS decodes an RSS_GET reply or RSS_NTF.
func decodeRSS(b []byte) (RSS, error) {
	var r RSS
	ad, err := newDecoder(b)
	if err != nil {
		return r, decodeError("RSS_GET", err)
	}
	for ad.Next() {
		switch ad.Type() {
		case aRSSContext:
			r.Context = ad.Uint32()
		case aRSSHFunc:
			r.HFunc = ad.Uint32()
		case aRSSIndir:
			raw := ad.Bytes()
			if len(raw)%4 != 0 || len(raw)/4 > maxIndir {
				return RSS{}, decodeError("RSS_GET", fmt.Errorf("indirection table of %d bytes", len(raw)))
			}
			r.Indir = make([]uint32, len(raw)/4)
			for i := range r.Indir {
				r.Indir[i] = binary.NativeEndian.Uint32(raw[4*i:])
			}
		case aRSSHKey:
			r.Key = ad.Bytes()
		case aRSSInputXfrm:
			r.InputXfrm = ad.Uint32()
		case aRSSFlowHash:
			r.FlowHash = map[FlowType]HashFields{}
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				for nad.Next() {
					r.FlowHash[FlowType(nad.Type())] = HashFields(nad.Uint32())
				}
				return nil
			})
		}
	}
	if err := ad.Err(); err != nil {
		return RSS{}, decodeError("RSS_GET", err)
	}
	return r, nil
}

// CreateRSSContext creates an additional RSS context on dev with the
// settings of cfg (RSS_CREATE_ACT, `ethtool -X DEV context new …`) and
// returns its number. cfg.Context 0 lets the kernel choose the number.
// Drivers without additional contexts give an error matching
// ErrNotSupported.
func (c *Client) CreateRSSContext(dev Device, cfg RSSConfig) (uint32, error) {
	msgs, err := c.do(request{cmd: msgRSSCreateAct, dev: dev, encode: encodeRSSSet(cfg)})
	if err != nil {
		return 0, err
	}
	b, err := oneReply("RSS_CREATE_ACT", msgs, msgRSSCreateActReply)
	if err != nil {
		return 0, &Error{Family: family, Op: "RSS_CREATE_ACT", Target: dev.target(), Err: err}
	}
	r, err := decodeRSS(b)
	if err != nil {
		return 0, &Error{Family: family, Op: "RSS_CREATE_ACT", Target: dev.target(), Err: err}
	}
	if r.Context == 0 {
		return 0, &Error{Family: family, Op: "RSS_CREATE_ACT", Target: dev.target(), Err: fmt.Errorf("reply names no context")}
	}
	return r.Context, nil
}

// DeleteRSSContext deletes RSS context ctx (not 0) of dev (RSS_DELETE_ACT,
// `ethtool -X DEV context N delete`).
func (c *Client) DeleteRSSContext(dev Device, ctx uint32) error {
	if ctx == 0 {
		return &Error{Family: family, Op: "RSS_DELETE_ACT", Target: dev.target(), Attr: "ETHTOOL_A_RSS_CONTEXT", Err: fmt.Errorf("context 0 is the default one and cannot be deleted")}
	}
	_, err := c.do(request{cmd: msgRSSDeleteAct, dev: dev, encode: func(ae *netlink.AttributeEncoder) {
		ae.Uint32(aRSSContext, ctx)
	}})
	return err
}

// RSSContexts returns the RSS configuration of every context of dev, the
// default one (0) first (an RSS_GET dump, `ethtool -x DEV` plus each
// `context N`). Drivers without RSS give an error matching ErrNotSupported.
func (c *Client) RSSContexts(dev Device) ([]RSS, error) {
	msgs, err := c.do(request{cmd: unix.ETHTOOL_MSG_RSS_GET, dev: dev, dump: true})
	if err != nil {
		return nil, err
	}
	out := make([]RSS, 0, len(msgs))
	for _, m := range msgs {
		if m.Header.Command != msgRSSGetReply {
			continue
		}
		r, err := decodeRSS(m.Data)
		if err != nil {
			return nil, &Error{Family: family, Op: "RSS_GET", Target: dev.target(), Err: err}
		}
		if !sameDevice(dev, replyDevice(m.Data)) {
			continue // the kernel filters by the header's device; be sure
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		// The kernel skips devices without RSS in a dump.
		return nil, &Error{Family: family, Op: "RSS_GET", Target: dev.target(), NotSupported: true,
			Missing: "RSS contexts on " + dev.String() + " (the dump returned none)", Err: unix.EOPNOTSUPP}
	}
	return out, nil
}

// replyDevice returns the device named by a reply's header.
func replyDevice(b []byte) Device {
	ad, err := newDecoder(b)
	if err != nil {
		return Device{}
	}
	for ad.Next() {
		if ad.Type() == headerAttr {
			return decodeHeader(ad)
		}
	}
	return Device{}
}

// sameDevice reports whether reply header h can be the device want names.
func sameDevice(want, h Device) bool {
	if want.Index > 0 && h.Index > 0 && want.Index != h.Index {
		return false
	}
	if want.Name != "" && h.Name != "" && want.Name != h.Name {
		return false
	}
	return true
}
