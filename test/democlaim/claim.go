package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// demoOutput is what this program reads of `xdpio bench demo --json`.
type demoOutput struct {
	Results []struct {
		Backend      string  `json:"backend"`
		PPS          float64 `json:"packets_per_second"`
		CPUPerPacket float64 `json:"cpu_ns_per_packet"`
		Steady       struct {
			LostPercent     float64 `json:"lost_percent"`
			StartupExcluded bool    `json:"startup_excluded"`
			Limit           string  `json:"limit"`
		} `json:"steady"`
		Cores []struct {
			CPU string `json:"cpu"`
		} `json:"cores"`
	} `json:"results"`
}

// measure is one demo's figures for the claim: xsk's received packets/s and
// machine CPU time per packet over the kernel socket's, xsk's loss in
// its steady state, whether that left the startup out, which end was
// the limit, and the machine's cores.
type measure struct {
	Ratio, CPU, Lost float64
	StartupExcluded  bool
	SenderLimit      bool
	Cores            int
}

// parseRun reads one demo's --json output.
func parseRun(data []byte) (measure, error) {
	var out demoOutput
	if err := json.Unmarshal(data, &out); err != nil {
		return measure{}, fmt.Errorf("demo --json: %w", err)
	}
	var r measure
	found := map[string]bool{}
	var xPPS, sPPS, xCPU, sCPU float64
	for _, res := range out.Results {
		switch res.Backend {
		case "xsk":
			xPPS, xCPU = res.PPS, res.CPUPerPacket
			r.Lost, r.StartupExcluded = res.Steady.LostPercent, res.Steady.StartupExcluded
			switch res.Steady.Limit {
			case "sender":
				r.SenderLimit = true
			case "receiver":
			default:
				return measure{}, fmt.Errorf("demo --json: xsk's steady state has limit %q, want sender or receiver", res.Steady.Limit)
			}
			for _, c := range res.Cores {
				if _, err := strconv.Atoi(c.CPU); err == nil {
					r.Cores++ // not "all"
				}
			}
		case "socket":
			sPPS, sCPU = res.PPS, res.CPUPerPacket
		default:
			continue
		}
		found[res.Backend] = true
	}
	switch {
	case !found["xsk"] || !found["socket"]:
		return measure{}, errors.New("demo --json: want an xsk and a socket result")
	case xPPS <= 0 || sPPS <= 0 || xCPU <= 0 || sCPU <= 0:
		return measure{}, fmt.Errorf("demo --json: packets/s %v and %v, CPU per packet %v and %v: want all above 0", xPPS, sPPS, xCPU, sCPU)
	case r.Cores == 0:
		return measure{}, errors.New("demo --json: xsk's result lists no cores")
	}
	r.Ratio, r.CPU = xPPS/sPPS, xCPU/sCPU
	finite := func(v float64) bool { return v > 0 && !math.IsInf(v, 0) }
	if !finite(r.Ratio) || !finite(r.CPU) || r.Lost < 0 || r.Lost > 100 {
		return measure{}, fmt.Errorf("demo --json: ratios %v and %v, %v%% lost: want finite ratios above 0 and a loss of 0-100%%", r.Ratio, r.CPU, r.Lost)
	}
	return r, nil
}

// stat is a figure's median and range over the runs, rounded as the
// claim writes it.
type stat struct{ Median, Low, High float64 }

