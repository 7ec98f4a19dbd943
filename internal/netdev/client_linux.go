//go:build linux

package netdev

import (
	"fmt"
	"sync"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"github.com/xdpio/xdpio/internal/genl"
	"golang.org/x/sys/unix"
)

// Client talks to the netdev generic-netlink family in the network
// namespace of the thread that called Dial. It is safe for concurrent use.
// Close, Family and Supports (whether the kernel lists an operation, in
// the direction the family lists it) come from the embedded genl.Conn.
type Client struct {
	*genl.Conn

	netns uint64 // inode of the socket's network namespace

	polOnce sync.Once
	policy  map[uint8]map[uint16]bool // op → request attributes its "do" accepts
	polErr  error
}

const missingFamily = `generic netlink family "netdev" (Linux 6.3 or later)`

// Dial opens a generic netlink socket in the calling thread's network
// namespace and looks up the netdev family. It returns an error matching
// ErrNotSupported when the kernel has no netdev family (before 6.3).
func Dial() (*Client, error) {
	c, err := genl.Dial(FamilyName, missingFamily)
	if err != nil {
		return nil, err
	}
	return &Client{Conn: c, netns: socketNetNS(c)}, nil
}

// NewClient wraps an open generic netlink connection and looks up the
// netdev family on it. The Client owns c.
func NewClient(c *genetlink.Conn) (*Client, error) {
	gc, err := genl.Open(c, FamilyName, missingFamily)
	if err != nil {
		return nil, err
	}
	return &Client{Conn: gc, netns: socketNetNS(gc)}, nil
}

// socketNetNS returns the inode of the network namespace c's socket lives
// in (SIOCGSKNS), or of the calling thread's when the socket cannot say.
func socketNetNS(c *genl.Conn) uint64 {
	var ino uint64
	if rc, err := c.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			nsfd, err := unix.IoctlRetInt(int(fd), unix.SIOCGSKNS)
			if err != nil {
				return
			}
			var st unix.Stat_t
			if unix.Fstat(nsfd, &st) == nil {
				ino = st.Ino
			}
			unix.Close(nsfd)
		})
	}
	if ino == 0 {
		var st unix.Stat_t
		if unix.Stat("/proc/thread-self/ns/net", &st) == nil {
			ino = st.Ino
		}
	}
	return ino
}

// NetNS returns the inode number of the network namespace the client
// talks to (its socket's), which identifies the namespace while it lives.
func (c *Client) NetNS() uint64 { return c.netns }

// SupportsAttr reports whether the kernel's policy for a "do" request of
// cmd accepts attribute attr: e.g. SupportsAttr(CmdNAPISet,
// AttrNAPIThreaded). It is false when the operation is missing. When the
// kernel cannot dump its policies, it reports true (the kernel will then
// reject what it lacks).
func (c *Client) SupportsAttr(cmd uint8, attr uint16) bool {
	if !c.Supports(cmd) {
		return false
	}
	pol, err := c.policies()
	if err != nil || pol == nil {
		return true
	}
	attrs, ok := pol[cmd]
	if !ok {
		return true // the op has no do policy listed: let the kernel decide
	}
	return attrs[attr]
}

// policies dumps the family's request policies once.
func (c *Client) policies() (map[uint8]map[uint16]bool, error) {
	c.polOnce.Do(func() {
		if c.Ops == nil {
			return // a test server: no controller policy to ask
		}
		ae := netlink.NewAttributeEncoder()
		ae.Uint16(unix.CTRL_ATTR_FAMILY_ID, c.Family().ID)
		b, err := ae.Encode()
		if err != nil {
			c.polErr = err
			return
		}
		msgs, err := c.Execute(genetlink.Message{
			Header: genetlink.Header{Command: unix.CTRL_CMD_GETPOLICY, Version: 1}, Data: b,
		}, unix.GENL_ID_CTRL, netlink.Request|netlink.Dump)
		if err != nil {
			c.polErr = err
			return
		}
		datas := make([][]byte, len(msgs))
		for i, m := range msgs {
			datas[i] = m.Data
		}
		c.policy, c.polErr = decodePolicyDump(datas)
	})
	return c.policy, c.polErr
}

// check is the one place that decides ErrNotSupported before a request is
// sent: the operation must be in the family's list and each attribute in
// its policy.
func (c *Client) check(cmd uint8, target string, attrs ...uint16) error {
	if !c.Supports(cmd) {
		return &Error{Family: family, Op: OpName(cmd), Target: target, NotSupported: true,
			Missing: "the running kernel has no netdev " + OpName(cmd) + " operation", Err: unix.EOPNOTSUPP}
	}
	for _, a := range attrs {
		if !c.SupportsAttr(cmd, a) {
			name := attrName(cmd, a)
			return &Error{Family: family, Op: OpName(cmd), Target: target, NotSupported: true,
				Missing: "the running kernel's " + OpName(cmd) + " does not accept " + name, Err: unix.EOPNOTSUPP}
		}
	}
	return nil
}

