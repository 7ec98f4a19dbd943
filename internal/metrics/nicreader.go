package metrics

import (
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/xdpio/xdpio/nic"
)

// A NICReader reads one network device for export at each scrape: its
// per-queue counters (nic.Device.Stats), NAPI settings and queues. It is
// safe for concurrent use; reads are serialised.
//
// It enters the network namespace it was created in for each read, so
// that an exporter serving HTTP from another namespace (xdpio exporter
// --netns), or from goroutines that did not lock their thread, reads the
// driver's ethtool -S counters and /proc/net/dev of the device's own.
type NICReader struct {
	mu     sync.Mutex
	name   string
	dev    *nic.Device
	owned  bool // opened by name: reopened when it is gone, closed by Close
	closed bool
	ns     *namespace
}

// OpenNICReader opens interface name in the calling thread's network
// namespace (nic.Open) and returns a reader that owns it: after a read
// that found the device gone (deleted) it opens the name again at the
// next read, so a device that comes back is read again.
func OpenNICReader(name string) (*NICReader, error) {
	ns, err := currentNamespace()
	if err != nil {
		return nil, err
	}
	d, err := nic.Open(name)
	if err != nil {
		ns.close()
		return nil, err
	}
	return &NICReader{name: name, dev: d, owned: true, ns: ns}, nil
}

// NewNICReader returns a reader of d, which the caller keeps open while
// the reader is used and closes after it. Call it in the network namespace
// d was opened in (as nic.Open: the calling thread's).
func NewNICReader(d *nic.Device) (*NICReader, error) {
	ns, err := currentNamespace()
	if err != nil {
		return nil, err
	}
	return &NICReader{name: d.Name(), dev: d, ns: ns}, nil
}

// Name returns the device's name.
func (r *NICReader) Name() string { return r.name }

// Read adds the device's samples to s: AddNICStats, AddNAPIs and AddQueues,
// xdpio_nic_scrape_success for each part (stats, napi, queues) and
// xdpio_nic_scrape_duration_seconds. A part that failed adds only its
// success 0, never stale values; a part the kernel or driver does not
// offer (nic.ErrNotSupported) adds nothing. Read returns the first error
// of the parts that failed.
func (r *NICReader) Read(s *Set) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := time.Now()
	var first error
	fail := func(part string, err error) {
		s.Add(NICScrapeSuccess, 0, r.name, part)
		if first == nil {
			first = err
		}
	}
	ok := func(part string) { s.Add(NICScrapeSuccess, 1, r.name, part) }
	read := func() error {
		if r.dev == nil {
			d, err := nic.Open(r.name)
			if err != nil {
				return err
			}
			r.dev = d
		}
		snap, err := r.dev.Stats()
		switch {
		case err == nil:
			ok("stats")
			AddNICStats(s, r.name, snap)
		case errors.Is(err, nic.ErrNotSupported):
		default:
			fail("stats", err)
		}
		napis, err := r.dev.NAPIs(nic.AllNAPIs())
		switch {
		case err == nil:
			ok("napi")
			AddNAPIs(s, r.name, napis)
		case errors.Is(err, syscall.ENOENT):
			ok("napi") // the device has no NAPI instance (lo; veth without GRO or XDP)
		case errors.Is(err, nic.ErrNotSupported):
		default:
			fail("napi", err)
		}
		qs, err := r.dev.Queues()
		switch {
		case err == nil:
			ok("queues")
			AddQueues(s, r.name, qs)
		case errors.Is(err, nic.ErrNotSupported):
		default:
			fail("queues", err)
		}
		return nil
	}
	err := error(nic.ErrClosed)
	if !r.closed {
		err = r.ns.do(read)
	}
	if err != nil {
		// The device (or the namespace) could not be opened: every part
		// failed.
		for _, part := range []string{"stats", "napi", "queues"} {
			fail(part, err)
		}
	}
	if r.owned && r.dev != nil && (errors.Is(first, syscall.ENODEV) || errors.Is(first, nic.ErrNoDevice)) {
		// The device is gone: open the name again next time, when one by
		// that name may have been created. Other failures keep the
		// device, and its netlink clients.
		r.dev.Close()
		r.dev = nil
	}
	s.Add(NICScrapeDuration, time.Since(start).Seconds(), r.name)
	return first
}

// Close closes the device if the reader opened it, and the reader's handle
// of the namespace. Reads after Close fail with nic.ErrClosed.
func (r *NICReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var err error
	if r.owned && r.dev != nil {
		err = r.dev.Close()
	}
	r.dev = nil
	r.closed = true
	r.ns.close()
	return err
}
