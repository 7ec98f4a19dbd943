package coalesce

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"
)

func TestParamsValidate(t *testing.T) {
	for _, p := range []Params{{RXUsecs: -1}, {RXUsecs: MaxUsecs + 1}, {RXFrames: -3}, {BatchSize: -1}, {BatchSize: 1 << 17}} {
		if err := p.validate(); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("%+v: got %v, want ErrInvalidParams", p, err)
		}
	}
	for _, p := range []TXParams{{TXUsecs: -1}, {TXFrames: -1}, {BatchSize: 1 << 20}} {
		if err := p.validate(); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("%+v: got %v, want ErrInvalidParams", p, err)
		}
	}
	p := Params{RXFrames: 1000}
	p.setDefaults()
	if p.RXFrames != p.BatchSize || p.BatchSize != 256 {
		t.Errorf("defaults: %+v: want rx-frames capped at batch size 256", p)
	}
}

// With rx-usecs 0 every frame goes out the moment it is seen.
func TestRXImmediate(t *testing.T) {
	arr := every(time.Millisecond, 30*us, 100)
	out, c, f := runFake(t, Params{}, arr)
	if len(out) != len(arr) {
		t.Fatalf("%d batches for %d spaced frames, want one each", len(out), len(arr))
	}
	if d := maxDelay(out); d != 0 {
		t.Errorf("max delay %v, want 0", d)
	}
	st := c.stats()
	if st.Immediate != uint64(len(arr)) || st.Sleeps != 0 || f.sleeps != 0 {
		t.Errorf("stats %+v, fake sleeps %d: want all immediate, no sleeps", st, f.sleeps)
	}
}

// The first frame after idle waits exactly rx-usecs when nothing else comes.
func TestRXLatencyBoundAfterIdle(t *testing.T) {
	arr := []time.Duration{time.Millisecond, 5 * time.Millisecond}
	out, c, _ := runFake(t, Params{RXUsecs: 50}, arr)
	want := []time.Duration{time.Millisecond + 50*us, 5*time.Millisecond + 50*us}
	var got []time.Duration
	for _, b := range out {
		got = append(got, b.at)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("delivered at %v, want %v", got, want)
	}
	st := c.stats()
	if st.TimerExpiries != 2 || st.Delay.Max != uint64(50*us) || st.Delay.Count != 2 {
		t.Errorf("stats %+v: want 2 timer expiries, delays of exactly 50µs", st)
	}
}

// A burst fills rx-frames before rx-usecs: the batch goes at once.
func TestRXFrameLimit(t *testing.T) {
	arr := every(time.Millisecond, 0, 8) // 8 frames at the same instant
	arr = append(arr, 2*time.Millisecond)
	out, c, _ := runFake(t, Params{RXUsecs: 100, RXFrames: 8}, arr)
	if len(out) != 2 || out[0].at != time.Millisecond || len(out[0].frames) != 8 {
		t.Fatalf("batches %+v: want 8 frames at 1ms, then 1", out)
	}
	if out[1].at != 2*time.Millisecond+100*us {
		t.Errorf("lone frame delivered at %v, want 2.1ms", out[1].at)
	}
	if st := c.stats(); st.FrameLimit != 1 || st.TimerExpiries != 1 {
		t.Errorf("stats %+v: want 1 frame-limit and 1 timer batch", st)
	}
}

// Frames spread over the window: the batch closes exactly rx-usecs after
// its first frame, with every frame that came meanwhile, after one sleep.
func TestRXTimerBoundary(t *testing.T) {
	arr := every(time.Millisecond, 7*us, 10) // 1000, 1007, … 1063µs
	out, _, f := runFake(t, Params{RXUsecs: 40}, arr)
	if len(out) < 2 || out[0].at != time.Millisecond+40*us {
		t.Fatalf("first batch at %v, want 1.04ms", out[0].at)
	}
	// Frames at 1000…1035 (6) belong to the first batch.
	if len(out[0].frames) != 6 {
		t.Errorf("first batch has %d frames, want 6 (arrivals up to 1.035ms)", len(out[0].frames))
	}
	if d := maxDelay(out); d > 40*us {
		t.Errorf("max delay %v exceeds rx-usecs 40µs", d)
	}
	if f.sleeps == 0 {
		t.Error("no timed sleep: the policy must not be woken per frame")
	}
}

