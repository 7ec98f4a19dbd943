package place_test

import (
	"fmt"
	"net/netip"

	"github.com/xdpio/xdpio/bench/place"
	"github.com/xdpio/xdpio/rss"
)

// A Placer for a server NIC with 4 RX queues (the default key, an even
// table) gives each stream a source port its RSS hash puts on the next
// queue in turn; the predictor confirms where each lands.
func ExamplePlacer() {
	table, err := rss.Equal(4, 128)
	if err != nil {
		fmt.Println(err)
		return
	}
	pred, err := rss.NewPredictor(rss.PredictorOptions{Indirection: table})
	if err != nil {
		fmt.Println(err)
		return
	}
	p := &place.Placer{Predictor: pred}
	src := netip.MustParseAddr("198.18.0.1")
	server := netip.MustParseAddrPort("198.18.0.2:5201")
	for i := 0; i < 4; i++ {
		port, queue, err := p.Port(src, server, 0, 0)
		if err != nil {
			fmt.Println(err)
			return
		}
		k := rss.FlowKey{Src: src, Dst: server.Addr(), SrcPort: port, DstPort: server.Port(), Proto: 17, Ports: true}
		got, err := pred.Queue(k)
		fmt.Println("stream", i, "queue", queue, "predicted", got == queue && err == nil)
	}
	fmt.Println(len(p.Placements()), "placements")
	// Output:
	// stream 0 queue 0 predicted true
	// stream 1 queue 1 predicted true
	// stream 2 queue 2 predicted true
	// stream 3 queue 3 predicted true
	// 4 placements
}