func summarise(vs []float64, decimals int) stat {
	s := slices.Clone(vs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	r := func(v float64) float64 { p := math.Pow(10, float64(decimals)); return math.Round(v*p) / p }
	return stat{r(m), r(s[0]), r(s[len(s)-1])}
}

// claim is the README's sentence in figures.
type claim struct {
	Cores, Runs int
	Ratio, CPU  stat // two decimals
	Lost        stat // one decimal
	Startup     int  // runs whose steady state left the startup out
	SenderLimit int  // runs the sender limited
}

// summariseRuns makes the claim of runs (at least one, on one machine).
func summariseRuns(runs []measure) (claim, error) {
	if len(runs) == 0 {
		return claim{}, errors.New("no runs")
	}
	c := claim{Cores: runs[0].Cores, Runs: len(runs)}
	var ratio, cpu, lost []float64
	for _, r := range runs {
		if r.Cores != c.Cores {
			return claim{}, fmt.Errorf("runs on %d and %d cores", c.Cores, r.Cores)
		}
		ratio, cpu, lost = append(ratio, r.Ratio), append(cpu, r.CPU), append(lost, r.Lost)
		if r.StartupExcluded {
			c.Startup++
		}
		if r.SenderLimit {
			c.SenderLimit++
		}
	}
	c.Ratio, c.CPU, c.Lost = summarise(ratio, 2), summarise(cpu, 2), summarise(lost, 1)
	return c, nil
}

// senderWhy is what limits the sender, said when it limited most runs.
const senderWhy = ", its copy-mode transmit on veth (an skb per frame, and the receiving side's XDP and copy run in its system calls)"

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// text is the claim's sentence: medians, and ranges when there are
// several runs.
func (c claim) text() string {
	f := func(s stat, decimals int, unit string) string {
		m := strconv.FormatFloat(s.Median, 'f', decimals, 64) + unit
		if c.Runs == 1 {
			return m
		}
		return fmt.Sprintf("%s (%s–%s%s)", m, strconv.FormatFloat(s.Low, 'f', decimals, 64), strconv.FormatFloat(s.High, 'f', decimals, 64), unit)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "On a %d-core machine, over %d %s of the demo (`make demo-claim`: median, and range), xsk at both ends received %s the kernel socket's packets/s at %s the machine's CPU time per packet, and lost %s of what it was sent in the steady state",
		c.Cores, c.Runs, plural(c.Runs, "run", "runs"), f(c.Ratio, 2, "×"), f(c.CPU, 2, "×"), f(c.Lost, 1, "%"))
	if c.Startup > 0 {
		fmt.Fprintf(&b, " (%d %s left %s first second out as a startup effect)", c.Startup, plural(c.Startup, "run", "runs"), plural(c.Startup, "its", "their"))
	}
	fmt.Fprintf(&b, "; the sender was the limit in %d of %d %s", c.SenderLimit, c.Runs, plural(c.Runs, "run", "runs"))
	if 2*c.SenderLimit > c.Runs {
		b.WriteString(senderWhy)
	}
	b.WriteString(".")
	return b.String()
}

// claimRE matches a claim's text, whitespace normalised.
var claimRE = regexp.MustCompile(`^On a (\d+)-core machine, over (\d+) runs? of the demo \(` + "`make demo-claim`" +
	`: median, and range\), xsk at both ends received ([0-9.]+)×(?: \(([0-9.]+)–([0-9.]+)×\))? the kernel socket's packets/s at ([0-9.]+)×(?: \(([0-9.]+)–([0-9.]+)×\))? the machine's CPU time per packet, and lost ([0-9.]+)%(?: \(([0-9.]+)–([0-9.]+)%\))? of what it was sent in the steady state` +
	`(?: \((\d+) runs? left (?:its|their) first second out as a startup effect\))?; the sender was the limit in (\d+) of \d+ runs?(?:` + regexp.QuoteMeta(senderWhy) + `)?\.$`)

// parseClaim reads a claim's text back: it is well-formed when it is
// exactly what its figures make.
func parseClaim(s string) (claim, error) {
	s = strings.Join(strings.Fields(s), " ")
	m := claimRE.FindStringSubmatch(s)
	if m == nil {
		return claim{}, fmt.Errorf("not a claim as make demo-claim writes it: %q", s)
	}
	num := func(i int) float64 { v, _ := strconv.ParseFloat(m[i], 64); return v }
	st := func(i int) stat {
		if m[i+1] == "" {
			return stat{num(i), num(i), num(i)}
		}
		return stat{num(i), num(i + 1), num(i + 2)}
	}
	c := claim{Cores: int(num(1)), Runs: int(num(2)), Ratio: st(3), CPU: st(6), Lost: st(9), SenderLimit: int(num(13))}
	if m[12] != "" {
		c.Startup = int(num(12))
	}
	if got := c.text(); got != s {
		return claim{}, fmt.Errorf("claim %q is not what its figures make: %q", s, got)
	}
	return c, nil
}

// The README's markers around the claim.
const (
	openMark  = "<!-- demo-claim -->"
	closeMark = "<!-- /demo-claim -->"
)

// claimWidth is the README's line width the claim is wrapped to.
const claimWidth = 74

// findClaim returns where the claim between the markers starts and ends
// in readme.
func findClaim(readme string) (start, end int, err error) {
	if n, m := strings.Count(readme, openMark), strings.Count(readme, closeMark); n != 1 || m != 1 {
		return 0, 0, fmt.Errorf("want one %s and one %s, found %d and %d", openMark, closeMark, n, m)
	}
	start = strings.Index(readme, openMark) + len(openMark)
	end = strings.Index(readme, closeMark)
	if end < start {
		return 0, 0, fmt.Errorf("%s comes before %s", closeMark, openMark)
	}
	return start, end, nil
}

// replaceClaim puts text between readme's markers, wrapped to the
// README's width from where the opening marker's line has got to; the
// lines it makes never start with the markers (which would end the
// paragraph in Markdown). It returns the new README and the old claim.
func replaceClaim(readme, text string) (string, string, error) {
	start, end, err := findClaim(readme)
	if err != nil {
		return "", "", err
	}
	col := len([]rune(readme[strings.LastIndex(readme[:start], "\n")+1 : start]))
	var b strings.Builder
	for i, w := range strings.Fields(text) {
		switch {
		case i == 0:
		case col+1+len([]rune(w)) > claimWidth:
			b.WriteString("\n")
			col = 0
		default:
			b.WriteString(" ")
			col++
		}
		b.WriteString(w)
		col += len([]rune(w))
	}
	return readme[:start] + b.String() + readme[end:], readme[start:end], nil
}
