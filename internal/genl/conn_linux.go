//go:build linux

package genl

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Conn is a generic netlink socket bound to one family: the request
// prologue the family clients share. It is safe for concurrent use: one
// request at a time, each answered before the next is sent.
type Conn struct {
	mu     sync.Mutex // serialises requests: one answer per request
	c      *genetlink.Conn
	family genetlink.Family
	// Ops is the set of operations the kernel lists for the family
	// (CTRL_ATTR_OPS); nil when the controller listed none (a test
	// server), and every operation is then tried. Tests may edit it to
	// hide an operation before the Conn is shared.
	Ops map[uint32]bool
}

// Dial opens a generic netlink socket in the calling thread's network
// namespace and looks family name up on it (see Open).
func Dial(name, missing string) (*Conn, error) {
	c, err := genetlink.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("%s: open generic netlink socket: %w", name, err)
	}
	cl, err := Open(c, name, missing)
	if err != nil {
		c.Close()
		return nil, err
	}
	return cl, nil
}

// Open looks family name up on an open generic netlink connection
// (genltest.Dial in tests), asks for the kernel's error texts (extended
// acks) and strict attribute checking, and returns a Conn that owns c. A
// family the kernel does not have is an *Error matching ErrNotSupported
// whose Missing is missing.
func Open(c *genetlink.Conn, name, missing string) (*Conn, error) {
	f, ops, err := LookupFamily(c, name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOENT) {
			return nil, &Error{Family: name, Op: "family lookup", NotSupported: true, Missing: missing, Err: err}
		}
		return nil, fmt.Errorf("%s: look up generic netlink family %q: %w", name, name, err)
	}
	// A test connection may not implement options: the requests still work.
	_ = c.SetOption(netlink.ExtendedAcknowledge, true)
	_ = c.SetOption(netlink.GetStrictCheck, true)
	return &Conn{c: c, family: f, Ops: ops}, nil
}

// Close closes the socket.
func (c *Conn) Close() error { return c.c.Close() }

// Family returns the generic netlink family the kernel reported: its ID,
// version, operations and multicast groups.
func (c *Conn) Family() genetlink.Family { return c.family }

// Supports reports whether the kernel lists operation cmd for the family.
func (c *Conn) Supports(cmd uint8) bool { return c.Ops == nil || c.Ops[uint32(cmd)] }

// SyscallConn returns the socket's raw connection.
func (c *Conn) SyscallConn() (syscall.RawConn, error) { return c.c.SyscallConn() }

// Do sends command cmd of the family with payload data and returns the
// replies (Exchange), one request at a time.
func (c *Conn) Do(cmd, version uint8, data []byte, dump bool) ([]genetlink.Message, error) {
	msg := genetlink.Message{Header: genetlink.Header{Command: cmd, Version: version}, Data: data}
	c.mu.Lock()
	defer c.mu.Unlock()
	return Exchange(c.c, c.family.ID, msg, dump)
}

// Execute sends msg to family (unix.GENL_ID_CTRL for the controller)
// with flags and returns the replies, one request at a time.
func (c *Conn) Execute(msg genetlink.Message, family uint16, flags netlink.HeaderFlags) ([]genetlink.Message, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c.Execute(msg, family, flags)
}

// Request headers before the attributes an extack offset counts in.
const (
	nlmsgHeaderLen = 16
	genlHeaderLen  = 4
)

// KernelError turns the error of a request whose attribute payload was
// req into an *Error of family and op for target: it keeps the kernel's
// extended-ack text and errno, names the attribute at the extack's offset
// with attrAt (given the offset into req; may be nil), and marks
// EOPNOTSUPP and ENOTSUPP as "not supported" (the caller says what is
// missing). This is where kernel codes become ErrNotSupported.
func KernelError(family, op, target string, req []byte, err error, attrAt func(req []byte, off int) string) *Error {
	e := &Error{Family: family, Op: op, Target: target, Err: err}
	var oe *netlink.OpError
	if errors.As(err, &oe) {
		e.Message = oe.Message
		if oe.Err != nil {
			e.Err = oe.Err
		}
		if attrAt != nil && oe.Offset >= nlmsgHeaderLen+genlHeaderLen {
			e.Attr = attrAt(req, oe.Offset-nlmsgHeaderLen-genlHeaderLen)
		}
	}
	e.NotSupported = errors.Is(e.Err, unix.EOPNOTSUPP) || errors.Is(e.Err, ENOTSUPP)
	return e
}
