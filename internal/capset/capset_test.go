package capset

import (
	"bytes"
	"testing"
)

// The pcap round trip keeps every frame and its index.
func TestPcapRoundTrip(t *testing.T) {
	frames := Frames()
	var buf bytes.Buffer
	if err := WritePcap(&buf, frames); err != nil {
		t.Fatal(err)
	}
	got, idx, err := ReadPcap(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(frames) {
		t.Fatalf("read %d frames, wrote %d", len(got), len(frames))
	}
	for i := range got {
		if idx[i] != i || !bytes.Equal(got[i], frames[i]) || len(frames[i]) < 14 {
			t.Fatalf("frame %d: index %d, % x, want % x (14 bytes at least)", i, idx[i], got[i], frames[i])
		}
	}
}
