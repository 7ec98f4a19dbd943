package nexthop

import (
	"encoding/json"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// Local follows the kernel's addresses and the interface's MAC, as `ip
// -j addr` and `ip -j link` show them, and OnLocal tells of each change.
func TestLocalFollowsKernel(t *testing.T) {
	changed := make(chan Local, 16)
	p, r := setup(t, Options{OnLocal: func(l Local) { changed <- l }})
	kernel := func() (mac string, own, host []netip.Addr) {
		var links []struct {
			Ifname   string `json:"ifname"`
			Address  string `json:"address"`
			AddrInfo []struct {
				Local string `json:"local"`
				Tent  bool   `json:"tentative"`
			} `json:"addr_info"`
		}
		if err := json.Unmarshal([]byte(ipcmd(t, p.A, "-j", "addr", "show")), &links); err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			for _, a := range l.AddrInfo {
				ip := netip.MustParseAddr(a.Local)
				host = append(host, ip)
				if l.Ifname == p.A.Link && !a.Tent {
					own = append(own, ip)
				}
			}
			if l.Ifname == p.A.Link {
				mac = l.Address
			}
		}
		slices.SortFunc(own, netip.Addr.Compare)
		slices.SortFunc(host, netip.Addr.Compare)
		return mac, own, slices.Compact(host)
	}
	check := func(when string) {
		t.Helper()
		mac, own, host := kernel()
		l := r.Local()
		if l.MAC.String() != mac || !slices.Equal(l.Addrs, own) || !slices.Equal(l.Host, host) {
			t.Errorf("%s: Local() = %v %v %v; the kernel: %v %v %v", when, l.MAC, l.Addrs, l.Host, mac, own, host)
		}
	}
	check("after New")
	wait := func(want func(Local) bool) {
		t.Helper()
		deadline := time.After(3 * time.Second)
		for {
			select {
			case l := <-changed:
				if want(l) {
					return
				}
			case <-deadline:
				t.Fatal("OnLocal did not tell of the change in 3 s")
			}
		}
	}
	extra := netip.MustParseAddr("198.18.0.50")
	ipcmd(t, p.A, "addr", "add", extra.String()+"/24", "dev", p.A.Link)
	wait(func(l Local) bool { return slices.Contains(l.Addrs, extra) })
	check("after an address was added")
	lo := netip.MustParseAddr("198.19.9.9")
	ipcmd(t, p.A, "addr", "add", lo.String()+"/32", "dev", "lo")
	wait(func(l Local) bool { return l.IsHost(lo) && !slices.Contains(l.Addrs, lo) })
	check("after an address on lo was added")
	ipcmd(t, p.A, "link", "set", "dev", p.A.Link, "address", "02:00:00:00:77:77")
	wait(func(l Local) bool { return l.MAC.String() == "02:00:00:00:77:77" })
	check("after the MAC changed")
	ipcmd(t, p.A, "addr", "del", extra.String()+"/24", "dev", p.A.Link)
	wait(func(l Local) bool { return !slices.Contains(l.Addrs, extra) })
	check("after the address was removed")
}
