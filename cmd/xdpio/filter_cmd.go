package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/gopacket/gopacket/layers"
	"github.com/spf13/cobra"
	"golang.org/x/net/bpf"

	"github.com/xdpio/xdpio/filter"
	"github.com/xdpio/xdpio/xsk"
)

// newFilterCmd builds `xdpio filter`, the parent of the filter commands.
func newFilterCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "filter",
		Short: "Compile tcpdump filter expressions to the XDP program and test them",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(newFilterCheckCmd(g))
	return c
}

// filterCheckJSON is the --json form of `xdpio filter check`.
type filterCheckJSON struct {
	Expression   string              `json:"expression"`
	Instructions []string            `json:"instructions"`
	EBPFCount    int                 `json:"ebpf_instructions"`
	Frames       []filterVerdictJSON `json:"frames,omitempty"`
	Redirected   *int                `json:"redirected,omitempty"`
	Passed       *int                `json:"passed,omitempty"`
}

type filterVerdictJSON struct {
	Frame   int    `json:"frame"`
	Length  int    `json:"length"`
	Verdict string `json:"verdict"` // "redirect", "pass", "skipped"
	Reason  string `json:"reason,omitempty"`
}

func newFilterCheckCmd(g *globals) *cobra.Command {
	var pcap string
	c := &cobra.Command{
		Use:   "check EXPR [--pcap FILE]",
		Short: "Print the classic BPF an expression compiles to, or the error naming what is unsupported",
		Long: `Compile a tcpdump (pcap-filter) expression the way xdpio's AF_XDP sockets
compile their filter (frames that match go to the socket, the others to
the kernel's stack) and print the classic BPF, as tcpdump -d would, and the
size of the XDP program it becomes. An expression using a construct the compiler does not
implement fails (exit status 1) with an error naming the construct.

With --pcap, every frame of the capture (pcap or pcapng, Ethernet) runs
through the real XDP program in the kernel's test run (BPF_PROG_RUN, needs
root): "redirect" frames would reach the AF_XDP sockets, "pass" ones the
kernel stack.`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("filter check: want one expression (quote it), got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			return runFilterCheck(c.Context(), g, args[0], pcap)
		},
	}
	c.Flags().StringVar(&pcap, "pcap", "", "run each frame of this capture through the XDP program")
	return c
}

