package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// FuzzParseFeaturePairs: any words after `features set DEV` are a map of
// names to on/off or a usage error (exit 2), never a panic; the map holds
// each name given, with the state given for it.
func FuzzParseFeaturePairs(f *testing.F) {
	for _, s := range []string{"gso off", "gso on tso off", "gso on gso off", "gso on gso on", "gso maybe", "gso", "", "tx on rx-gro off lro on"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pairs := strings.Fields(s)
		want, err := parseFeaturePairs(pairs)
		if err != nil {
			if ue := (*usageError)(nil); !errors.As(err, &ue) {
				t.Fatalf("parseFeaturePairs(%q): %v is not a usage error", pairs, err)
			}
			return
		}
		if len(pairs)%2 != 0 || len(want) > len(pairs)/2 {
			t.Fatalf("parseFeaturePairs(%q) = %v from an odd or short list", pairs, want)
		}
		for i := 0; i < len(pairs); i += 2 {
			if on, ok := want[pairs[i]]; !ok || onOff(on) != pairs[i+1] {
				t.Fatalf("parseFeaturePairs(%q) = %v: %s is not %s", pairs, want, pairs[i], pairs[i+1])
			}
		}
	})
}

// FuzzRSSSetRequest: any --weights, --key, --xfrm and --flow-hash of rss
// set make a request or a usage error, never a panic; a request sets what
// was given (a key when --key is, a transformation when --xfrm is, one
// flow type per --flow-hash at most) and a weight per comma-separated
// field.
func FuzzRSSSetRequest(f *testing.F) {
	f.Add("1,2,3", "6d:5a:56:da", "symmetric-xor", "udp4=ip-src,ip-dst")
	f.Add("", "", "", "tcp6=l4-src,l4-dst")
	f.Add("0", "zz", "none", "udp4=bogus")
	f.Add("1,,2", "6d5a56da255b0ec2", "bogus", "=")
	f.Fuzz(func(t *testing.T, weights, key, xfrm, flowHash string) {
		var o rssSetOptions
		fs := pflag.NewFlagSet("rss set", pflag.ContinueOnError)
		o.addFlags(fs)
		for name, v := range map[string]string{"weights": weights, "key": key, "xfrm": xfrm, "flow-hash": flowHash} {
			if v != "" {
				if err := fs.Set(name, v); err != nil {
					t.Fatalf("--%s %q: %v", name, v, err)
				}
			}
		}
		r, err := o.request(fs, "dev")
		if err != nil {
			if ue := (*usageError)(nil); !errors.As(err, &ue) {
				t.Fatalf("rss set --weights %q --key %q --xfrm %q --flow-hash %q: %v is not a usage error", weights, key, xfrm, flowHash, err)
			}
			return
		}
		switch {
		case (r.cfg.Key != nil) != (key != ""):
			t.Fatalf("--key %q: request key %x", key, r.cfg.Key)
		case (r.cfg.InputXfrm != nil) != (xfrm != ""):
			t.Fatalf("--xfrm %q: request %v", xfrm, r.cfg.InputXfrm)
		case len(r.cfg.FlowHash) > 1 || (len(r.cfg.FlowHash) == 1) != (flowHash != ""):
			t.Fatalf("--flow-hash %q: request %v", flowHash, r.cfg.FlowHash)
		case weights != "" && (r.spread != "weights" || len(r.weights) != strings.Count(weights, ",")+1):
			t.Fatalf("--weights %q: request %q %v", weights, r.spread, r.weights)
		case weights == "" && (r.spread != "" || r.weights != nil):
			t.Fatalf("no --weights: request %q %v", r.spread, r.weights)
		}
	})
}

// FuzzRSSHashFlow: any --src, --dst, --sport and --dport of rss hash
// make a flow of two addresses of one family, without zones, or a usage
// error, never a panic.
func FuzzRSSHashFlow(f *testing.F) {
	f.Add("198.18.0.1", "198.18.0.2", uint16(1), uint16(2), true, true)
	f.Add("::ffff:198.18.0.1", "198.18.0.2", uint16(0), uint16(0), false, false)
	f.Add("fe80::1%eth0", "2001:db8::2", uint16(1), uint16(0), true, false)
	f.Add("198.18.0.1", "2001:db8::2", uint16(0), uint16(0), false, false)
	f.Add("", "x", uint16(0), uint16(0), false, false)
	f.Fuzz(func(t *testing.T, src, dst string, sport, dport uint16, sportSet, dportSet bool) {
		fl := rssHashFlags{src: src, dst: dst, sport: sport, dport: dport, sportSet: sportSet, dSet: dportSet}
		k, err := fl.flow()
		if err != nil {
			if ue := (*usageError)(nil); !errors.As(err, &ue) {
				t.Fatalf("flow %q %q: %v is not a usage error", src, dst, err)
			}
			return
		}
		if k.Src.Is4() != k.Dst.Is4() || k.Src.Zone() != "" || k.Dst.Zone() != "" {
			t.Fatalf("flow %q %q = %v", src, dst, k)
		}
		if k.Ports != sportSet || sportSet != dportSet || k.SrcPort != sport || k.DstPort != dport {
			t.Fatalf("flow %q %q ports %d %d (%v %v) = %+v", src, dst, sport, dport, sportSet, dportSet, k)
		}
	})
}
