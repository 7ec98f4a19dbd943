package iperf3

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func TestTCPMessagesCheck(t *testing.T) {
	ok := TCPStreams{MSS: 1460, Streams: []TCPStreamInfo{{ID: 1, Src: "198.18.0.1", SrcPort: 20000, ISN: 5}, {ID: 3, Src: "198.18.0.1", SrcPort: 20001}}}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]TCPStreams{
		"mss":      {MSS: 20, Streams: ok.Streams},
		"none":     {MSS: 1460},
		"bad addr": {MSS: 1460, Streams: []TCPStreamInfo{{ID: 1, Src: "x", SrcPort: 1}}},
		"port 0":   {MSS: 1460, Streams: []TCPStreamInfo{{ID: 1, Src: "198.18.0.1"}}},
		"twice":    {MSS: 1460, Streams: []TCPStreamInfo{ok.Streams[0], ok.Streams[0]}},
		"mcast":    {MSS: 1460, Streams: []TCPStreamInfo{{ID: 1, Src: "ff02::1", SrcPort: 1}}},
	} {
		b, _ := json.Marshal(s)
		var got TCPStreams
		if err := DecodeMessage(b, &got); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", name, err)
		}
	}
	// The params message carries iperf3's keys and ours.
	b, _ := json.Marshal(&TCPParamsMsg{Params: Params{TCP: true, Time: 2, Parallel: 1}, TCP: &TCPParams{Version: 1, TSO: true, MSS: 1460}})
	p, tp, err := ReadParams(bytes.NewReader(append([]byte{0, 0, 0, byte(len(b))}, b...)))
	if err != nil || tp == nil || !tp.TSO || !p.TCP || p.Time != 2 {
		t.Errorf("params %s: %+v %+v %v", b, p, tp, err)
	}
	var raw map[string]any
	json.Unmarshal(b, &raw)
	if _, ok := raw[TCPParamsKey]; !ok || raw["tcp"] != true {
		t.Errorf("params JSON %s lacks %q or tcp", b, TCPParamsKey)
	}
}