// runFilterCheck compiles expr (and runs the capture through it) apart
// from the command, so that Ctrl-C or SIGTERM (ctx) ends the command at
// once whatever the work is doing — compiling, running frames, reading a
// capture that is still being written — rather than when it next looks
// at ctx; the work stops at its next look.
func runFilterCheck(ctx context.Context, g *globals, expr, pcap string) error {
	type result struct {
		out filterCheckJSON
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := filterCheck(ctx, expr, pcap)
		done <- result{out, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
	}
	if ctx.Err() != nil {
		return fmt.Errorf("filter check: %w", errInterrupted)
	}
	if r.err != nil {
		return r.err
	}
	out := r.out
	if g.json {
		return writeJSON(g.stdout, out)
	}
	w := g.stdout
	fmt.Fprintf(w, "expression: %s\n", expr)
	fmt.Fprintf(w, "classic BPF, %d instructions:\n", len(out.Instructions))
	for i, s := range out.Instructions {
		fmt.Fprintf(w, "(%03d) %s\n", i, s)
	}
	fmt.Fprintf(w, "XDP program: %d eBPF instructions for the filter\n", out.EBPFCount)
	if out.Redirected != nil {
		for _, f := range out.Frames {
			fmt.Fprintf(w, "frame %d (%d bytes): %s", f.Frame, f.Length, f.Verdict)
			if f.Reason != "" {
				fmt.Fprintf(w, " (%s)", f.Reason)
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%d of %d frames redirected, %d passed\n", *out.Redirected, len(out.Frames), *out.Passed)
	}
	return nil
}

// filterCheck compiles expr and, with a capture, runs its frames through
// the XDP program.
func filterCheck(ctx context.Context, expr, pcap string) (filterCheckJSON, error) {
	prog, err := filter.Compile(expr)
	if err != nil {
		return filterCheckJSON{}, fmt.Errorf("filter check: %w", err)
	}
	ebpf, err := filter.XDP(prog, "redirect", "pass")
	if err != nil {
		return filterCheckJSON{}, fmt.Errorf("filter check: translate to XDP: %w", err)
	}
	out := filterCheckJSON{Expression: expr, EBPFCount: len(ebpf)}
	for i, ins := range prog {
		out.Instructions = append(out.Instructions, formatBPF(i, ins))
	}
	if pcap != "" {
		if err := filterPcap(ctx, &out, expr, pcap); err != nil {
			return filterCheckJSON{}, err
		}
	}
	return out, nil
}

// verdictBatch is how many frames go through one load of the XDP program:
// between batches, and every frame read, the run looks at its context.
const verdictBatch = 1 << 14

// filterPcap runs the capture's frames through the XDP program built for
// expr, a batch at a time, until the capture ends or ctx is done. Frames
// shorter than an Ethernet header, or of another link type, are skipped
// (the test run refuses them).
func filterPcap(ctx context.Context, out *filterCheckJSON, expr, path string) error {
	r, err := openCapture(path)
	if err != nil {
		return fmt.Errorf("filter check: %w", err)
	}
	defer r.Close()
	var frames [][]byte
	var index []int
	redirected, passed := 0, 0
	run := func() error {
		if len(frames) == 0 {
			return nil
		}
		verdicts, err := xsk.Verdicts(xsk.ProgramConfig{Expr: expr}, frames)
		if err != nil {
			return fmt.Errorf("filter check: run the XDP program: %w", err)
		}
		for j, ok := range verdicts {
			if ok {
				out.Frames[index[j]].Verdict = "redirect"
				redirected++
			} else {
				out.Frames[index[j]].Verdict = "pass"
				passed++
			}
		}
		frames, index = frames[:0], index[:0]
		return ctx.Err()
	}
	for i := 1; ; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, _, lt, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("filter check: %s: %w", path, err)
		}
		v := filterVerdictJSON{Frame: i, Length: len(data)}
		switch {
		case lt != layers.LinkTypeEthernet:
			v.Verdict, v.Reason = "skipped", fmt.Sprintf("link type %v, not Ethernet", lt)
		case len(data) < 14:
			v.Verdict, v.Reason = "skipped", "shorter than an Ethernet header"
		default:
			frames = append(frames, data)
			index = append(index, len(out.Frames))
		}
		out.Frames = append(out.Frames, v)
		if len(frames) == verdictBatch {
			if err := run(); err != nil {
				return err
			}
		}
	}
	if err := run(); err != nil {
		return err
	}
	out.Redirected, out.Passed = &redirected, &passed
	return nil
}

// formatBPF prints a classic BPF instruction; jumps as tcpdump -d prints
// them (jeq, jgt, jge, jset with absolute targets), the rest as
// golang.org/x/net/bpf does.
func formatBPF(i int, ins bpf.Instruction) string {
	jump := func(cond bpf.JumpTest, operand string, st, sf uint8) string {
		t, f := i+1+int(st), i+1+int(sf)
		op := map[bpf.JumpTest]string{
			bpf.JumpEqual: "jeq", bpf.JumpNotEqual: "jeq", bpf.JumpGreaterThan: "jgt", bpf.JumpLessOrEqual: "jgt",
			bpf.JumpGreaterOrEqual: "jge", bpf.JumpLessThan: "jge", bpf.JumpBitsSet: "jset", bpf.JumpBitsNotSet: "jset",
		}[cond]
		switch cond {
		case bpf.JumpNotEqual, bpf.JumpLessOrEqual, bpf.JumpLessThan, bpf.JumpBitsNotSet:
			t, f = f, t
		}
		return fmt.Sprintf("%-8s %-16s jt %d  jf %d", op, operand, t, f)
	}
	switch ins := ins.(type) {
	case bpf.JumpIf:
		return jump(ins.Cond, fmt.Sprintf("#0x%x", ins.Val), ins.SkipTrue, ins.SkipFalse)
	case bpf.JumpIfX:
		return jump(ins.Cond, "x", ins.SkipTrue, ins.SkipFalse)
	case bpf.Jump:
		return fmt.Sprintf("%-8s %d", "ja", i+1+int(ins.Skip))
	}
	return fmt.Sprint(ins)
}
