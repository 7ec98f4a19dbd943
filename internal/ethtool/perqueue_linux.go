//go:build linux

package ethtool

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Per-queue coalescing exists only as the ETHTOOL_PERQUEUE ioctl (there is
// no netlink message for it). Its payload is struct ethtool_per_queue_op:
// cmd, sub_command, a 4096-bit queue mask, then one struct
// ethtool_coalesce (23 u32: cmd and 22 parameters) per queue in the mask,
// in ascending queue order.
const (
	// MaxQueueCoalesce is the number of queues the per-queue ioctl can
	// address (MAX_NUM_QUEUE).
	MaxQueueCoalesce = 4096
	maskWords        = MaxQueueCoalesce / 32
	legacyWords      = 23 // sizeof(struct ethtool_coalesce) / 4
)

// legacyAttr returns, for parameter i (1..22) of struct ethtool_coalesce,
// its ETHTOOL_A_COALESCE_* attribute: the netlink attributes 2..23 follow
// the struct's field order.
func legacyAttr(i int) uint16 { return uint16(i + 1) }

// legacyAccess maps struct ethtool_coalesce's words to Coalesce fields.
func legacyAccess() (u32 map[int]func(*Coalesce) **uint32, b map[int]func(*Coalesce) **bool) {
	u32, b = map[int]func(*Coalesce) **uint32{}, map[int]func(*Coalesce) **bool{}
	for i := 1; i < legacyWords; i++ {
		for _, a := range coalesceU32 {
			if a.typ == legacyAttr(i) {
				u32[i] = a.field
			}
		}
		for _, a := range coalesceBool {
			if a.typ == legacyAttr(i) {
				b[i] = a.field
			}
		}
	}
	return u32, b
}

// QueueCoalesce returns the coalescing parameters of each queue in queues
// (strictly ascending, below MaxQueueCoalesce), as `ethtool -Q DEV
// queue_mask M --show-coalesce` shows them. Parameters the driver does not
// support for the device (COALESCE_GET's set) are nil.
func (c *Client) QueueCoalesce(dev Device, queues []int) ([]Coalesce, error) {
	supported, err := c.Coalesce(dev)
	if err != nil {
		return nil, err
	}
	words, err := perQueue(dev, unix.ETHTOOL_GCOALESCE, queues, nil)
	if err != nil {
		return nil, err
	}
	u32, b := legacyAccess()
	out := make([]Coalesce, len(queues))
	for q := range queues {
		w := words[q*legacyWords : (q+1)*legacyWords]
		for i := 1; i < legacyWords; i++ {
			if f, ok := u32[i]; ok && *f(&supported) != nil {
				*f(&out[q]) = u32p(w[i])
			}
			if f, ok := b[i]; ok && *f(&supported) != nil {
				*f(&out[q]) = boolp(w[i] != 0)
			}
		}
	}
	return out, nil
}

// SetQueueCoalesce changes the non-nil parameters of cfg on each queue in
// queues and keeps the others: it reads each queue's parameters, applies
// cfg and writes them back (as `ethtool -Q … --coalesce` does). The ioctl
// has no CQE modes, TX aggregation or DIM profiles: setting those fails
// with ErrNotSupported, as does a parameter the driver does not support.
func (c *Client) SetQueueCoalesce(dev Device, queues []int, cfg Coalesce) error {
	const op = "PERQUEUE_SCOALESCE"
	for _, a := range CoalesceSetAttrs(cfg) {
		if a > legacyAttr(legacyWords-1) {
			return &Error{Family: family, Op: op, Target: dev.target(), NotSupported: true, Attr: CoalesceAttrName(a),
				Missing: "per-queue " + CoalesceAttrName(a) + " (the ETHTOOL_PERQUEUE ioctl has no such field)", Err: unix.EOPNOTSUPP}
		}
	}
	supported, err := c.Coalesce(dev)
	if err != nil {
		return err
	}
	have := map[uint16]bool{}
	for _, a := range CoalesceSetAttrs(supported) {
		have[a] = true
	}
	for _, a := range CoalesceSetAttrs(cfg) {
		if !have[a] {
			return &Error{Family: family, Op: op, Target: dev.target(), NotSupported: true, Attr: CoalesceAttrName(a),
				Missing: "coalescing parameter " + CoalesceAttrName(a), Err: unix.EOPNOTSUPP}
		}
	}
	words, err := perQueue(dev, unix.ETHTOOL_GCOALESCE, queues, nil)
	if err != nil {
		return err
	}
	u32, b := legacyAccess()
	for q := range queues {
		w := words[q*legacyWords : (q+1)*legacyWords]
		for i := 1; i < legacyWords; i++ {
			if f, ok := u32[i]; ok && *f(&cfg) != nil {
				w[i] = **f(&cfg)
			}
			if f, ok := b[i]; ok && *f(&cfg) != nil {
				w[i] = 0
				if **f(&cfg) {
					w[i] = 1
				}
			}
		}
	}
	_, err = perQueue(dev, unix.ETHTOOL_SCOALESCE, queues, words)
	return err
}

// perQueue runs one ETHTOOL_PERQUEUE ioctl with sub-command sub over
// queues, sending data (legacyWords per queue) and returning what the
// kernel left in the buffer.
func perQueue(dev Device, sub uint32, queues []int, data []uint32) ([]uint32, error) {
	op := "PERQUEUE_GCOALESCE"
	if sub == unix.ETHTOOL_SCOALESCE {
		op = "PERQUEUE_SCOALESCE"
	}
	if len(queues) == 0 {
		return nil, &Error{Family: family, Op: op, Target: dev.target(), Err: fmt.Errorf("no queues given")}
	}
	for i, q := range queues {
		if q < 0 || q >= MaxQueueCoalesce || i > 0 && q <= queues[i-1] {
			return nil, &Error{Family: family, Op: op, Target: dev.target(), Err: fmt.Errorf("queues %v: want strictly ascending queue numbers below %d", queues, MaxQueueCoalesce)}
		}
	}
	buf := make([]uint32, 2+maskWords+legacyWords*len(queues))
	buf[0] = unix.ETHTOOL_PERQUEUE
	buf[1] = sub
	for _, q := range queues {
		buf[2+q/32] |= 1 << (uint(q) % 32)
	}
	body := buf[2+maskWords:]
	if data != nil {
		copy(body, data)
	}
	for q := range queues {
		if body[q*legacyWords] == 0 {
			body[q*legacyWords] = sub // each struct's own cmd
		}
	}
	err := ethtoolIoctl(dev, op, unsafe.Pointer(&buf[0]))
	runtime.KeepAlive(buf)
	if errno, ok := err.(unix.Errno); ok {
		e := &Error{Family: family, Op: op, Target: dev.target(), Err: errno}
		if errno == unix.EOPNOTSUPP {
			e.NotSupported = true
			e.Missing = "per-queue coalescing (ETHTOOL_PERQUEUE) by the driver of " + dev.String()
		}
		return nil, e
	}
	if err != nil {
		return nil, err
	}
	return append([]uint32(nil), body...), nil
}