// request is one netdev request.
type request struct {
	cmd    uint8
	target string
	dump   bool
	encode func(ae *netlink.AttributeEncoder)
}

// do sends r and returns the payloads of the replies.
func (c *Client) do(r request) ([][]byte, error) {
	ae := netlink.NewAttributeEncoder()
	if r.encode != nil {
		r.encode(ae)
	}
	data, err := ae.Encode()
	if err != nil {
		return nil, &Error{Family: family, Op: OpName(r.cmd), Target: r.target, Err: fmt.Errorf("encode request: %w", err)}
	}
	msgs, err := c.Do(r.cmd, 1, data, r.dump)
	if err != nil {
		return nil, wrapKernelError(r.cmd, r.target, data, err)
	}
	out := make([][]byte, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, m.Data)
	}
	return out, nil
}

// wrapKernelError turns a netlink error into an *Error with the kernel's
// extack text (genl.KernelError, naming a top-level request attribute);
// EOPNOTSUPP from the kernel (a driver without the feature) also means
// ErrNotSupported.
func wrapKernelError(cmd uint8, target string, req []byte, err error) error {
	e := genl.KernelError(family, OpName(cmd), target, req, err, func(req []byte, off int) string {
		if a := attrAt(req, off); a != 0 {
			return attrName(cmd, a)
		}
		return ""
	})
	if e.NotSupported {
		e.Missing = "the device's driver does not implement " + e.Op
	}
	return e
}

func ifTarget(ifindex int) string { return fmt.Sprintf("ifindex %d", ifindex) }

// Dev returns what device ifindex offers to XDP and AF_XDP (dev-get).
func (c *Client) Dev(ifindex int) (Dev, error) {
	t := ifTarget(ifindex)
	if ifindex <= 0 {
		return Dev{}, &Error{Family: family, Op: OpName(CmdDevGet), Target: t, Err: unix.EINVAL, Message: "ifindex must be positive"}
	}
	if err := c.check(CmdDevGet, t); err != nil {
		return Dev{}, err
	}
	rs, err := c.do(request{cmd: CmdDevGet, target: t, encode: func(ae *netlink.AttributeEncoder) {
		ae.Uint32(AttrDevIfindex, uint32(ifindex))
	}})
	if err != nil {
		return Dev{}, err
	}
	if len(rs) != 1 {
		return Dev{}, &Error{Family: family, Op: OpName(CmdDevGet), Target: t, Err: fmt.Errorf("got %d replies, want 1", len(rs))}
	}
	d, err := DecodeDev(rs[0])
	if err != nil {
		return Dev{}, &Error{Family: family, Op: OpName(CmdDevGet), Target: t, Err: err}
	}
	return d, nil
}

// Devs returns every device of the namespace (dev-get dump).
func (c *Client) Devs() ([]Dev, error) {
	if err := c.check(CmdDevGet, ""); err != nil {
		return nil, err
	}
	rs, err := c.do(request{cmd: CmdDevGet, dump: true})
	if err != nil {
		return nil, err
	}
	out := make([]Dev, 0, len(rs))
	for _, b := range rs {
		d, err := DecodeDev(b)
		if err != nil {
			return nil, &Error{Family: family, Op: OpName(CmdDevGet), Err: err}
		}
		out = append(out, d)
	}
	return out, nil
}

// Queues returns the queues of device ifindex (queue-get dump), RX and TX,
// in the kernel's order.
func (c *Client) Queues(ifindex int) ([]Queue, error) {
	t := ifTarget(ifindex)
	if ifindex <= 0 {
		return nil, &Error{Family: family, Op: OpName(CmdQueueGet), Target: t, Err: unix.EINVAL, Message: "ifindex must be positive"}
	}
	if err := c.check(CmdQueueGet, t); err != nil {
		return nil, err
	}
	rs, err := c.do(request{cmd: CmdQueueGet, target: t, dump: true, encode: func(ae *netlink.AttributeEncoder) {
		ae.Uint32(AttrQueueIfindex, uint32(ifindex))
	}})
	if err != nil {
		return nil, err
	}
	out := make([]Queue, 0, len(rs))
	for _, b := range rs {
		q, err := DecodeQueue(b)
		if err != nil {
			return nil, &Error{Family: family, Op: OpName(CmdQueueGet), Target: t, Err: err}
		}
		out = append(out, q)
	}
	return out, nil
}

// Queue returns one queue of device ifindex (queue-get do).
func (c *Client) Queue(ifindex int, typ QueueType, id uint32) (Queue, error) {
	t := fmt.Sprintf("ifindex %d %s queue %d", ifindex, typ, id)
	if err := c.check(CmdQueueGet, t); err != nil {
		return Queue{}, err
	}
	rs, err := c.do(request{cmd: CmdQueueGet, target: t, encode: func(ae *netlink.AttributeEncoder) {
		ae.Uint32(AttrQueueIfindex, uint32(ifindex))
		ae.Uint32(AttrQueueType, uint32(typ))
		ae.Uint32(AttrQueueID, id)
	}})
	if err != nil {
		return Queue{}, err
	}
	if len(rs) != 1 {
		return Queue{}, &Error{Family: family, Op: OpName(CmdQueueGet), Target: t, Err: fmt.Errorf("got %d replies, want 1", len(rs))}
	}
	q, err := DecodeQueue(rs[0])
	if err != nil {
		return Queue{}, &Error{Family: family, Op: OpName(CmdQueueGet), Target: t, Err: err}
	}
	return q, nil
}

