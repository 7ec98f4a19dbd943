package netdev

import (
	"fmt"
	"strconv"
	"time"

	"github.com/xdpio/xdpio/internal/errs"
	"github.com/xdpio/xdpio/internal/genl"
)

// FamilyName is the generic netlink family this package speaks.
const FamilyName = "netdev"

// Operations of the netdev family (NETDEV_CMD_*).
const (
	CmdDevGet       = 1
	CmdDevAddNtf    = 2
	CmdDevDelNtf    = 3
	CmdDevChangeNtf = 4
	CmdQueueGet     = 10
	CmdNAPIGet      = 11
	CmdQStatsGet    = 12
	CmdNAPISet      = 14
)

// Attributes of the "dev" set (NETDEV_A_DEV_*).
const (
	AttrDevIfindex               = 1
	AttrDevPad                   = 2
	AttrDevXDPFeatures           = 3
	AttrDevXDPZCMaxSegs          = 4
	AttrDevXDPRxMetadataFeatures = 5
	AttrDevXSKFeatures           = 6
)

// Attributes of the "napi" set (NETDEV_A_NAPI_*).
const (
	AttrNAPIIfindex           = 1
	AttrNAPIID                = 2
	AttrNAPIIRQ               = 3
	AttrNAPIPID               = 4
	AttrNAPIDeferHardIRQs     = 5
	AttrNAPIGROFlushTimeout   = 6
	AttrNAPIIRQSuspendTimeout = 7
	AttrNAPIThreaded          = 8
)

// Attributes of the "queue" set (NETDEV_A_QUEUE_*).
const (
	AttrQueueID      = 1
	AttrQueueIfindex = 2
	AttrQueueType    = 3
	AttrQueueNAPIID  = 4
	AttrQueueDMABuf  = 5
	AttrQueueIOUring = 6
	AttrQueueXSK     = 7
)

// Attributes of the "qstats" set that address a row (NETDEV_A_QSTATS_*);
// the counters are the Counter values.
const (
	AttrQStatsIfindex   = 1
	AttrQStatsQueueType = 2
	AttrQStatsQueueID   = 3
	AttrQStatsScope     = 4
)

// QStatsScopeQueue asks qstats-get for one row per queue.
const QStatsScopeQueue = 1

// MaxDeferHardIRQs is the largest defer-hard-irqs the kernel accepts
// (the policy's s32-max).
const MaxDeferHardIRQs = 1<<31 - 1

// XDP action features (NETDEV_XDP_ACT_*), bits of Dev.XDPFeatures.
const (
	XDPActBasic       = 1 << 0
	XDPActRedirect    = 1 << 1
	XDPActNDOXmit     = 1 << 2
	XDPActXSKZeroCopy = 1 << 3
	XDPActHWOffload   = 1 << 4
	XDPActRXSG        = 1 << 5
	XDPActNDOXmitSG   = 1 << 6
)

// XDP RX metadata features (NETDEV_XDP_RX_METADATA_*).
const (
	XDPRxMetadataTimestamp = 1 << 0
	XDPRxMetadataHash      = 1 << 1
	XDPRxMetadataVLANTag   = 1 << 2
)

// AF_XDP features (NETDEV_XSK_FLAGS_*).
const (
	XSKFlagTXTimestamp      = 1 << 0
	XSKFlagTXChecksum       = 1 << 1
	XSKFlagTXLaunchTimeFIFO = 1 << 2
)

// XDPActNames, XDPRxMetadataNames and XSKFlagNames spell the bits as the
// spec does, in bit order.
var (
	XDPActNames        = []string{"basic", "redirect", "ndo-xmit", "xsk-zerocopy", "hw-offload", "rx-sg", "ndo-xmit-sg"}
	XDPRxMetadataNames = []string{"timestamp", "hash", "vlan-tag"}
	XSKFlagNames       = []string{"tx-timestamp", "tx-checksum", "tx-launch-time-fifo"}
)

