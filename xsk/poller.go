package xsk

// A Poller waits on several sockets at once, so that one goroutine can
// own the sockets of several queues: on a machine with fewer CPUs than
// queues, one thread that wakes once for all of them costs less, and waits
// less for a CPU, than a thread per queue that each wake on their own.
//
// Like the sockets it watches, a Poller belongs to the goroutine that owns
// them. Closing any of its sockets (from any goroutine) ends a wait or
// sleep in progress with ErrClosed.
type Poller struct {
	socks []*Socket
	fds   []pollFd   // each socket's fd, then each socket's Close event
	err   error      // no sockets, or a nil one: every call returns it
	ep    *epollBusy // set by BusyPoll: WaitRX busy-polls in epoll_wait
}

// NewPoller returns a Poller for socks. Without sockets, or with a nil
// one, every wait and sleep of the Poller returns an error matching
// ErrInvalidConfig.
func NewPoller(socks ...*Socket) *Poller {
	p := &Poller{socks: append([]*Socket(nil), socks...)}
	p.fds = make([]pollFd, 2*len(socks))
	if len(socks) == 0 {
		p.err = invalid("poller sockets", 0, "want at least one")
	}
	for i, s := range socks {
		if s == nil {
			p.err = invalid("poller socket", i, "is nil")
		}
	}
	return p
}

// Sockets returns the sockets the Poller waits on, in the order given.
func (p *Poller) Sockets() []*Socket { return p.socks }

// enter marks a call in progress on every socket (Close waits for it to
// end), or returns false, with none marked, when one of them is closed.
// The caller has checked p.err.
func (p *Poller) enter() bool {
	for i, s := range p.socks {
		if !s.enter() {
			for _, t := range p.socks[:i] {
				t.leave()
			}
			return false
		}
	}
	return true
}

func (p *Poller) leave() {
	for _, s := range p.socks {
		s.leave()
	}
}