// NAPIs returns the NAPI instances of device ifindex (napi-get dump).
func (c *Client) NAPIs(ifindex int) ([]NAPI, error) {
	t := ifTarget(ifindex)
	if ifindex <= 0 {
		return nil, &Error{Family: family, Op: OpName(CmdNAPIGet), Target: t, Err: unix.EINVAL, Message: "ifindex must be positive"}
	}
	if err := c.check(CmdNAPIGet, t); err != nil {
		return nil, err
	}
	rs, err := c.do(request{cmd: CmdNAPIGet, target: t, dump: true, encode: func(ae *netlink.AttributeEncoder) {
		ae.Uint32(AttrNAPIIfindex, uint32(ifindex))
	}})
	if err != nil {
		return nil, err
	}
	out := make([]NAPI, 0, len(rs))
	for _, b := range rs {
		n, err := DecodeNAPI(b)
		if err != nil {
			return nil, &Error{Family: family, Op: OpName(CmdNAPIGet), Target: t, Err: err}
		}
		out = append(out, n)
	}
	return out, nil
}

// NAPI returns NAPI instance id (napi-get do). An unknown id is an error
// wrapping unix.ENOENT.
func (c *Client) NAPI(id uint32) (NAPI, error) {
	t := fmt.Sprintf("napi %d", id)
	if err := c.check(CmdNAPIGet, t); err != nil {
		return NAPI{}, err
	}
	rs, err := c.do(request{cmd: CmdNAPIGet, target: t, encode: func(ae *netlink.AttributeEncoder) {
		ae.Uint32(AttrNAPIID, id)
	}})
	if err != nil {
		return NAPI{}, err
	}
	if len(rs) != 1 {
		return NAPI{}, &Error{Family: family, Op: OpName(CmdNAPIGet), Target: t, Err: fmt.Errorf("got %d replies, want 1", len(rs))}
	}
	n, err := DecodeNAPI(rs[0])
	if err != nil {
		return NAPI{}, &Error{Family: family, Op: OpName(CmdNAPIGet), Target: t, Err: err}
	}
	return n, nil
}

// SetNAPI changes the settings of NAPI instance id (napi-set); nil fields
// stay as they are. An attribute the running kernel's napi-set does not
// accept is ErrNotSupported before anything is sent.
func (c *Client) SetNAPI(id uint32, cfg NAPIConfig) error {
	t := fmt.Sprintf("napi %d", id)
	attrs := cfg.attrs()
	if len(attrs) == 0 {
		return &Error{Family: family, Op: OpName(CmdNAPISet), Target: t, Err: unix.EINVAL, Message: "nothing to set"}
	}
	if err := cfg.validate(); err != nil {
		return &Error{Family: family, Op: OpName(CmdNAPISet), Target: t, Err: unix.EINVAL, Message: err.Error()}
	}
	if err := c.check(CmdNAPISet, t, attrs...); err != nil {
		return err
	}
	_, err := c.do(request{cmd: CmdNAPISet, target: t, encode: func(ae *netlink.AttributeEncoder) {
		ae.Uint32(AttrNAPIID, id)
		EncodeNAPIConfig(ae, cfg)
	}})
	return err
}

// QStats returns the per-queue statistics of device ifindex (qstats-get
// dump in queue scope), one row per RX and per TX queue.
func (c *Client) QStats(ifindex int) ([]QStats, error) {
	t := ifTarget(ifindex)
	if ifindex <= 0 {
		return nil, &Error{Family: family, Op: OpName(CmdQStatsGet), Target: t, Err: unix.EINVAL, Message: "ifindex must be positive"}
	}
	if err := c.check(CmdQStatsGet, t); err != nil {
		return nil, err
	}
	rs, err := c.do(request{cmd: CmdQStatsGet, target: t, dump: true, encode: func(ae *netlink.AttributeEncoder) {
		ae.Uint32(AttrQStatsIfindex, uint32(ifindex))
		ae.Uint32(AttrQStatsScope, QStatsScopeQueue) // NLA_UINT: 4 bytes suffice
	}})
	if err != nil {
		return nil, err
	}
	out := make([]QStats, 0, len(rs))
	for _, b := range rs {
		s, err := DecodeQStats(b)
		if err != nil {
			return nil, &Error{Family: family, Op: OpName(CmdQStatsGet), Target: t, Err: err}
		}
		out = append(out, s)
	}
	return out, nil
}
