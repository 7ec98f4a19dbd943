package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdpio/xdpio/filter"
	"github.com/xdpio/xdpio/internal/capset"
	"github.com/xdpio/xdpio/internal/netnstest"
	"golang.org/x/net/bpf"
)

func runFilterCLI(args ...string) (string, error) {
	var out, errb bytes.Buffer
	err := runWith(context.Background(), &globals{stdout: &out, stderr: &errb}, args)
	return out.String(), err
}

func TestFilterCheck(t *testing.T) {
	out, err := runFilterCLI("filter", "check", "udp dst port 4789")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"classic BPF, ", "(000) ldh [12]", "jeq      #0x12b5", "ret #0", "eBPF instructions"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Unsupported: exit status 1 (not a usage error), naming the construct.
	_, err = runFilterCLI("filter", "check", "udp and ip protochain 6")
	var ue *usageError
	if err == nil || errors.As(err, &ue) || !errors.Is(err, filter.ErrUnsupportedConstruct) || !strings.Contains(err.Error(), `"protochain"`) {
		t.Errorf("unsupported construct: %v, want a non-usage error naming protochain", err)
	}
	for _, args := range [][]string{{"filter", "check"}, {"filter", "check", "a", "b"}, {"filter", "check", "udp", "--bogus"}} {
		if _, err := runFilterCLI(args...); !errors.As(err, &ue) {
			t.Errorf("%q: %v, want a usage error (exit 2)", args, err)
		}
	}
}

// --pcap: the verdicts of the real XDP program under BPF_PROG_RUN agree
// with the classic BPF run in x/net/bpf's VM.
func TestFilterCheckPcap(t *testing.T) {
	netnstest.RequirePriv(t)
	frames := capset.Frames()
	var buf bytes.Buffer
	if err := capset.WritePcap(&buf, frames); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "set.pcap")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	const expr = "tcp[tcpflags] & tcp-syn != 0 or udp port 53"
	out, err := runFilterCLI("--json", "filter", "check", expr, "--pcap", path)
	if err != nil {
		t.Fatal(err)
	}
	var got filterCheckJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	prog, _ := filter.Compile(expr)
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Frames) != len(frames) || got.Redirected == nil {
		t.Fatalf("%d frames in the output, want %d", len(got.Frames), len(frames))
	}
	redirected := 0
	for i, f := range frames {
		n, _ := vm.Run(f)
		want := "pass"
		if n != 0 {
			want = "redirect"
			redirected++
		}
		if got.Frames[i].Verdict != want || got.Frames[i].Frame != i+1 || got.Frames[i].Length != len(f) {
			t.Errorf("frame %d: %+v, want %s", i+1, got.Frames[i], want)
		}
	}
	if *got.Redirected != redirected || redirected == 0 {
		t.Errorf("redirected %d, want %d (not 0)", *got.Redirected, redirected)
	}
}
