//go:build linux

package xsk

import (
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel's side of a ring is played here by plain index arithmetic:
// driving the real kernel through 2^32 ring indices would take hours. The
// real rings are exercised by the integration tests; this checks the
// cached-index arithmetic across the uint32 wrap.
func newTestTXRing(t *testing.T, entries uint32, start uint32) *txRing {
	t.Helper()
	off := ringOffsets{producer: 0, consumer: 64, flags: 128, desc: 192}
	mem := make([]byte, int(off.desc)+int(entries)*int(unsafe.Sizeof(Desc{})))
	r := newTXRing(mem, off, entries)
	r.producer.Store(start)
	r.consumer.Store(start)
	r.init(true)
	return r
}

func TestRingWrapsAroundUint32(t *testing.T) {
	const entries = 8
	start := ^uint32(0) - 20 // wraps after 21 entries
	prod := newTestTXRing(t, entries, start)
	// Consumer view of the same memory, as the RX ring reads it.
	cons := &rxRing{prod.ringOf}
	cons.init(false)

	next := uint64(0)
	want := uint64(0)
	for round := 0; round < 40; round++ {
		n := uint32(round%entries + 1)
		free := prod.prodFree(n)
		if free > entries {
			t.Fatalf("round %d: %d free in a ring of %d", round, free, entries)
		}
		k := min(n, free)
		for i := uint32(0); i < k; i++ {
			prod.ring[(prod.cachedProd+i)&prod.mask] = Desc{Addr: next}
			next++
		}
		prod.cachedProd += k
		prod.prodSubmit()

		avail := cons.consAvail(entries)
		if avail > entries {
			t.Fatalf("round %d: %d available in a ring of %d", round, avail, entries)
		}
		// Consume only half, to keep the ring partly full across rounds.
		take := (avail + 1) / 2
		for i := uint32(0); i < take; i++ {
			d := cons.ring[(cons.cachedCons+i)&cons.mask]
			if d.Addr != want {
				t.Fatalf("round %d: got descriptor %d, want %d", round, d.Addr, want)
			}
			want++
		}
		cons.cachedCons += take
		cons.consRelease()
	}
	if prod.producer.Load() > start && next > 21 {
		t.Fatalf("producer index %d did not wrap past 2^32 (start %d, %d produced)", prod.producer.Load(), start, next)
	}
}

func TestPoolLIFO(t *testing.T) {
	u := &UMEM{cfg: UMEMConfig{NumFrames: 4}}
	p := newFramePool(u, []uint64{0, 4096, 8192})
	if p.len() != 3 {
		t.Fatal(p.len())
	}
	a := p.get()
	p.put(a)
	if b := p.get(); b != a {
		t.Fatalf("pool is not LIFO: put %d, got %d", a, b)
	}
	p.put(a)
	p.put(12288) // a frame migrating in from another socket on the UMEM
	if p.len() != 4 {
		t.Fatalf("len %d, want 4", p.len())
	}
}

func TestFrameBaseAndValidRX(t *testing.T) {
	aligned := &UMEM{cfg: UMEMConfig{NumFrames: 4}, size: 4 * 4096, frameSize: 4096, frameMask: 4095, frameShift: 12}
	unaligned := &UMEM{cfg: UMEMConfig{NumFrames: 4, Unaligned: true}, size: 4 * 3000, frameSize: 3000}
	for _, tc := range []struct {
		u     *UMEM
		addr  uint64
		len   uint32
		base  uint64
		valid bool
	}{
		{aligned, 256, 100, 0, true},
		{aligned, 4096 + 256, 3840, 4096, true},
		{aligned, 4096 + 256, 3841, 4096, false}, // crosses into the next frame
		{aligned, 4 * 4096, 1, 4 * 4096, false},  // beyond the UMEM
		{aligned, ^uint64(0) - 5, 10, ^uint64(4095), false},
		{unaligned, 3000 + 256, 2744, 3000, true},
		{unaligned, 3000 + 256, 2745, 3000, false},
		{unaligned, 12000, 0, 12000, false},
	} {
		if got := tc.u.frameBase(tc.addr); got != tc.base {
			t.Errorf("frameBase(%d) = %d, want %d", tc.addr, got, tc.base)
		}
		if got, want := tc.u.frameIndex(tc.addr), tc.base/tc.u.frameSize; got != want {
			t.Errorf("frameIndex(%d) = %d, want %d", tc.addr, got, want)
		}
		if got := tc.u.validRX(tc.addr, tc.len); got != tc.valid {
			t.Errorf("validRX(%d, %d) = %v, want %v", tc.addr, tc.len, got, tc.valid)
		}
	}
}

// FuzzValidRX: whatever address and length the kernel hands back, a
// descriptor that passes validation can be sliced without leaving the UMEM
// or its frame.
func FuzzValidRX(f *testing.F) {
	f.Add(uint64(256), uint32(60), false, uint16(4096))
	f.Add(uint64(1<<48|3000), uint32(1500), true, uint16(3000))
	f.Add(^uint64(0), ^uint32(0), true, uint16(2048))
	f.Fuzz(func(t *testing.T, raw uint64, length uint32, unaligned bool, fs uint16) {
		frameSize := uint64(fs)
		if frameSize < 2048 {
			frameSize = 2048
		}
		u := &UMEM{cfg: UMEMConfig{NumFrames: 3, Unaligned: unaligned}, frameSize: frameSize}
		if !unaligned {
			frameSize = 4096
			u.frameSize, u.frameMask = 4096, 4095
		}
		u.size = 3 * frameSize
		u.mem = make([]byte, u.size)
		addr := raw
		if unaligned {
			addr = (raw & unalignedAddrMask) + raw>>unalignedOffsetShift
		}
		if !u.validRX(addr, length) {
			return
		}
		b := Batch{descs: []Desc{{Addr: addr, Len: length}}, umem: u}
		fr := b.Frame(0)
		if len(fr) != int(length) {
			t.Fatalf("frame of %d bytes for length %d", len(fr), length)
		}
		if base := u.frameBase(addr); addr+uint64(length) > base+frameSize {
			t.Fatalf("descriptor %d+%d crosses its frame at %d", addr, length, base)
		}
	})
}

// Errors of the package match the standard library's sentinels and the
// same errors of the other xdpio packages, and an OpError is a net.Error.
func TestErrorVocabulary(t *testing.T) {
	err := error(&OpError{Op: "read", Ifname: "veth0", Queue: 1, Err: ErrClosed})
	if !errors.Is(err, net.ErrClosed) {
		t.Errorf("%v does not match net.ErrClosed", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || ne.Timeout() {
		t.Errorf("%v: net.Error %v, Timeout %v", err, ne != nil, ne != nil && ne.Timeout())
	}
	if !errors.Is(fmt.Errorf("bind: %w", ErrNotSupported), errors.ErrUnsupported) {
		t.Error("ErrNotSupported does not match errors.ErrUnsupported")
	}
	down := &OpError{Op: "transmit on", Ifname: "veth0", Queue: 0, Err: fmt.Errorf("%w: %w", ErrLinkDown, unix.ENETDOWN)}
	if !down.Temporary() {
		t.Errorf("%v is not temporary", down)
	}
	if to := (&OpError{Op: "wait", Queue: -1, Err: os.ErrDeadlineExceeded}); !to.Timeout() {
		t.Errorf("%v is not a timeout", to)
	}
}

// The shared indices are typed atomics laid over the mmap'd memory: an
// offset the kernel would never give (not 4-byte aligned) is refused
// before any atomic access could tear.
func TestRingIndexAlignment(t *testing.T) {
	mem := make([]byte, 512)
	defer func() {
		if recover() == nil {
			t.Fatal("a misaligned producer offset was accepted")
		}
	}()
	newFillRing(mem, ringOffsets{producer: 2, consumer: 64, flags: 128, desc: 192}, 8)
}

// The TX ring's unsent and the RX ring's multi-buffer trim read the
// shared memory as the kernel leaves it.
func TestRingUnsentAndWholePackets(t *testing.T) {
	tx := newTestTXRing(t, 8, 100)
	if tx.unsent() {
		t.Fatal("an empty TX ring has unsent descriptors")
	}
	for i := range uint32(3) {
		opts := uint32(0)
		if i < 2 {
			opts = OptContinues // a three-buffer packet
		}
		tx.ring[(tx.cachedProd+i)&tx.mask] = Desc{Addr: uint64(i), Options: opts}
	}
	tx.cachedProd += 3
	tx.prodSubmit()
	if !tx.unsent() {
		t.Fatal("published descriptors are not unsent")
	}
	rx := &rxRing{tx.ringOf}
	rx.init(false)
	if n := rx.consAvail(8); n != 3 || rx.wholePackets(n) != 3 || rx.wholePackets(2) != 0 {
		t.Fatalf("avail %d, whole packets of 3: %d, of 2: %d", n, rx.wholePackets(n), rx.wholePackets(2))
	}
	rx.cachedCons += 3
	rx.consRelease()
	if tx.unsent() {
		t.Fatal("consumed descriptors are still unsent")
	}
}

// The fill and RX rings grow with the socket's frames (half of them, from
// 2048 to 16384): a receiver that is not scheduled for a while is served
// only by the frames already lent to the kernel.
func TestDefaultRXRing(t *testing.T) {
	for _, c := range []struct{ frames, want int }{
		{0, 2048}, {256, 2048}, {4096, 2048}, {6000, 2048}, {8192, 4096}, {16384, 8192}, {32768, 16384}, {1 << 20, 16384},
	} {
		if got := defaultRXRing(c.frames); got != c.want {
			t.Errorf("defaultRXRing(%d) = %d, want %d", c.frames, got, c.want)
		}
	}
	var c SocketConfig
	c.setDefaults(16384)
	if c.FillRingSize != 8192 || c.RXRingSize != 8192 || c.TXRingSize != 2048 || c.CompletionRingSize != 2048 {
		t.Errorf("defaults for 16384 frames: %+v", c)
	}
	c = SocketConfig{FillRingSize: 1024}
	c.setDefaults(16384)
	if c.FillRingSize != 1024 {
		t.Errorf("an explicit fill ring size was overridden: %d", c.FillRingSize)
	}
}
