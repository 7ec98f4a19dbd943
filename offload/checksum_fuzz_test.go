package offload

import "testing"

// FuzzChecksum compares every implementation with the plain RFC 1071 loop
// on arbitrary bytes, start offsets and initial values.
func FuzzChecksum(f *testing.F) {
	f.Add([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}, uint16(0), uint8(0))
	f.Add(make([]byte, 300), uint16(0xffff), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, initial uint16, off uint8) {
		p := b[int(off)%(len(b)+1):]
		want := refChecksum(p, initial)
		for name, fn := range implementations() {
			if got := fn(p, initial); got != want {
				t.Fatalf("%s(len %d, initial %#04x) = %#04x, want %#04x", name, len(p), initial, got, want)
			}
		}
	})
}
