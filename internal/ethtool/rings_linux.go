//go:build linux

package ethtool

import (
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Rings returns dev's ring sizes and options (RINGS_GET, `ethtool -g`).
func (c *Client) Rings(dev Device) (Rings, error) {
	msgs, err := c.do(request{cmd: unix.ETHTOOL_MSG_RINGS_GET, dev: dev})
	if err != nil {
		return Rings{}, err
	}
	b, err := oneReply("RINGS_GET", msgs, msgRingsGetReply)
	if err != nil {
		return Rings{}, &Error{Family: family, Op: "RINGS_GET", Target: dev.target(), Err: err}
	}
	r, err := decodeRings(b)
	if err != nil {
		return Rings{}, &Error{Family: family, Op: "RINGS_GET", Target: dev.target(), Err: err}
	}
	return r, nil
}

// SetRings changes the ring parameters set in cfg (RINGS_SET,
// `ethtool -G`); the kernel keeps the others.
func (c *Client) SetRings(dev Device, cfg RingsConfig) error {
	_, err := c.do(request{cmd: unix.ETHTOOL_MSG_RINGS_SET, dev: dev, encode: encodeRings(cfg)})
	return err
}

func encodeRings(cfg RingsConfig) func(*netlink.AttributeEncoder) {
	return func(ae *netlink.AttributeEncoder) {
		putU32(ae, unix.ETHTOOL_A_RINGS_RX, cfg.RX)
		putU32(ae, unix.ETHTOOL_A_RINGS_RX_MINI, cfg.RXMini)
		putU32(ae, unix.ETHTOOL_A_RINGS_RX_JUMBO, cfg.RXJumbo)
		putU32(ae, unix.ETHTOOL_A_RINGS_TX, cfg.TX)
		putU32(ae, unix.ETHTOOL_A_RINGS_RX_BUF_LEN, cfg.RXBufLen)
		if cfg.TCPDataSplit != nil {
			ae.Uint8(unix.ETHTOOL_A_RINGS_TCP_DATA_SPLIT, uint8(*cfg.TCPDataSplit))
		}
		putU32(ae, unix.ETHTOOL_A_RINGS_CQE_SIZE, cfg.CQESize)
		putU8Bool(ae, unix.ETHTOOL_A_RINGS_TX_PUSH, cfg.TXPush)
		putU8Bool(ae, unix.ETHTOOL_A_RINGS_RX_PUSH, cfg.RXPush)
		putU32(ae, unix.ETHTOOL_A_RINGS_TX_PUSH_BUF_LEN, cfg.TXPushBufLen)
		putU32(ae, unix.ETHTOOL_A_RINGS_HDS_THRESH, cfg.HDSThresh)
	}
}

// decodeRings decodes the attributes of a RINGS_GET reply or RINGS_NTF.
func decodeRings(b []byte) (Rings, error) {
	var r Rings
	ad, err := newDecoder(b)
	if err != nil {
		return r, decodeError("RINGS_GET", err)
	}
	for ad.Next() {
		switch ad.Type() {
		case unix.ETHTOOL_A_RINGS_RX_MAX:
			r.RXMax = ad.Uint32()
		case unix.ETHTOOL_A_RINGS_RX_MINI_MAX:
			r.RXMiniMax = ad.Uint32()
		case unix.ETHTOOL_A_RINGS_RX_JUMBO_MAX:
			r.RXJumboMax = ad.Uint32()
		case unix.ETHTOOL_A_RINGS_TX_MAX:
			r.TXMax = ad.Uint32()
		case unix.ETHTOOL_A_RINGS_RX:
			r.RX = ad.Uint32()
		case unix.ETHTOOL_A_RINGS_RX_MINI:
			r.RXMini = ad.Uint32()
		case unix.ETHTOOL_A_RINGS_RX_JUMBO:
			r.RXJumbo = ad.Uint32()
		case unix.ETHTOOL_A_RINGS_TX:
			r.TX = ad.Uint32()
		case unix.ETHTOOL_A_RINGS_RX_BUF_LEN:
			r.RXBufLen = ad.Uint32()
		case unix.ETHTOOL_A_RINGS_TCP_DATA_SPLIT:
			r.TCPDataSplit = TCPDataSplit(ad.Uint8())
		case unix.ETHTOOL_A_RINGS_CQE_SIZE:
			r.CQESize = ad.Uint32()
		case unix.ETHTOOL_A_RINGS_TX_PUSH:
			r.TXPush = ad.Uint8() != 0
		case unix.ETHTOOL_A_RINGS_RX_PUSH:
			r.RXPush = ad.Uint8() != 0
		case unix.ETHTOOL_A_RINGS_TX_PUSH_BUF_LEN:
			r.TXPushBufLen = ad.Uint32()
		case unix.ETHTOOL_A_RINGS_TX_PUSH_BUF_LEN_MAX:
			r.TXPushBufLenMax = ad.Uint32()
		case unix.ETHTOOL_A_RINGS_HDS_THRESH:
			r.HDSThresh = ad.Uint32()
		case unix.ETHTOOL_A_RINGS_HDS_THRESH_MAX:
			r.HDSThreshMax = ad.Uint32()
		}
	}
	if err := ad.Err(); err != nil {
		return Rings{}, decodeError("RINGS_GET", err)
	}
	return r, nil
}