// Steady traffic: one wake-up per rx-usecs window, about rate×rx-usecs
// frames per batch, and no frame waits longer than rx-usecs.
func TestRXSteadyTraffic(t *testing.T) {
	arr := every(0, 10*us, 10000) // 100k frames/s for 100ms
	out, c, f := runFake(t, Params{RXUsecs: 50}, arr)
	if d := maxDelay(out); d > 50*us {
		t.Errorf("max delay %v exceeds rx-usecs 50µs", d)
	}
	st := c.stats()
	perBatch := float64(st.Frames) / float64(st.Batches)
	wakePerBatch := float64(st.Wakeups) / float64(st.Batches)
	t.Logf("%d batches, %.2f frames/batch, %.2f wake-ups/batch, polls %d sleeps %d", st.Batches, perBatch, wakePerBatch, st.Polls, st.Sleeps)
	if perBatch < 4.5 || wakePerBatch > 1.05 {
		t.Errorf("%.2f frames and %.2f wake-ups per batch: want ~5 frames per wake-up", perBatch, wakePerBatch)
	}
	if f.waits > 5 {
		t.Errorf("%d kernel waits under steady traffic: want the timer mode", f.waits)
	}
	// A clock read is a syscall on a virtual machine without a vDSO
	// clock: one after the window's sleep, none when Next starts on an
	// empty ring right after the last batch.
	if rpb := float64(f.reads) / float64(st.Batches); rpb > 1.05 {
		t.Errorf("%.2f clock reads per batch: want 1", rpb)
	}
	// The delay histogram is an upper bound of the true delays.
	if got, want := time.Duration(st.Delay.Max), maxDelay(out); got < want {
		t.Errorf("histogram max delay %v below the true max %v", got, want)
	}
	if st.FramesPerBatch.Count != st.Batches || st.FramesPerBatch.Sum != st.Frames {
		t.Errorf("frames-per-batch histogram %d/%d, want %d/%d", st.FramesPerBatch.Count, st.FramesPerBatch.Sum, st.Batches, st.Frames)
	}
}

// rx-frames smaller than rate×rx-usecs: batches close on the frame count,
// after sleeping only as long as the rate says they need.
func TestRXSteadyFrameLimit(t *testing.T) {
	arr := every(0, 10*us, 5000)
	out, c, _ := runFake(t, Params{RXUsecs: 200, RXFrames: 4}, arr)
	if d := maxDelay(out); d > 200*us {
		t.Errorf("max delay %v exceeds rx-usecs", d)
	}
	st := c.stats()
	if st.FrameLimit < st.Batches*9/10 {
		t.Errorf("stats %+v: want nearly all batches closed by rx-frames", st)
	}
	if p50 := st.FramesPerBatch.Quantile(0.5); p50 < 4 || p50 > 5 {
		t.Errorf("median batch %d frames, want 4-5", p50)
	}
}

// Sparse traffic: with not even one more frame expected in the window, the
// frame goes at once rather than costing a second wake-up.
func TestRXSparseEarly(t *testing.T) {
	arr := every(0, 500*us, 200)
	out, c, _ := runFake(t, Params{RXUsecs: 50}, arr)
	st := c.stats()
	if st.Early < st.Batches-3 {
		t.Errorf("stats %+v: want early delivery once the rate is known", st)
	}
	late := 0
	for _, b := range out[3:] {
		if b.at != b.frames[0] {
			late++
		}
	}
	if late != 0 {
		t.Errorf("%d sparse frames were held back", late)
	}
}