// FlagNames returns the names of the bits set in v, with "bit-N" for a
// bit names does not cover.
func FlagNames(v uint64, names []string) []string {
	out := []string{}
	for i := 0; i < 64; i++ {
		if v&(1<<i) == 0 {
			continue
		}
		if i < len(names) {
			out = append(out, names[i])
		} else {
			out = append(out, "bit-"+strconv.Itoa(i))
		}
	}
	return out
}

// Dev is a dev-get reply: what a device offers to XDP and AF_XDP.
type Dev struct {
	// Ifindex of the device.
	Ifindex int
	// XDPFeatures are the XDP action features (XDPAct* bits).
	XDPFeatures uint64
	// XDPZCMaxSegs is the most fragments a zero-copy frame may have; 0
	// when the kernel did not say.
	XDPZCMaxSegs uint32
	// XDPRxMetadataFeatures are the RX metadata kfuncs the driver
	// implements (XDPRxMetadata* bits).
	XDPRxMetadataFeatures uint64
	// XSKFeatures are the AF_XDP TX metadata features (XSKFlag* bits).
	XSKFeatures uint64
	// Unknown holds attributes this package does not know, by type.
	Unknown map[uint16][]byte
}

// QueueType is an RX or TX queue.
type QueueType uint32

// Queue types (NETDEV_QUEUE_TYPE_*).
const (
	QueueRX QueueType = 0
	QueueTX QueueType = 1
)

// String returns "rx", "tx" or "type-N".
func (t QueueType) String() string {
	switch t {
	case QueueRX:
		return "rx"
	case QueueTX:
		return "tx"
	}
	return "type-" + strconv.Itoa(int(t))
}

// Queue is a queue-get reply.
type Queue struct {
	Ifindex int
	// ID is the queue's index among the queues of its type.
	ID uint32
	// Type is RX or TX.
	Type QueueType
	// NAPIID is the NAPI instance that services the queue; 0 when none
	// (the kernel omits the attribute).
	NAPIID uint32
	// XSK reports that an AF_XDP socket is bound to the queue (the
	// kernel sends an empty xsk nest).
	XSK bool
	// DMABuf is the ID of a dmabuf bound to the queue, 0 when none.
	DMABuf uint32
	// IOUring reports an io_uring zero-copy receive provider on the queue.
	IOUring bool
}

// Threaded is the threaded mode of a NAPI instance (netdev.yaml's
// napi-threaded enum).
type Threaded uint32

// Threaded modes.
const (
	ThreadedDisabled Threaded = 0
	ThreadedEnabled  Threaded = 1
	ThreadedBusyPoll Threaded = 2
)

// String returns the spec's name of t.
func (t Threaded) String() string {
	switch t {
	case ThreadedDisabled:
		return "disabled"
	case ThreadedEnabled:
		return "enabled"
	case ThreadedBusyPoll:
		return "busy-poll"
	}
	return "threaded-" + strconv.Itoa(int(t))
}

// NAPIConfig holds the settable parameters of a NAPI instance. A nil field
// is absent: in a reply, the kernel did not send it; in SetNAPI, it stays
// as it is.
type NAPIConfig struct {
	// DeferHardIRQs is the number of consecutive empty polls before
	// hardware IRQs are re-enabled (0 … MaxDeferHardIRQs).
	DeferHardIRQs *uint32
	// GROFlushTimeout arms the NAPI watchdog that polls instead of an
	// IRQ (kernel unit: nanoseconds).
	GROFlushTimeout *time.Duration
	// IRQSuspendTimeout is how long IRQs stay suspended while a
	// busy-polling application keeps up (nanoseconds on the wire).
	IRQSuspendTimeout *time.Duration
	// Threaded is the NAPI's threaded mode.
	Threaded *Threaded
}

// NAPI is a napi-get reply.
type NAPI struct {
	// ID of the NAPI instance; unique in the system.
	ID uint32
	// Ifindex of the device the NAPI belongs to.
	Ifindex int
	// IRQ is the interrupt vector, -1 when none (the kernel omits it).
	IRQ int
	// PID of the NAPI's kernel thread, 0 when not threaded.
	PID int
	// NAPIConfig holds the settings; a nil field was not reported.
	NAPIConfig
	// Unknown holds attributes this package does not know, by type.
	Unknown map[uint16][]byte
}

