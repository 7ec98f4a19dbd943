package kernelplane

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/xdpio/xdpio/bench/plane"
)

// TCPConn makes c, a data connection of a TCP test on the kernel's TCP,
// a plane.TCPConn: its figures from TCP_INFO, its congestion control
// from TCP_CONGESTION, its socket buffers (SocketBuffers) as iperf3
// reports them. The TCP figures are Linux's: elsewhere Info and Finish
// fail with an error matching errors.ErrUnsupported.
func TCPConn(c *net.TCPConn) plane.TCPConn { return &tcpConn{TCPConn: c} }

type tcpConn struct {
	*net.TCPConn
}

// control runs f on the connection's socket.
func (c *tcpConn) control(what string, f func(fd uintptr) error) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(fd) }); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if ferr != nil {
		return fmt.Errorf("%s: %w", what, ferr)
	}
	return nil
}

func (c *tcpConn) Info() (info plane.TCPInfo, err error) {
	err = c.control("tcp info", func(fd uintptr) (err error) {
		info, _, err = tcpInfo(fd)
		return err
	})
	return info, err
}

// Finish shuts the connection's sending down and waits, polling
// TCP_INFO every millisecond, until the kernel has the FIN acknowledged:
// FIN-WAIT-2, TIME-WAIT or CLOSE (after LAST-ACK, when the peer had
// closed first).
func (c *tcpConn) Finish(ctx context.Context) error {
	if err := c.CloseWrite(); err != nil {
		return fmt.Errorf("finish: %w", err)
	}
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		var acked bool
		err := c.control("finish", func(fd uintptr) (err error) {
			_, acked, err = tcpInfo(fd)
			return err
		})
		if err != nil || acked {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("finish: the peer has not acknowledged the FIN: %w", ctx.Err())
		case <-t.C:
		}
	}
}

func (c *tcpConn) Congestion() string {
	var name string
	c.control("congestion", func(fd uintptr) (err error) {
		name, err = congestion(fd)
		return err
	})
	return name
}

// SocketBuffers returns what iperf3 reports of a TCP stream's socket:
// the size asked for (none: 0), SO_SNDBUF and SO_RCVBUF.
func (c *tcpConn) SocketBuffers() (requested, send, receive int, err error) {
	err = c.control("socket buffers", func(fd uintptr) (err error) {
		send, receive, err = bufferSizes(fd)
		return err
	})
	return 0, send, receive, err
}
