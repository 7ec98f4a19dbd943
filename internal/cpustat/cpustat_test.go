//go:build linux

package cpustat

import (
	"errors"
	"math"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestProcStatTotalsAreCoreSums reads the real /proc/stat: the kernel
// writes its "cpu" line as the sum of the per-core lines, which is the
// oracle for the parser.
func TestProcStatTotalsAreCoreSums(t *testing.T) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Skipf("no /proc/stat here: %v", err)
	}
	st, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.cores) == 0 {
		t.Fatal("no per-core lines parsed")
	}
	var sum ticks
	for _, c := range st.cores {
		for i := range sum {
			sum[i] += c[i]
		}
	}
	// The kernel sums nanoseconds and converts once, so each field of
	// the total may differ from the sum of the converted core fields by
	// less than one tick per core.
	for i := range sum {
		d := int64(sum[i]) - int64(st.total[i])
		if d < -int64(len(st.cores)) || d > int64(len(st.cores)) {
			t.Errorf("field %d: cores sum to %d, total line says %d", i, sum[i], st.total[i])
		}
	}
}

func TestCPUUsagePercentages(t *testing.T) {
	a, err := Parse([]byte("cpu  100 0 50 800 0 0 50 0 0 0\ncpu0 50 0 25 400 0 0 25 0 0 0\ncpu1 50 0 25 400 0 0 25 0 0 0\nintr 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	// Over 2 s (200 ticks a core): core 0 fully busy, 60 user, 20 system,
	// 20 softirq; core 1 idle.
	b, err := Parse([]byte("cpu  220 0 90 1000 0 0 90 0 0 0\ncpu0 170 0 65 400 0 0 65 0 0 0\ncpu1 50 0 25 600 0 0 25 0 0 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	cores, busy := b.Since(a, 100)
	if len(cores) != 3 || cores[0].CPU != "all" || cores[1].CPU != "0" || cores[2].CPU != "1" {
		t.Fatalf("cores %+v", cores)
	}
	near := func(name string, got, want float64) {
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	near("core 0 user", cores[1].User, 60)
	near("core 0 system", cores[1].System, 20)
	near("core 0 softirq", cores[1].SoftIRQ, 20)
	near("core 0 busy", cores[1].Busy(), 100)
	near("core 1 idle", cores[2].Idle, 100)
	near("all busy", cores[0].Busy(), 50)
	near("busy seconds", busy, 2)
}

func TestProcStatErrors(t *testing.T) {
	for _, in := range []string{
		"",
		"intr 5\n",
		"cpu 1 2 3\n",
		"cpu 1 2 3 4 5 6 7 x 9\n",
		"cpu 1 2 3 4 5 6 7 8\ncpu 1 2 3 4 5 6 7 8\n",
		"cpu 1 2 3 4 5 6 7 8\ncpuX 1 2 3 4 5 6 7 8\n",
	} {
		if _, err := Parse([]byte(in)); !errors.Is(err, ErrProcStat) {
			t.Errorf("Parse(%q) = %v, want ErrProcStat", in, err)
		}
	}
}

// TestCPUMeterSeesWork: a thread that spins is seen in its own
// thread time, in the process's user time and in the busy time of the
// cores.
func TestCPUMeterSeesWork(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	m := Start()
	done := make(chan float64)
	go func() {
		stop := ThreadClock()
		// The thread may be an old one: its clock counts from its start.
		until := threadCPUSeconds() + 0.15
		deadline := time.Now().Add(5 * time.Second)
		for threadCPUSeconds() < until && time.Now().Before(deadline) {
			x := 0
			for i := 0; i < 1e6; i++ {
				x += i
			}
			_ = x
		}
		done <- stop()
	}()
	secs := <-done
	m.Thread(secs)
	u := m.Finish()
	if u.ThreadSeconds != secs || secs < 0.1 {
		t.Errorf("data thread %.3f s (reported %.3f s), want ≥ 0.1 s", u.ThreadSeconds, secs)
	}
	if u.BusySeconds < 0.1 {
		t.Errorf("cores busy %.3f s, want ≥ 0.1 s", u.BusySeconds)
	}
	if u.User <= 0 || u.Total < u.User {
		t.Errorf("process CPU %+v", u)
	}
	if len(u.Cores) != runtime.NumCPU()+1 {
		t.Errorf("%d core lines, want %d and the average", len(u.Cores), runtime.NumCPU())
	}
}

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("cpu  100 0 50 800 0 0 50 0 0 0\ncpu0 50 0 25 400 0 0 25 0 0 0\n"))
	f.Add([]byte("cpu 1 2 3 4 5 6 7 8\ncpu3 1 2 3 4 5 6 7 8\nctxt 9\n"))
	f.Add([]byte("cpu0 1 2 3\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrProcStat) {
				t.Fatalf("error %v does not wrap ErrProcStat", err)
			}
			return
		}
		cores, _ := st.Since(st, 100)
		if len(cores) != len(st.cores)+1 {
			t.Fatalf("%d usage lines for %d cores", len(cores), len(st.cores))
		}
	})
}
