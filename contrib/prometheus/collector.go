package xdpprom

import (
	"sort"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/xdpio/xdpio/internal/metrics"
	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/xdpnet"
	"github.com/xdpio/xdpio/xsk"
)

// descs holds one prometheus.Desc per family, shared by every collector.
var descs sync.Map // *metrics.Family → *prometheus.Desc

func desc(f *metrics.Family) *prometheus.Desc {
	if d, ok := descs.Load(f); ok {
		return d.(*prometheus.Desc)
	}
	d, _ := descs.LoadOrStore(f, prometheus.NewDesc(f.Name, f.Help, f.Labels, nil))
	return d.(*prometheus.Desc)
}

// series names one series: its family and label values.
type series struct {
	f *metrics.Family
	l [metrics.MaxLabels]string
}

// state is what a collector keeps of one series across scrapes: its
// label pairs, made once (as client_golang's own metrics keep theirs), and
// for a counter what the endpoints before the current one had counted
// (base) and the current one's last value.
type state struct {
	desc       *prometheus.Desc
	pairs      []*dto.LabelPair
	base, last float64
}

// continuity keeps every series' state: counters go on across endpoints,
// the value exported for a counter being base + the current endpoint's.
type continuity struct {
	m map[series]*state
}

// get returns the state of sample i of s, made on first sight.
func (c *continuity) get(s *metrics.Set, i int) *state {
	f, _, labels := s.At(i)
	var k series
	k.f = f
	copy(k.l[:], labels)
	st := c.m[k]
	if st == nil {
		if c.m == nil {
			c.m = map[series]*state{}
		}
		st = &state{desc: desc(f), pairs: labelPairs(f, labels)}
		c.m[k] = st
	}
	return st
}

// adjust turns counter sample i of s from the current endpoint's value into
// the exported one, and returns the series' state. A value below the last
// one read means the endpoint's counter restarted (an endpoint swapped
// without Replace): what it had counted moves into the base.
func (c *continuity) adjust(s *metrics.Set, i int) *state {
	st := c.get(s, i)
	f, v, _ := s.At(i)
	if f.Type != metrics.Counter {
		return st
	}
	if v < st.last {
		st.base += st.last
	}
	st.last = v
	s.SetValue(i, st.base+v)
	return st
}

// handover moves every series' last value into its base: the next
// endpoint's counters start from 0.
func (c *continuity) handover() {
	for _, st := range c.m {
		st.base += st.last
		st.last = 0
	}
}

// labelPairs returns f's label pairs with values, sorted by name as the
// registry wants them; a value that is not UTF-8 (an interface name may
// hold any byte) has its bad bytes replaced, as the text format needs.
func labelPairs(f *metrics.Family, values []string) []*dto.LabelPair {
	pairs := make([]*dto.LabelPair, len(values))
	for j, v := range values {
		pairs[j] = &dto.LabelPair{Name: proto.String(f.Labels[j]), Value: proto.String(strings.ToValidUTF8(v, "\uFFFD"))}
	}
	sort.Slice(pairs, func(a, b int) bool { return pairs[a].GetName() < pairs[b].GetName() })
	return pairs
}

// metric is one sample as a prometheus.Metric, over its series' cached
// label pairs.
type metric struct {
	st  *state
	typ metrics.Type
	v   float64
}

func (m *metric) Desc() *prometheus.Desc { return m.st.desc }

func (m *metric) Write(out *dto.Metric) error {
	out.Label = m.st.pairs
	if m.typ == metrics.Counter {
		out.Counter = &dto.Counter{Value: proto.Float64(m.v)}
	} else {
		out.Gauge = &dto.Gauge{Value: proto.Float64(m.v)}
	}
	return nil
}

// adjustAll adjusts every sample of s.
func (c *continuity) adjustAll(s *metrics.Set) {
	for i := range s.Len() {
		c.adjust(s, i)
	}
}

// emit adjusts the samples of s and sends them.
func (c *continuity) emit(s *metrics.Set, ch chan<- prometheus.Metric) {
	for i := range s.Len() {
		st := c.adjust(s, i)
		f, v, _ := s.At(i)
		ch <- &metric{st: st, typ: f.Type, v: v}
	}
}

// SocketCollector is a prometheus.Collector of the AF_XDP sockets of an
// xsk.Device: the xdpio_xsk_* families, labels device and queue. It is safe
// for concurrent use.
type SocketCollector struct {
	mu    sync.Mutex
	dev   *xsk.Device
	name  string            // dev's
	socks []*xsk.Socket     // dev's, as they were handed over: Device.Close forgets them
	last  map[int]xsk.Stats // the last counters read of each queue's socket
	cont  continuity
	set   metrics.Set
}

// NewSocketCollector returns a collector of dev's sockets, taken while dev
// is open; dev may be nil until Replace hands it one.
func NewSocketCollector(dev *xsk.Device) *SocketCollector {
	c := &SocketCollector{last: map[int]xsk.Stats{}}
	c.take(dev)
	return c
}

// take makes dev the current device. Its sockets are taken now, while it
// is open: after Close the device no longer lists them, but their Stats
// still report what they counted.
func (c *SocketCollector) take(dev *xsk.Device) {
	c.dev, c.name, c.socks = dev, "", nil
	if dev != nil {
		c.name, c.socks = dev.Name(), dev.Sockets()
	}
}

