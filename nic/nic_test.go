package nic_test

import (
	"testing"
	"time"

	"github.com/xdpio/xdpio/nic"
)

func TestDeltaResetAndNewQueue(t *testing.T) {
	t0 := time.Unix(100, 0)
	prev := nic.Snapshot{Time: t0, Queues: []nic.QueueStats{
		{Type: nic.RX, Queue: 0, Counters: map[string]uint64{"rx-packets": 500}},
		{Type: nic.TX, Queue: 0, Counters: map[string]uint64{"tx-packets": 7}},
	}}
	cur := nic.Snapshot{Time: t0.Add(time.Second), Queues: []nic.QueueStats{
		{Type: nic.RX, Queue: 0, Counters: map[string]uint64{"rx-packets": 20}}, // reset by reconfiguration
		{Type: nic.TX, Queue: 0, Counters: map[string]uint64{"tx-packets": 9}},
		{Type: nic.RX, Queue: 1, Counters: map[string]uint64{"rx-packets": 3}}, // new queue
	}}
	d := cur.Delta(prev)
	want := []uint64{20, 2, 3}
	names := []string{"rx-packets", "tx-packets", "rx-packets"}
	for i, q := range d.Queues {
		if q.Counters[names[i]] != want[i] {
			t.Errorf("queue %s %d: %s = %d, want %d", q.Type, q.Queue, names[i], q.Counters[names[i]], want[i])
		}
	}
	if got := nic.Total(d.Queues)["rx-packets"]; got != 23 {
		t.Errorf("total rx-packets %d, want 23", got)
	}
	if r := (nic.Delta{}).Rate(d.Queues[0], "rx-packets"); r != 0 {
		t.Errorf("rate over a zero interval: %v", r)
	}
	if got := nic.CounterNames(map[string]uint64{"attr-99": 1, "tx-bytes": 1, "rx-packets": 1}); got[0] != "rx-packets" || got[2] != "attr-99" {
		t.Errorf("CounterNames order: %v", got)
	}
}
