package labctl

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// Client talks to the host's sender over the control port. It is safe for
// concurrent use: requests are serialized.
type Client struct {
	mu   sync.Mutex
	f    *os.File
	r    *bufio.Reader
	next uint64
}

// Dial opens the control port at path.
func Dial(path string) (*Client, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("dial lab sender: %w", err)
	}
	return &Client{f: f, r: bufio.NewReader(f), next: uint64(time.Now().UnixNano())}, nil
}

// DialTB dials the lab's control port (CtlPath), closes it when tb ends,
// and checks that the sender answers.
func DialTB(tb testing.TB) *Client {
	tb.Helper()
	c, err := Dial(CtlPath(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	if _, err := c.Do(Request{Op: "ping"}, 10*time.Second); err != nil {
		tb.Fatal(err)
	}
	return c
}

// Close closes the port.
func (c *Client) Close() error { return c.f.Close() }

// Do sends req (its ID is assigned) and waits up to timeout for the
// sender's reply, skipping replies to earlier requests that timed out.
func (c *Client) Do(req Request, timeout time.Duration) (Reply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	req.ID = c.next
	b, err := json.Marshal(req)
	if err != nil {
		return Reply{}, fmt.Errorf("lab request %s: %w", req.Op, err)
	}
	if _, err := c.f.Write(append(b, '\n')); err != nil {
		return Reply{}, fmt.Errorf("lab request %s: write: %w", req.Op, err)
	}
	deadline := time.Now().Add(timeout)
	type result struct {
		line []byte
		err  error
	}
	for {
		ch := make(chan result, 1)
		go func() {
			l, err := c.r.ReadBytes('\n')
			ch <- result{l, err}
		}()
		var res result
		select {
		case res = <-ch:
		case <-time.After(time.Until(deadline)):
			// The reader goroutine keeps the port; the client is unusable.
			c.f.Close()
			return Reply{}, fmt.Errorf("lab request %s: no reply within %v", req.Op, timeout)
		}
		if res.err != nil {
			return Reply{}, fmt.Errorf("lab request %s: read: %w", req.Op, res.err)
		}
		var rep Reply
		if err := json.Unmarshal(res.line, &rep); err != nil {
			return Reply{}, fmt.Errorf("lab request %s: reply %q: %w", req.Op, res.line, err)
		}
		if rep.ID != req.ID {
			continue
		}
		if rep.Error != "" {
			return rep, fmt.Errorf("lab request %s: sender: %s", req.Op, rep.Error)
		}
		return rep, nil
	}
}

// Send asks the sender for count frames of each flow and waits until they
// are written to the tap.
func (c *Client) Send(flows []Flow, count int) error {
	want := len(flows) * max(count, 1)
	rep, err := c.Do(Request{Op: "send", Flows: flows, Count: count}, 60*time.Second)
	if err != nil {
		return err
	}
	if rep.Sent != want {
		return fmt.Errorf("lab send: sender wrote %d frames, want %d", rep.Sent, want)
	}
	return nil
}

// SendGap is Send with a pause of gap between frames: 0 keeps the
// sender's default, a negative gap sends back to back. It returns how
// long the sender took.
func (c *Client) SendGap(flows []Flow, count int, gap time.Duration) (time.Duration, error) {
	want := len(flows) * max(count, 1)
	start := time.Now()
	rep, err := c.Do(Request{Op: "send", Flows: flows, Count: count, Gap: int64(gap)}, 120*time.Second)
	if err != nil {
		return 0, err
	}
	if rep.Sent != want {
		return 0, fmt.Errorf("lab send: sender wrote %d frames, want %d", rep.Sent, want)
	}
	return time.Since(start), nil
}

// Received returns how many frames from the guest's MAC address the host
// side has seen on the tap since the sender started.
func (c *Client) Received() (int, error) {
	rep, err := c.Do(Request{Op: "received"}, 10*time.Second)
	return rep.Sent, err
}
