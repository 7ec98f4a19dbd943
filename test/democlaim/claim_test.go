package main

import (
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// recorded is a demo run's --json output, kept with the demo's tests (a
// loaded machine's: xsk lost 12.5% in its steady state, the socket's
// steady state left its start out).
const recorded = "../../cmd/xdpio/testdata/demo-run.json"

// A recorded run reads as the demo computed it: the ratios of xsk's to
// the socket's packets/s and CPU per packet, xsk's steady-state loss and
// limit, the machine's cores; and makes a one-run claim without ranges.
func TestParseRecorded(t *testing.T) {
	data, err := os.ReadFile(recorded)
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseRun(data)
	if err != nil {
		t.Fatal(err)
	}
	// From the file: xsk 528800.16 and socket 303027.98 packets/s over the
	// sending window... as its headline says: 531782 vs 304789, 3890 vs
	// 6820 ns.
	if m.Cores != 2 || m.SenderLimit || m.StartupExcluded || m.Ratio < 1.744 || m.Ratio > 1.746 || m.CPU < 0.570 || m.CPU > 0.571 || m.Lost < 12.52 || m.Lost > 12.53 {
		t.Errorf("recorded run: %+v", m)
	}
	c, err := summariseRuns([]measure{m})
	if err != nil {
		t.Fatal(err)
	}
	want := "On a 2-core machine, over 1 run of the demo (`make demo-claim`: median, and range), xsk at both ends received 1.74× the kernel socket's packets/s at 0.57× the machine's CPU time per packet, and lost 12.5% of what it was sent in the steady state; the sender was the limit in 0 of 1 run."
	if got := c.text(); got != want {
		t.Errorf("claim of the recorded run:\n got %s\nwant %s", got, want)
	}
	for _, bad := range []string{"", "{}", `{"results": [{"backend": "xsk"}]}`, strings.Replace(string(data), `"limit": "receiver"`, `"limit": "nobody"`, 1),
		strings.Replace(string(data), `"backend": "socket"`, `"backend": "kernel"`, 1), strings.ReplaceAll(string(data), `"cpu": "`, `"CPU-": "`)} {
		if m, err := parseRun([]byte(bad)); err == nil {
			t.Errorf("parseRun took %.60q: %+v", bad, m)
		}
	}
}

// Several runs make a claim of medians and ranges, which reads back to
// the same figures; a text that is not exactly what its figures make is
// not a claim.
func TestClaimRoundTrip(t *testing.T) {
	run := func(ratio, cpu, lost float64, startup, sender bool) measure {
		return measure{Ratio: ratio, CPU: cpu, Lost: lost, StartupExcluded: startup, SenderLimit: sender, Cores: 2}
	}
	for _, c := range []struct {
		name string
		runs []measure
		want claim
		text string
	}{
		{"five, the sender the limit", []measure{run(2.55, 0.35, 0, false, true), run(2.41, 0.33, 0.04, false, true), run(2.70, 0.39, 0.1, true, true), run(2.5, 0.36, 0, false, true), run(2.6, 0.37, 0, false, true)},
			claim{Cores: 2, Runs: 5, Ratio: stat{2.55, 2.41, 2.7}, CPU: stat{0.36, 0.33, 0.39}, Lost: stat{0, 0, 0.1}, Startup: 1, SenderLimit: 5},
			"On a 2-core machine, over 5 runs of the demo (`make demo-claim`: median, and range), xsk at both ends received 2.55× (2.41–2.70×) the kernel socket's packets/s at 0.36× (0.33–0.39×) the machine's CPU time per packet, and lost 0.0% (0.0–0.1%) of what it was sent in the steady state (1 run left its first second out as a startup effect); the sender was the limit in 5 of 5 runs, its copy-mode transmit on veth (an skb per frame, and the receiving side's XDP and copy run in its system calls)."},
		{"four, mostly the receiver", []measure{run(1.8, 0.5, 5, true, false), run(2.0, 0.4, 0.5, true, true), run(1.9, 0.45, 3, false, false), run(2.1, 0.42, 2, false, false)},
			claim{Cores: 2, Runs: 4, Ratio: stat{1.95, 1.8, 2.1}, CPU: stat{0.44, 0.4, 0.5}, Lost: stat{2.5, 0.5, 5}, Startup: 2, SenderLimit: 1},
			"On a 2-core machine, over 4 runs of the demo (`make demo-claim`: median, and range), xsk at both ends received 1.95× (1.80–2.10×) the kernel socket's packets/s at 0.44× (0.40–0.50×) the machine's CPU time per packet, and lost 2.5% (0.5–5.0%) of what it was sent in the steady state (2 runs left their first second out as a startup effect); the sender was the limit in 1 of 4 runs."},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := summariseRuns(c.runs)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("claim (-want +got):\n%s", diff)
			}
			if got.text() != c.text {
				t.Errorf("text:\n got %s\nwant %s", got.text(), c.text)
			}
			back, err := parseClaim(strings.ReplaceAll(c.text, " the ", "\n  the "))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, back); diff != "" {
				t.Errorf("read back (-want +got):\n%s", diff)
			}
			for _, bad := range []string{
				strings.Replace(c.text, "2-core", "two-core", 1),
				strings.Replace(c.text, "median", "mean", 1),
				strings.Replace(c.text, ")", "", 1),
				strings.Replace(c.text, "×", "x", 1),
				strings.TrimSuffix(c.text, "."),
				strings.Replace(c.text, "runs of", "run of", 1),
			} {
				if _, err := parseClaim(bad); err == nil {
					t.Errorf("parseClaim took %q", bad)
				}
			}
		})
	}
	if _, err := summariseRuns(nil); err == nil {
		t.Errorf("a claim of no runs")
	}
	if _, err := summariseRuns([]measure{{Cores: 2}, {Cores: 4}}); err == nil {
		t.Errorf("a claim of runs on two machines")
	}
}

