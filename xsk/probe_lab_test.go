//go:build lab && linux

package xsk_test

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/xdpio/xdpio/nic"
	"github.com/xdpio/xdpio/test/lab/labctl"
	"github.com/xdpio/xdpio/xsk"
)

func TestLabQueuesProbe(t *testing.T) {
	name := labctl.Virtio(t)
	d, err := nic.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	f, err := d.XDPFeatures()
	t.Logf("features %+v err %v", f, err)
	qs, err := d.Queues()
	t.Logf("queues %+v err %v", qs, err)
	ns, err := d.NAPIs(nic.AllNAPIs())
	for _, n := range ns {
		t.Logf("napi %+v %v", n, n.NAPISettings)
	}
	t.Logf("napis err %v", err)
	out, _ := exec.Command("ethtool", "-S", name).CombinedOutput()
	t.Logf("ethtool -S:\n%s", out)
	out, _ = exec.Command("ethtool", "-i", name).CombinedOutput()
	t.Logf("ethtool -i:\n%s", out)
	b, _ := os.ReadFile("/proc/interrupts")
	t.Logf("interrupts:\n%s", b)
	for _, mode := range []xsk.BindMode{xsk.BindZeroCopy, xsk.BindAuto} {
		cfg := xsk.Config{Queues: []int{0}}
		cfg.Socket.Bind = mode
		start := time.Now()
		dev, err := xsk.Open(name, cfg)
		if err != nil {
			t.Logf("bind %v: %v", mode, err)
			continue
		}
		t.Logf("bind %v: zerocopy=%v (%v)", mode, dev.Sockets()[0].ZeroCopy(), time.Since(start))
		dev.Close()
	}
}
