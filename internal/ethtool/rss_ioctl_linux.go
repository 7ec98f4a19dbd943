//go:build linux

package ethtool

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernels before Linux 6.17 have no ETHTOOL_MSG_RSS_SET; there the RSS
// table, key, hash function and input transformation are set with the
// ETHTOOL_SRSSH ioctl, as ethtool -X does. Its buffer is struct
// ethtool_rxfh: cmd, rss_context, indir_size, key_size (u32 each), hfunc,
// input_xfrm, two reserved bytes and a reserved u32, then the table
// (indir_size u32) and the key (key_size bytes).
const (
	rxfhHeader = 24
	// rxfhIndirNoChange (ETH_RXFH_INDIR_NO_CHANGE) as indir_size keeps the
	// table; 0 resets it to the driver's default.
	rxfhIndirNoChange = 0xffffffff
	// rxhXfrmNoChange (RXH_XFRM_NO_CHANGE) keeps the input transformation;
	// hfunc 0 (ETH_RSS_HASH_NO_CHANGE) keeps the hash function.
	rxhXfrmNoChange = 0xff
)

// rxfhSizes asks the driver for its table and key sizes (ETHTOOL_GRSSH
// with empty buffers).
func rxfhSizes(dev Device, context uint32) (indir, key uint32, err error) {
	buf := make([]byte, rxfhHeader)
	binary.NativeEndian.PutUint32(buf[0:], unix.ETHTOOL_GRSSH)
	binary.NativeEndian.PutUint32(buf[4:], context)
	err = ethtoolIoctl(dev, "GRSSH", unsafe.Pointer(&buf[0]))
	runtime.KeepAlive(buf)
	if err != nil {
		return 0, 0, rxfhError(dev, "GRSSH", err)
	}
	return binary.NativeEndian.Uint32(buf[8:]), binary.NativeEndian.Uint32(buf[12:]), nil
}

// setRSSIoctl is SetRSS through ETHTOOL_SRSSH.
func setRSSIoctl(dev Device, cfg RSSConfig) error {
	const op = "SRSSH"
	if cfg.FlowHash != nil {
		return &Error{Family: family, Op: "RSS_SET", Target: dev.target(), Attr: "ETHTOOL_A_RSS_FLOW_HASH", NotSupported: true,
			Missing: "setting hashed fields with RSS (ETHTOOL_MSG_RSS_SET, Linux 6.17; use ethtool -N rx-flow-hash)", Err: unix.EOPNOTSUPP}
	}
	indirSize, keySize, err := rxfhSizes(dev, cfg.Context)
	if err != nil {
		return err
	}
	n := uint32(rxfhIndirNoChange)
	switch {
	case cfg.Indir == nil:
	case len(cfg.Indir) == 0:
		n = 0
	case uint32(len(cfg.Indir)) != indirSize:
		return &Error{Family: family, Op: op, Target: dev.target(), Attr: "indir_size",
			Err: fmt.Errorf("indirection table of %d entries: the device's has %d", len(cfg.Indir), indirSize)}
	default:
		n = indirSize
	}
	var k uint32
	if cfg.Key != nil {
		if uint32(len(cfg.Key)) != keySize {
			return &Error{Family: family, Op: op, Target: dev.target(), Attr: "key_size",
				Err: fmt.Errorf("hash key of %d bytes: the device's has %d", len(cfg.Key), keySize)}
		}
		k = keySize
	}
	var hfunc, xfrm byte = 0, rxhXfrmNoChange
	if cfg.HFunc != nil {
		if *cfg.HFunc > 0xff {
			return &Error{Family: family, Op: op, Target: dev.target(), Attr: "hfunc", Err: fmt.Errorf("hash function bits %#x do not fit the ioctl's byte", *cfg.HFunc)}
		}
		hfunc = byte(*cfg.HFunc)
	}
	if cfg.InputXfrm != nil {
		if *cfg.InputXfrm >= rxhXfrmNoChange {
			return &Error{Family: family, Op: op, Target: dev.target(), Attr: "input_xfrm", Err: fmt.Errorf("input transformation %#x does not fit the ioctl's byte", *cfg.InputXfrm)}
		}
		xfrm = byte(*cfg.InputXfrm)
	}
	entries := n
	if n == rxfhIndirNoChange {
		entries = 0
	}
	buf := make([]byte, rxfhHeader+4*int(entries)+int(k))
	binary.NativeEndian.PutUint32(buf[0:], unix.ETHTOOL_SRSSH)
	binary.NativeEndian.PutUint32(buf[4:], cfg.Context)
	binary.NativeEndian.PutUint32(buf[8:], n)
	binary.NativeEndian.PutUint32(buf[12:], k)
	buf[16], buf[17] = hfunc, xfrm
	for i := 0; i < int(entries); i++ {
		binary.NativeEndian.PutUint32(buf[rxfhHeader+4*i:], cfg.Indir[i])
	}
	copy(buf[rxfhHeader+4*int(entries):], cfg.Key)
	err = ethtoolIoctl(dev, op, unsafe.Pointer(&buf[0]))
	runtime.KeepAlive(buf)
	if err != nil {
		return rxfhError(dev, op, err)
	}
	return nil
}

// rxfhError wraps an RSS ioctl's errno, naming what is missing when it
// means "not supported".
func rxfhError(dev Device, op string, err error) error {
	errno, ok := err.(unix.Errno)
	if !ok {
		return err
	}
	e := &Error{Family: family, Op: op, Target: dev.target(), Err: errno}
	if errno == unix.EOPNOTSUPP {
		e.NotSupported = true
		e.Missing = "RSS configuration by the driver of " + dev.String()
	}
	return e
}