// ErrNotSupported is matched (errors.Is) by every error that means the
// running kernel or the device's driver lacks an operation or attribute.
var ErrNotSupported = errs.ErrNotSupported

// family names the generic netlink family in errors.
const family = FamilyName

// Error is the error of one netdev request (Family "netdev", Op the
// operation as the spec names it, e.g. "napi-set", Target what the request
// addressed, e.g. "ifindex 3" or "napi 8193"). It wraps the kernel's errno
// (errors.Is(err, unix.ENOENT) works) and matches ErrNotSupported when
// NotSupported is set.
type Error = genl.Error

var opNames = map[uint8]string{
	CmdDevGet:    "dev-get",
	CmdQueueGet:  "queue-get",
	CmdNAPIGet:   "napi-get",
	CmdQStatsGet: "qstats-get",
	CmdNAPISet:   "napi-set",
}

// OpName returns the spec's name of operation cmd.
func OpName(cmd uint8) string {
	if n, ok := opNames[cmd]; ok {
		return n
	}
	return "op-" + strconv.Itoa(int(cmd))
}

var napiAttrNames = map[uint16]string{
	AttrNAPIIfindex: "ifindex", AttrNAPIID: "id", AttrNAPIIRQ: "irq", AttrNAPIPID: "pid",
	AttrNAPIDeferHardIRQs: "defer-hard-irqs", AttrNAPIGROFlushTimeout: "gro-flush-timeout",
	AttrNAPIIRQSuspendTimeout: "irq-suspend-timeout", AttrNAPIThreaded: "threaded",
}

// attrName names request attribute a of operation cmd.
func attrName(cmd uint8, a uint16) string {
	switch cmd {
	case CmdNAPIGet, CmdNAPISet:
		return NAPIAttrName(a)
	case CmdDevGet:
		if a == AttrDevIfindex {
			return "ifindex"
		}
	case CmdQueueGet:
		switch a {
		case AttrQueueID:
			return "id"
		case AttrQueueIfindex:
			return "ifindex"
		case AttrQueueType:
			return "type"
		}
	case CmdQStatsGet:
		switch a {
		case AttrQStatsIfindex:
			return "ifindex"
		case AttrQStatsScope:
			return "scope"
		}
	}
	return fmt.Sprintf("attr-%d", a)
}

// NAPIAttrName returns the spec's name of a napi attribute.
func NAPIAttrName(a uint16) string {
	if n, ok := napiAttrNames[a]; ok {
		return n
	}
	return fmt.Sprintf("attr-%d", a)
}

// attrs returns the napi attributes cfg sets.
func (cfg NAPIConfig) attrs() []uint16 {
	var a []uint16
	if cfg.DeferHardIRQs != nil {
		a = append(a, AttrNAPIDeferHardIRQs)
	}
	if cfg.GROFlushTimeout != nil {
		a = append(a, AttrNAPIGROFlushTimeout)
	}
	if cfg.IRQSuspendTimeout != nil {
		a = append(a, AttrNAPIIRQSuspendTimeout)
	}
	if cfg.Threaded != nil {
		a = append(a, AttrNAPIThreaded)
	}
	return a
}

// validate rejects what cannot be encoded. Range checks are the kernel's
// (its policy answers with an extack naming the attribute).
func (cfg NAPIConfig) validate() error {
	if cfg.GROFlushTimeout != nil && *cfg.GROFlushTimeout < 0 {
		return fmt.Errorf("invalid gro-flush-timeout %v: must not be negative", *cfg.GROFlushTimeout)
	}
	if cfg.IRQSuspendTimeout != nil && *cfg.IRQSuspendTimeout < 0 {
		return fmt.Errorf("invalid irq-suspend-timeout %v: must not be negative", *cfg.IRQSuspendTimeout)
	}
	return nil
}