// The claim goes between the markers, wrapped to the README's width,
// never with a marker starting a line (that would end the paragraph); the
// rest of the README stays as it was; a README without its markers, or
// with two, is refused.
func TestReplaceClaim(t *testing.T) {
	readme := "# x\n\nThe demo prints its figures, in under a minute. " + openMark + "old claim" + closeMark + "\nIt needs root.\n\nMore.\n"
	text := strings.Repeat("word ", 40) + "end."
	got, before, err := replaceClaim(readme, text)
	if err != nil {
		t.Fatal(err)
	}
	if before != "old claim" {
		t.Errorf("old claim %q", before)
	}
	start, end, err := findClaim(got)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(strings.Fields(got[start:end]), " ") != strings.TrimSpace(text) || got[:start] != readme[:strings.Index(readme, openMark)+len(openMark)] || got[end:] != readme[strings.Index(readme, closeMark):] {
		t.Errorf("replaced:\n%s", got)
	}
	for _, l := range strings.Split(got, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "<!--") {
			t.Errorf("a line starts with a marker: %q", l)
		}
		if n := utf8.RuneCountInString(l); n > claimWidth && !strings.Contains(l, closeMark) {
			t.Errorf("a %d-column line: %q", n, l)
		}
	}
	if again, _, _ := replaceClaim(got, text); again != got {
		t.Errorf("a second replace changed it:\n%s\n%s", got, again)
	}
	for _, bad := range []string{"no markers", openMark + closeMark + openMark, closeMark + " " + openMark, openMark + openMark + closeMark} {
		if _, _, err := replaceClaim(bad, text); err == nil {
			t.Errorf("replaceClaim took %q", bad)
		}
	}
}

// The README's claim is there once, in the paragraph about make demo,
// and is exactly what make demo-claim writes.
func TestREADMEClaim(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	start, end, err := findClaim(readme)
	if err != nil {
		t.Fatal(err)
	}
	para := readme[strings.LastIndex(readme[:start], "\n\n"):]
	para = para[:strings.Index(para[2:], "\n\n")+2]
	if !strings.Contains(para, "The demo builds") || !strings.Contains(para, "`make demo-claim`") || strings.Index(readme, "## Quick start") < end {
		t.Errorf("the claim is not in the paragraph about make demo:\n%s", para)
	}
	for _, l := range strings.Split(para, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "<!--") {
			t.Errorf("a line of the paragraph starts with a marker: %q", l)
		}
	}
	c, err := parseClaim(readme[start:end])
	if err != nil {
		t.Fatal(err)
	}
	if c.Runs < 1 || c.SenderLimit > c.Runs || c.Startup > c.Runs || c.Ratio.Low > c.Ratio.Median || c.Ratio.Median > c.Ratio.High {
		t.Errorf("README's claim %+v", c)
	}
}