// Replace makes dev the device whose sockets the collector exports, in place
// of the one it had: each counter of the new device's sockets is exported
// on top of what the old one's had counted when Replace read them (close the
// old device first, so that nothing it counts afterwards is lost). dev may be
// nil: nothing is exported until the next Replace. Hand the collector a
// device before closing it, not after: a closed device no longer lists its
// sockets.
func (c *SocketCollector) Replace(dev *xsk.Device) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if dev == c.dev {
		return
	}
	if c.dev != nil {
		c.read()
		c.cont.adjustAll(&c.set)
		c.cont.handover()
		clear(c.last)
	}
	c.take(dev)
}

// read fills c.set with the current device's samples, counters adjusted.
func (c *SocketCollector) read() {
	c.set.Reset()
	for _, sk := range c.socks {
		q := sk.Queue()
		st, err := sk.Stats()
		if err != nil {
			var ok bool
			if st, ok = c.last[q]; !ok {
				continue
			}
		}
		c.last[q] = st
		metrics.AddSocket(&c.set, c.name, metrics.Queue(q), st)
	}
}

// Describe sends nothing: the collector is unchecked (see the package
// documentation).
func (c *SocketCollector) Describe(chan<- *prometheus.Desc) {}

// Collect sends the sockets' metrics.
func (c *SocketCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read()
	c.cont.emit(&c.set, ch)
}

// ConnCollector is a prometheus.Collector of an xdpnet.UDPConn: the
// xdpio_conn_* families, labels conn (the collector's name), device and
// queue ("kernel" for the conn's kernel socket), and the xdpio_xsk_*
// families of its AF_XDP sockets. It is safe for concurrent use.
type ConnCollector struct {
	name string
	mu   sync.Mutex
	conn *xdpnet.UDPConn
	cont continuity
	set  metrics.Set
}

// NewConnCollector returns a collector of conn, whose series carry
// conn=name: the name of the endpoint, which stays when Replace hands the
// collector another conn. An empty name becomes conn's local address
// ("198.18.0.2:53"). conn may be nil (with a name) until Replace.
func NewConnCollector(name string, conn *xdpnet.UDPConn) *ConnCollector {
	if name == "" && conn != nil {
		name = conn.LocalAddrPort().String()
	}
	return &ConnCollector{name: name, conn: conn}
}

// Name returns the collector's conn label.
func (c *ConnCollector) Name() string { return c.name }

// Replace makes conn the one the collector exports, in place of the one it
// had: each counter of the new conn is exported on top of what the old one
// had counted when Replace read it (close the old conn first, so that
// nothing it counts afterwards is lost). conn may be nil: nothing is
// exported until the next Replace.
func (c *ConnCollector) Replace(conn *xdpnet.UDPConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if conn == c.conn {
		return
	}
	if c.conn != nil {
		c.read()
		c.cont.adjustAll(&c.set)
		c.cont.handover()
	}
	c.conn = conn
}

func (c *ConnCollector) read() {
	c.set.Reset()
	if c.conn == nil {
		return
	}
	metrics.AddConn(&c.set, c.name, c.conn.Interface(), c.conn.Stats())
}

// Describe sends nothing: the collector is unchecked (see the package
// documentation).
func (c *ConnCollector) Describe(chan<- *prometheus.Desc) {}

// Collect sends the conn's metrics.
func (c *ConnCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read()
	c.cont.emit(&c.set, ch)
}

// NICCollector is a prometheus.Collector of a network device: its
// per-queue counters (xdpio_nic_<counter>_total, labels device and queue,
// from the source xdpio_nic_stats_source names), NAPI settings and queues,
// and xdpio_nic_scrape_success for each part. A part that cannot be read
// (the device was deleted) is exported as xdpio_nic_scrape_success 0,
// never as stale values. It is safe for concurrent use.
type NICCollector struct {
	r     *metrics.NICReader
	mu    sync.Mutex
	set   metrics.Set
	cache continuity // label pairs only: the device's counters are the kernel's
}

// NewNICCollector returns a collector of d, which the caller keeps open
// while the collector is registered. Call it in the network namespace d
// was opened in (as nic.Open, the calling thread's): each Collect reads
// there, whatever goroutine the registry runs it on.
func NewNICCollector(d *nic.Device) (*NICCollector, error) {
	r, err := metrics.NewNICReader(d)
	if err != nil {
		return nil, err
	}
	return &NICCollector{r: r}, nil
}

// OpenNICCollector opens the interface called name in the calling thread's
// network namespace and returns a collector that owns it: a device deleted
// and created again by that name is opened again at the next Collect.
// Close closes it.
func OpenNICCollector(name string) (*NICCollector, error) {
	r, err := metrics.OpenNICReader(name)
	if err != nil {
		return nil, err
	}
	return &NICCollector{r: r}, nil
}

// Close closes the device if the collector opened it (OpenNICCollector),
// and its handle of the device's network namespace; a Collect after Close
// exports xdpio_nic_scrape_success 0.
func (c *NICCollector) Close() error { return c.r.Close() }

// Describe sends nothing: the collector is unchecked (see the package
// documentation).
func (c *NICCollector) Describe(chan<- *prometheus.Desc) {}

// Collect sends the device's metrics.
func (c *NICCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set.Reset()
	c.r.Read(&c.set)
	for i := range c.set.Len() {
		f, v, _ := c.set.At(i)
		ch <- &metric{st: c.cache.get(&c.set, i), typ: f.Type, v: v}
	}
}