// Traffic stops: the receiver leaves the timer mode after one empty window
// and waits in the kernel; the next frame still meets the bound.
func TestRXSteadyThenIdle(t *testing.T) {
	arr := every(0, 10*us, 1000)
	arr = append(arr, 50*time.Millisecond)
	out, _, f := runFake(t, Params{RXUsecs: 50}, arr)
	last := out[len(out)-1]
	if last.at-last.frames[0] > 50*us {
		t.Errorf("frame after idle delivered %v late", last.at-last.frames[0])
	}
	if f.sleeps > 1000/5+20 {
		t.Errorf("%d sleeps: the idle period must be spent in a kernel wait", f.sleeps)
	}
}

func TestRXContext(t *testing.T) {
	f := &fakeRing{capacity: 8, arrivals: []time.Duration{10 * us}, cancel: func() {}}
	p := Params{RXUsecs: 1000}
	p.setDefaults()
	c := newRXCore(p, Options{Clock: f, IdleWait: time.Second}, f)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Open batch: frame at 10µs is there after a wait; a cancelled context
	// hands it over early instead of dropping it.
	f.now = 20 * us
	n, err := c.next(ctx)
	if err != nil || n != 1 {
		t.Fatalf("next with a frame pending and ctx done = %d, %v; want the frame", n, err)
	}
	f.inBatch = 0
	if _, err := c.next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("next with nothing pending and ctx done: %v, want context.Canceled", err)
	}
	ctx, cancel2 := context.WithTimeout(context.Background(), -time.Second)
	defer cancel2()
	if _, err := c.next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expired deadline: %v", err)
	}
}

// Sleeps that end 30µs late (a virtual machine's wake-up latency): the
// receiver measures the lateness and still asks for whole windows, so a
// wake-up collects rx-usecs plus the lateness worth of frames, and no frame
// waits longer than that.
func TestRXLateSleeps(t *testing.T) {
	arr := every(0, 10*us, 20000)
	out, c, _ := runFakeLate(t, Params{RXUsecs: 50}, arr, 30*us)
	st := c.stats()
	t.Logf("lateness %v, %.1f frames per batch", st.SleepLateness, float64(st.Frames)/float64(st.Batches))
	if st.SleepLateness < 25*us || st.SleepLateness > 30*us {
		t.Errorf("measured lateness %v, want about 30µs", st.SleepLateness)
	}
	if d := maxDelay(out); d > 80*us {
		t.Errorf("max delay %v, want at most rx-usecs + lateness = 80µs", d)
	}
	// 80µs windows at 100k frames/s: 8 frames each.
	if pb := float64(st.Frames) / float64(st.Batches); pb < 7.5 {
		t.Errorf("%.1f frames per batch: want about 8 (whole windows)", pb)
	}
	if wpb := float64(st.Wakeups) / float64(st.Batches); wpb > 1.05 {
		t.Errorf("%.2f wake-ups per batch: want one", wpb)
	}
}

// Bursts of 20 frames (all in the ring when the receiver wakes) every
// 500µs: each burst is already a batch, and a
// sleep after it catches nothing. The receiver learns that its sleeps miss
// and hands bursts over at once, about one wake-up per burst, like rx-usecs 0.
func TestRXBursts(t *testing.T) {
	var arr []time.Duration
	for b := 0; b < 400; b++ {
		for i := 0; i < 20; i++ {
			arr = append(arr, time.Duration(b)*500*us)
		}
	}
	_, c, _ := runFake(t, Params{RXUsecs: 50}, arr)
	st := c.stats()
	wpb := float64(st.Wakeups) / 400
	t.Logf("%d batches, %.1f frames and %.2f wake-ups per batch, early %d", st.Batches, float64(st.Frames)/float64(st.Batches), wpb, st.Early)
	if wpb > 1.3 {
		t.Errorf("%.2f wake-ups per burst: want close to one", wpb)
	}
}

