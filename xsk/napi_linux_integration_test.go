//go:build linux

package xsk_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/xdpio/xdpio/internal/napictl"
	"github.com/xdpio/xdpio/internal/netdev"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/internal/nsdo"
	"github.com/xdpio/xdpio/xsk"
)

// veth does not link its queues to NAPI instances, so NAPIDeferral cannot
// find the NAPIs of the bound queues: Open fails with ErrNotSupported and
// leaves nothing behind. (Drivers that do, virtio-net in test/lab, are
// where the option applies.)
func TestNAPIDeferralNeedsQueueNAPI(t *testing.T) {
	p := netnstest.New(t, netnstest.Config{Queues: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := p.A.Command(ctx, "ethtool", "-K", p.A.Link, "gro", "on").CombinedOutput(); err != nil {
		t.Fatalf("ethtool: %v: %s", err, out)
	}
	err := p.A.Do(func() error {
		d, err := xsk.Open(p.A.Link, xsk.Config{NoProgram: true,
			NAPIDeferral: &xsk.NAPIDeferral{DeferHardIRQs: 2, GROFlushTimeout: 200 * time.Microsecond}})
		if err == nil {
			d.Close()
		}
		return err
	})
	if !errors.Is(err, xsk.ErrNotSupported) {
		t.Fatalf("Open with NAPIDeferral on veth: %v, want ErrNotSupported", err)
	}
	t.Logf("as expected: %v", err)
}

// TestOpenRestoresStaleNAPI: a process applied deferral to the veth's
// NAPIs and was SIGKILLed; the next xsk.Open of the device, without the
// option, puts the originals back.
func TestOpenRestoresStaleNAPI(t *testing.T) {
	p := netnstest.New(t, netnstest.Config{Queues: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := p.A.Command(ctx, "ethtool", "-K", p.A.Link, "gro", "on").CombinedOutput(); err != nil {
		t.Fatalf("ethtool: %v: %s", err, out)
	}
	var c *netdev.Client
	if err := p.A.Do(func() (err error) { c, err = netdev.Dial(); return err }); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	napis, err := c.NAPIs(p.A.Ifindex)
	if err != nil || len(napis) != 2 {
		t.Fatalf("NAPIs: %v %v", napis, err)
	}
	t.Cleanup(func() { napictl.RestoreStale(c, "", p.A.Link, p.A.Ifindex) })
	cmd := netnstest.StartHelper(t, "TestHelperNAPIHolder", "applied", fmt.Sprintf("XSK_NAPI_HELPER=%s %s %d %d %d", p.A.NS, p.A.Link, p.A.Ifindex, napis[0].ID, napis[1].ID))
	cmd.Process.Kill() // a crash: the deferral stays, recorded
	cmd.Wait()
	if n, err := c.NAPI(napis[0].ID); err != nil || *n.DeferHardIRQs != 6 {
		t.Fatalf("the helper's deferral is not in place: %+v %v", n, err)
	}
	err = p.A.Do(func() error {
		d, err := xsk.Open(p.A.Link, xsk.Config{NoProgram: true, Queues: []int{0}})
		if err == nil {
			d.Close()
		}
		return err
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	for _, n := range napis {
		got, err := c.NAPI(n.ID)
		if err != nil || *got.DeferHardIRQs != *n.DeferHardIRQs || *got.GROFlushTimeout != *n.GROFlushTimeout {
			t.Errorf("napi %d after Open: %+v %v, want the originals %d %v", n.ID, got.NAPIConfig, err, *n.DeferHardIRQs, *n.GROFlushTimeout)
		}
	}
}

func TestHelperNAPIHolder(t *testing.T) {
	f := netnstest.HelperArgs(t, "XSK_NAPI_HELPER")
	ifindex, _ := strconv.Atoi(f[2])
	var ids []uint32
	for _, s := range f[3:] {
		v, _ := strconv.ParseUint(s, 10, 32)
		ids = append(ids, uint32(v))
	}
	err := nsdo.DoNamed(f[0], func() error {
		c, err := netdev.Dial()
		if err != nil {
			return err
		}
		_, err = napictl.Apply(c, napictl.Request{Ifname: f[1], Ifindex: ifindex, NAPIs: ids,
			Settings: napictl.Settings{DeferHardIRQs: 6, GROFlushTimeout: 100 * time.Microsecond}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("applied")
	time.Sleep(20 * time.Second)
}
