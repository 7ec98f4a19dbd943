//go:build linux

package ethtool

import (
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// coalesceU32 maps each u32 ETHTOOL_A_COALESCE_* attribute to its field.
var coalesceU32 = []struct {
	typ   uint16
	field func(*Coalesce) **uint32
}{
	{unix.ETHTOOL_A_COALESCE_RX_USECS, func(c *Coalesce) **uint32 { return &c.RXUsecs }},
	{unix.ETHTOOL_A_COALESCE_RX_MAX_FRAMES, func(c *Coalesce) **uint32 { return &c.RXMaxFrames }},
	{unix.ETHTOOL_A_COALESCE_RX_USECS_IRQ, func(c *Coalesce) **uint32 { return &c.RXUsecsIRQ }},
	{unix.ETHTOOL_A_COALESCE_RX_MAX_FRAMES_IRQ, func(c *Coalesce) **uint32 { return &c.RXMaxFramesIRQ }},
	{unix.ETHTOOL_A_COALESCE_TX_USECS, func(c *Coalesce) **uint32 { return &c.TXUsecs }},
	{unix.ETHTOOL_A_COALESCE_TX_MAX_FRAMES, func(c *Coalesce) **uint32 { return &c.TXMaxFrames }},
	{unix.ETHTOOL_A_COALESCE_TX_USECS_IRQ, func(c *Coalesce) **uint32 { return &c.TXUsecsIRQ }},
	{unix.ETHTOOL_A_COALESCE_TX_MAX_FRAMES_IRQ, func(c *Coalesce) **uint32 { return &c.TXMaxFramesIRQ }},
	{unix.ETHTOOL_A_COALESCE_STATS_BLOCK_USECS, func(c *Coalesce) **uint32 { return &c.StatsBlockUsecs }},
	{unix.ETHTOOL_A_COALESCE_PKT_RATE_LOW, func(c *Coalesce) **uint32 { return &c.PktRateLow }},
	{unix.ETHTOOL_A_COALESCE_RX_USECS_LOW, func(c *Coalesce) **uint32 { return &c.RXUsecsLow }},
	{unix.ETHTOOL_A_COALESCE_RX_MAX_FRAMES_LOW, func(c *Coalesce) **uint32 { return &c.RXMaxFramesLow }},
	{unix.ETHTOOL_A_COALESCE_TX_USECS_LOW, func(c *Coalesce) **uint32 { return &c.TXUsecsLow }},
	{unix.ETHTOOL_A_COALESCE_TX_MAX_FRAMES_LOW, func(c *Coalesce) **uint32 { return &c.TXMaxFramesLow }},
	{unix.ETHTOOL_A_COALESCE_PKT_RATE_HIGH, func(c *Coalesce) **uint32 { return &c.PktRateHigh }},
	{unix.ETHTOOL_A_COALESCE_RX_USECS_HIGH, func(c *Coalesce) **uint32 { return &c.RXUsecsHigh }},
	{unix.ETHTOOL_A_COALESCE_RX_MAX_FRAMES_HIGH, func(c *Coalesce) **uint32 { return &c.RXMaxFramesHigh }},
	{unix.ETHTOOL_A_COALESCE_TX_USECS_HIGH, func(c *Coalesce) **uint32 { return &c.TXUsecsHigh }},
	{unix.ETHTOOL_A_COALESCE_TX_MAX_FRAMES_HIGH, func(c *Coalesce) **uint32 { return &c.TXMaxFramesHigh }},
	{unix.ETHTOOL_A_COALESCE_RATE_SAMPLE_INTERVAL, func(c *Coalesce) **uint32 { return &c.RateSampleInterval }},
	{aCoalesceTXAggrMaxBytes, func(c *Coalesce) **uint32 { return &c.TXAggrMaxBytes }},
	{aCoalesceTXAggrMaxFrames, func(c *Coalesce) **uint32 { return &c.TXAggrMaxFrames }},
	{aCoalesceTXAggrTimeUsecs, func(c *Coalesce) **uint32 { return &c.TXAggrTimeUsecs }},
}

// coalesceBool maps each u8 (boolean) ETHTOOL_A_COALESCE_* attribute.
var coalesceBool = []struct {
	typ   uint16
	field func(*Coalesce) **bool
}{
	{unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_RX, func(c *Coalesce) **bool { return &c.UseAdaptiveRX }},
	{unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_TX, func(c *Coalesce) **bool { return &c.UseAdaptiveTX }},
	{unix.ETHTOOL_A_COALESCE_USE_CQE_MODE_TX, func(c *Coalesce) **bool { return &c.UseCQEModeTX }},
	{unix.ETHTOOL_A_COALESCE_USE_CQE_MODE_RX, func(c *Coalesce) **bool { return &c.UseCQEModeRX }},
}

// CoalesceAttrName returns the uapi name of a coalescing attribute
// (ETHTOOL_A_COALESCE_*), or "" for an unknown number.
func CoalesceAttrName(typ uint16) string { return coalesceTree.name(typ) }

// CoalesceSetAttrs lists the attribute numbers a SetCoalesce with c would
// send, in the order it sends them.
func CoalesceSetAttrs(c Coalesce) []uint16 {
	var out []uint16
	for _, a := range coalesceU32 {
		if *a.field(&c) != nil {
			out = append(out, a.typ)
		}
	}
	for _, a := range coalesceBool {
		if *a.field(&c) != nil {
			out = append(out, a.typ)
		}
	}
	if c.RXProfile != nil {
		out = append(out, aCoalesceRXProfile)
	}
	if c.TXProfile != nil {
		out = append(out, aCoalesceTXProfile)
	}
	return out
}

// Coalesce returns dev's interrupt coalescing parameters (COALESCE_GET,
// `ethtool -c`). Parameters the driver does not support are nil.
func (c *Client) Coalesce(dev Device) (Coalesce, error) {
	msgs, err := c.do(request{cmd: unix.ETHTOOL_MSG_COALESCE_GET, dev: dev})
	if err != nil {
		return Coalesce{}, err
	}
	b, err := oneReply("COALESCE_GET", msgs, msgCoalesceGetReply)
	if err != nil {
		return Coalesce{}, &Error{Family: family, Op: "COALESCE_GET", Target: dev.target(), Err: err}
	}
	co, err := decodeCoalesce(b)
	if err != nil {
		return Coalesce{}, &Error{Family: family, Op: "COALESCE_GET", Target: dev.target(), Err: err}
	}
	return co, nil
}

// SetCoalesce changes the non-nil parameters of cfg (COALESCE_SET,
// `ethtool -C`); the kernel keeps the others. A parameter the driver does
// not support fails with an error matching ErrNotSupported that names it.
func (c *Client) SetCoalesce(dev Device, cfg Coalesce) error {
	_, err := c.do(request{cmd: unix.ETHTOOL_MSG_COALESCE_SET, dev: dev, encode: encodeCoalesce(cfg)})
	return err
}

func encodeCoalesce(cfg Coalesce) func(*netlink.AttributeEncoder) {
	return func(ae *netlink.AttributeEncoder) {
		for _, a := range coalesceU32 {
			putU32(ae, a.typ, *a.field(&cfg))
		}
		for _, a := range coalesceBool {
			putU8Bool(ae, a.typ, *a.field(&cfg))
		}
		if cfg.RXProfile != nil {
			ae.Nested(aCoalesceRXProfile, encodeProfile(cfg.RXProfile))
		}
		if cfg.TXProfile != nil {
			ae.Nested(aCoalesceTXProfile, encodeProfile(cfg.TXProfile))
		}
	}
}

func encodeProfile(p []IRQModeration) func(*netlink.AttributeEncoder) error {
	return func(ae *netlink.AttributeEncoder) error {
		for _, m := range p {
			ae.Nested(aProfileIRQModeration, func(nae *netlink.AttributeEncoder) error {
				putU32(nae, aIRQModerationUsec, m.Usec)
				putU32(nae, aIRQModerationPkts, m.Pkts)
				putU32(nae, aIRQModerationComps, m.Comps)
				return nil
			})
		}
		return nil
	}
}

// decodeCoalesce decodes a COALESCE_GET reply or COALESCE_NTF.
func decodeCoalesce(b []byte) (Coalesce, error) {
	var co Coalesce
	ad, err := newDecoder(b)
	if err != nil {
		return co, decodeError("COALESCE_GET", err)
	}
	u32 := make(map[uint16]func(*Coalesce) **uint32, len(coalesceU32))
	for _, a := range coalesceU32 {
		u32[a.typ] = a.field
	}
	bools := make(map[uint16]func(*Coalesce) **bool, len(coalesceBool))
	for _, a := range coalesceBool {
		bools[a.typ] = a.field
	}
	for ad.Next() {
		t := ad.Type()
		if f, ok := u32[t]; ok {
			*f(&co) = u32p(ad.Uint32())
			continue
		}
		if f, ok := bools[t]; ok {
			*f(&co) = boolp(ad.Uint8() != 0)
			continue
		}
		switch t {
		case aCoalesceRXProfile:
			ad.Nested(decodeProfile(&co.RXProfile))
		case aCoalesceTXProfile:
			ad.Nested(decodeProfile(&co.TXProfile))
		}
	}
	if err := ad.Err(); err != nil {
		return Coalesce{}, decodeError("COALESCE_GET", err)
	}
	return co, nil
}

func decodeProfile(out *[]IRQModeration) func(*netlink.AttributeDecoder) error {
	return func(ad *netlink.AttributeDecoder) error {
		p := []IRQModeration{}
		for ad.Next() {
			if ad.Type() != aProfileIRQModeration {
				continue
			}
			var m IRQModeration
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				for nad.Next() {
					switch nad.Type() {
					case aIRQModerationUsec:
						m.Usec = u32p(nad.Uint32())
					case aIRQModerationPkts:
						m.Pkts = u32p(nad.Uint32())
					case aIRQModerationComps:
						m.Comps = u32p(nad.Uint32())
					}
				}
				return nil
			})
			p = append(p, m)
		}
		if len(p) > 64 {
			return fmt.Errorf("DIM profile with %d entries", len(p))
		}
		*out = p
		return nil
	}
}