// Receivers sleep holding their P only while one P of GOMAXPROCS stays
// free for the rest of the program.
func TestTakeHold(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	if holders.Load() != 0 {
		t.Fatalf("%d holders before the test", holders.Load())
	}
	first, second := takeHold(), takeHold()
	if !first || !second {
		t.Fatal("GOMAXPROCS 3: the first two sleepers must keep their P")
	}
	if takeHold() {
		t.Fatal("GOMAXPROCS 3: a third sleeper kept its P, leaving none free")
	}
	holders.Add(-1)
	if !takeHold() {
		t.Fatal("a P was given back, yet the next sleeper may not keep its own")
	}
	holders.Add(-2)
	runtime.GOMAXPROCS(1)
	if takeHold() {
		t.Fatal("GOMAXPROCS 1: a sleeper kept the only P")
	}
	if holders.Load() != 0 {
		t.Fatalf("%d holders left", holders.Load())
	}
}

// Steady traffic with gaps of about one window (a sender that stalls now
// and then): a window that catches nothing is followed by another, not by
// a wait for the first frame and then the rest of a window, so the gaps
// cost no extra wake-ups.
func TestRXSteadyWithGaps(t *testing.T) {
	var arr []time.Duration
	at := time.Duration(0)
	for i := 0; i < 20000; i++ {
		arr = append(arr, at)
		at += 10 * us
		if i%40 == 39 {
			at += 70 * us
		}
	}
	out, c, _ := runFake(t, Params{RXUsecs: 50}, arr)
	st := c.stats()
	wpb := float64(st.Wakeups) / float64(st.Batches)
	t.Logf("%d batches, %.1f frames and %.2f wake-ups per batch, polls %d", st.Batches, float64(st.Frames)/float64(st.Batches), wpb, st.Polls)
	if wpb > 1.1 {
		t.Errorf("%.2f wake-ups per batch: want about one", wpb)
	}
	if d := maxDelay(out); d > 50*us {
		t.Errorf("max delay %v exceeds rx-usecs", d)
	}
}

// 10M frames/s, rx-frames 64, sleeps ending 40µs late: 64 frames are
// there long before any sleep could end, so the receiver hands batches
// over without sleeping for the few µs rx-frames would take, and sleeps
// no shorter than the lateness when the ring runs dry (each wake-up
// costs the same, however short the sleep asked for).
func TestRXHighRateNoMicroSleeps(t *testing.T) {
	arr := every(0, 100*time.Nanosecond, 50000)
	_, c, f := runFakeLate(t, Params{RXUsecs: 30, RXFrames: 64, BatchSize: 64}, arr, 40*us)
	st := c.stats()
	t.Logf("%d batches, %.1f frames per batch, %d sleeps (%d under 10µs), %d waits", st.Batches, float64(st.Frames)/float64(st.Batches), f.sleeps, f.short, f.waits)
	if f.short > 3 {
		t.Errorf("%d of %d sleeps asked for less than 10µs: want none once the lateness is known", f.short, f.sleeps)
	}
	if pb := float64(st.Frames) / float64(st.Batches); pb < 60 {
		t.Errorf("%.1f frames per batch: want full batches of 64", pb)
	}
}

// Bursts 500µs apart first teach the receiver that its sleeps miss; then
// bursts of exactly rx-frames every 30µs, so that every batch ends at
// rx-frames on the look that opens it. Kernel waits that the next burst
// answers within a window count as evidence that a sleep would catch
// frames too: the receiver goes back to sleeping windows instead of
// waiting in the kernel for every batch.
func TestRXRecoversSleeping(t *testing.T) {
	var arr []time.Duration
	for b := 0; b < 200; b++ {
		for i := 0; i < 20; i++ {
			arr = append(arr, time.Duration(b)*500*us)
		}
	}
	for b := 0; b < 1000; b++ {
		for i := 0; i < 16; i++ {
			arr = append(arr, 100*time.Millisecond+time.Duration(b)*30*us)
		}
	}
	_, c, f := runFake(t, Params{RXUsecs: 50, RXFrames: 16}, arr)
	st := c.stats()
	t.Logf("%d batches, %d polls, %d sleeps", st.Batches, st.Polls, f.sleeps)
	// About 200 polls for the sparse bursts; the 1000 dense ones should
	// not each need one.
	if st.Polls > 400 {
		t.Errorf("%d kernel waits for 200 sparse and 1000 dense bursts: the receiver did not go back to sleeping", st.Polls)
	}
}
