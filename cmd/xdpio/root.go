package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/xdpio/xdpio/internal/nsdo"
)

// globals holds the flags every subcommand shares.
type globals struct {
	json   bool   // --json: machine-readable output on stdout
	netns  string // --netns NAME: run inside that network namespace
	prof   string // --cpuprofile FILE: Go CPU profile of the command
	stdout io.Writer
	stderr io.Writer

	running  bool     // the command line was accepted and the command started
	profFile *os.File // the open --cpuprofile file, while profiling
}

// subcommands lists the constructors of the top-level commands, all in
// one place (help lists them sorted by name).
var subcommands = []func(g *globals) *cobra.Command{
	newChannelsCmd, newRingsCmd, newCoalesceCmd, newRSSCmd, newFeaturesCmd,
	newQueuesCmd, newNAPICmd, newStatsCmd, newExporterCmd,
	newBenchCmd, newPcapCmd, newFilterCmd,
}

// usageError marks a bad invocation: exit status 2. Commands return it
// without the line that points to --help: runWith adds that line (hint),
// for the command that failed, to every usage error, and leaves it out
// of the JSON error object.
type usageError struct {
	err  error
	hint string // "Run 'xdpio channels set --help' for usage.", or ""
}

func (e *usageError) Error() string {
	msg := e.err.Error()
	switch {
	case e.hint == "":
		return msg
	case strings.Contains(msg, "\n"):
		// After a list (cobra's "Did you mean this?"), a blank line.
		return msg + "\n\n" + e.hint
	}
	return msg + "\n" + e.hint
}

func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usage error (exit status 2).
func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// errorText is err's text for the JSON error object: a usage error's
// message without the line pointing to --help, which speaks to a person.
func errorText(err error) string {
	if ue, ok := err.(*usageError); ok && ue.hint != "" {
		return ue.err.Error()
	}
	return err.Error()
}

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "xdpio",
		Short:         "AF_XDP packet I/O toolkit: NIC tuning, benchmark, software offloads",
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       version(),
		// Cobra validates the command line (command names, argument
		// counts) before it runs this hook: an error before it is a usage
		// error, one after it comes from the operation. Cobra checks
		// required flags only after the hook, so it checks them here.
		PersistentPreRunE: func(c *cobra.Command, _ []string) error {
			if err := c.ValidateRequiredFlags(); err != nil {
				return &usageError{err: err}
			}
			if err := c.ValidateFlagGroups(); err != nil {
				return &usageError{err: err}
			}
			g.running = true
			return g.startProfile()
		},
	}
	root.SetVersionTemplate("xdpio {{.Version}}\n")
	root.PersistentFlags().BoolVarP(&g.json, "json", "J", false, "print machine-readable JSON on stdout (also iperf3's -J); a failure prints {\"error\": …}")
	root.PersistentFlags().StringVar(&g.netns, "netns", "", "run the command inside the named network namespace")
	root.PersistentFlags().StringVar(&g.prof, "cpuprofile", "", "write a CPU profile of the command to FILE when it ends (go tool pprof FILE): where a benchmark's time goes")
	root.SetFlagErrorFunc(flagError)
	for _, mk := range subcommands {
		root.AddCommand(mk(g))
	}
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print xdpio's version, VCS revision and Go version (as --version)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(g.stdout, "xdpio %s\n", root.Version)
			return err
		},
	})
	// Cobra adds these when it executes: add them now, so that
	// completion rejects an unknown shell as the groups do and
	// mistypedCommand finds both.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	groupsRejectUnknown(root)
	return root
}

// groupAnnotation marks a command that only groups subcommands
// (channels, pcap, bench …).
const groupAnnotation = "xdpio-group"

// groupsRejectUnknown makes every command that only groups subcommands
// (channels, pcap, bench …) reject an unknown subcommand as a usage error
// with cobra's suggestions, as the root does: without it cobra prints the
// group's help and exits 0 for `channels shw`. A group given no
// subcommand prints its help. (A mistyped subcommand followed by flags,
// `bench sevrer -1`, is caught before cobra parses flags: see
// mistypedCommand.)
func groupsRejectUnknown(c *cobra.Command) {
	for _, sub := range c.Commands() {
		groupsRejectUnknown(sub)
	}
	if args := c.Args; args != nil && !c.HasSubCommands() {
		// Cobra says "accepts 1 arg(s), received 0": say which command
		// and what it takes.
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				return &usageError{err: fmt.Errorf("%s: %w (usage: %s)", cmdName(cmd), err, cmd.UseLine())}
			}
			return nil
		}
	}
	if c.HasParent() && c.HasSubCommands() && !c.Runnable() {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[groupAnnotation] = "true"
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return c.Help()
			}
			return unknownCommand(c, args[0])
		}
	}
}

// mistypedCommand finds a mistyped subcommand on the command line before
// cobra parses flags, and returns the usage error for it with the group
// it was looked up in. Cobra parses the flags of the deepest command it
// found: after `bench sevrer -1` that is bench, which has no -1, and the
// user would read "unknown shorthand flag" where the mistake is the
// command's name. It finds commands as cobra does (Find), and takes the
// first word that is neither a flag nor a flag's value to be the
// subcommand. It returns nil, nil when there is nothing to say.
func mistypedCommand(root *cobra.Command, args []string) (*cobra.Command, error) {
	if len(args) > 0 && (args[0] == cobra.ShellCompRequestCmd || args[0] == cobra.ShellCompNoDescRequestCmd) {
		return nil, nil // shell completion: cobra adds and runs its own command
	}
	c, rest, err := root.Find(args)
	if c != nil && c.Name() == "help" && c.Parent() == root {
		// `xdpio help chanels`: cobra's help command says "Unknown help
		// topic" and exits 0.
		return mistypedCommand(root, commandWords(rest, c.Flags()))
	}
	if c == nil || (c != root && c.Annotations[groupAnnotation] == "") {
		return nil, nil
	}
	if c == root && err == nil {
		return nil, nil
	}
	c.InitDefaultHelpFlag()
	words := commandWords(rest, c.Flags())
	if len(words) == 0 {
		return nil, nil
	}
	return c, unknownCommand(c, words[0])
}

// commandWords returns the words in args that are neither flags nor their
// values, as cobra tells them apart when it looks for subcommands: a
// flag it does not know is taken to have a value.
func commandWords(args []string, flags *pflag.FlagSet) []string {
	takesValue := func(f *pflag.Flag) bool { return f == nil || f.NoOptDefVal == "" }
	var words []string
	for i := 0; i < len(args); i++ {
		s := args[i]
		switch {
		case s == "--":
			return words
		case strings.HasPrefix(s, "--") && !strings.Contains(s, "="):
			if takesValue(flags.Lookup(s[2:])) {
				i++
			}
		case strings.HasPrefix(s, "-") && !strings.Contains(s, "=") && len(s) == 2:
			if takesValue(flags.ShorthandLookup(s[1:])) {
				i++
			}
		case s != "" && !strings.HasPrefix(s, "-"):
			words = append(words, s)
		}
	}
	return words
}

// jsonAsked reports whether args ask for --json (or -J) before any "--",
// for a command line cobra refused before it parsed that flag
// (`xdpio chanels show lo --json`).
func jsonAsked(args []string) bool {
	asked := false
	for _, a := range args {
		switch {
		case a == "--":
			return asked
		case a == "--json" || a == "-J":
			asked = true
		case strings.HasPrefix(a, "--json=") || strings.HasPrefix(a, "-J="):
			v, err := strconv.ParseBool(a[strings.IndexByte(a, '=')+1:])
			asked = err == nil && v
		}
	}
	return asked
}

// unknownCommand is the usage error for an unknown subcommand of c, with
// cobra's "Did you mean this?" suggestions.
func unknownCommand(c *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, c.CommandPath())
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	if s := c.SuggestionsFor(name); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	return &usageError{err: errors.New(msg)}
}

// cmdName is c's path without the program name ("channels set"), to start
// a message that main prefixes with "xdpio: ".
func cmdName(c *cobra.Command) string {
	return strings.TrimPrefix(c.CommandPath(), "xdpio ")
}

// helpHint is the line a usage error ends with: where the usage is, not
// the usage itself (a set command has thirty flags).
func helpHint(c *cobra.Command) string {
	return fmt.Sprintf("Run '%s --help' for usage.", c.CommandPath())
}

// flagError is the usage error for a flag cobra could not parse: what the
// flag wants, in words.
func flagError(_ *cobra.Command, err error) error {
	return &usageError{err: errors.New(plainFlagError(err))}
}

// version is the module's version and VCS revision as the build recorded
// them, for --version and the version command.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown version)"
	}
	return versionOf(bi)
}

// versionOf formats bi: "v1.2.0 go1.26.8", or for a build from a git
// checkout "(devel) 0123456789ab+dirty (2026-12-03T15:04:05Z) go1.26.8",
// revision cut to 12 digits, "+dirty" when the tree had changes.
func versionOf(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, dirty, when string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		case "vcs.time":
			when = s.Value
		}
	}
	if rev != "" && !strings.Contains(v, rev[:min(12, len(rev))]) {
		v += " " + rev[:min(12, len(rev))] + dirty
		if when != "" {
			v += " (" + when + ")"
		}
	}
	return v + " " + bi.GoVersion
}

// run parses args and runs the selected command. Errors from flag parsing
// and argument counts are usage errors.
func run(ctx context.Context, args []string) error {
	g := &globals{stdout: os.Stdout, stderr: os.Stderr}
	return runWith(ctx, g, args)
}

func runWith(ctx context.Context, g *globals, args []string) error {
	root := newRoot(g)
	root.SetArgs(args)
	out := &countingWriter{w: g.stdout}
	g.stdout = out
	root.SetOut(out)
	root.SetErr(g.stderr)
	cmd, err := mistypedCommand(root, args)
	if err == nil {
		cmd, err = root.ExecuteContextC(ctx)
	}
	if perr := g.stopProfile(); err == nil {
		err = perr
	}
	var ue *usageError
	if err != nil && !g.running && !errors.As(err, &ue) {
		err = &usageError{err: err}
	}
	err = noDeviceWords(inUserWords(err), g.netns)
	if errors.As(err, &ue) && cmd != nil {
		// Every usage error ends with where the usage is, once.
		err = &usageError{err: err, hint: helpHint(cmd)}
	}
	// A command line refused before cobra parsed --json still asked
	// for it.
	asked := g.json || (!g.running && jsonAsked(args))
	if err != nil && asked && out.n.Load() == 0 {
		// A script that parses stdout gets an answer too; the text
		// still goes to stderr.
		writeJSON(out, map[string]any{"error": errorText(err), "exit_status": exitStatus(err)})
	}
	return err
}

// startProfile starts the CPU profile --cpuprofile asked for.
func (g *globals) startProfile() error {
	if g.prof == "" {
		return nil
	}
	f, err := os.Create(g.prof)
	if err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	g.profFile = f
	return nil
}

// stopProfile ends the CPU profile, if one was started, and writes it out.
func (g *globals) stopProfile() error {
	if g.profFile == nil {
		return nil
	}
	pprof.StopCPUProfile()
	err := g.profFile.Close()
	g.profFile = nil
	if err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	return nil
}

// countingWriter counts what a command wrote to stdout, so that a failure
// under --json prints its JSON error object only when nothing else was.
// The bench commands write from several goroutines.
type countingWriter struct {
	w io.Writer
	n atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// inNetns runs fn on a locked OS thread inside the namespace named by
// --netns, or directly when the flag is empty. Sockets and netlink handles fn
// opens stay in that namespace.
func (g *globals) inNetns(fn func() error) error {
	if g.netns == "" {
		return fn()
	}
	if err := netnsExists(netnsDir, g.netns); err != nil {
		return err
	}
	return nsdo.DoNamed(g.netns, fn)
}

// netnsDir holds the named network namespaces (ip netns add).
const netnsDir = "/run/netns"

// netnsExists says, in words, why --netns name names no namespace in dir:
// "no such file or directory" would not say which file, or that it is
// the namespace that is missing.
func netnsExists(dir, name string) error {
	if name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("--netns %q: not a network namespace name (ip netns list shows them)", name)
	}
	_, err := os.Stat(filepath.Join(dir, name))
	if !errors.Is(err, fs.ErrNotExist) {
		return nil // there, or the kernel's own words will say what else
	}
	msg := fmt.Sprintf("--netns %q: no such network namespace", name)
	ents, _ := os.ReadDir(dir)
	switch {
	case len(ents) == 0:
		msg += " (there are none: ip netns add NAME creates one)"
	case len(ents) <= 5:
		names := make([]string, len(ents))
		for i, e := range ents {
			names[i] = e.Name()
		}
		msg += " (ip netns list: " + strings.Join(names, ", ") + ")"
	default:
		msg += fmt.Sprintf(" (ip netns list shows the %d there are)", len(ents))
	}
	return &plainError{msg, err}
}

// flagValueError matches pflag's report of a value its parser refused.
var flagValueError = regexp.MustCompile(`^invalid argument "(.*)" for "(.*)" flag: (strconv\.Parse(Uint|Int|Float|Bool)|time: .*|.*)`)

// plainFlagError says what a flag wants in words, not Go's
// ("strconv.ParseUint: parsing "-1": invalid syntax").
func plainFlagError(err error) string {
	m := flagValueError.FindStringSubmatch(err.Error())
	if m == nil {
		return err.Error()
	}
	want := ""
	switch {
	case m[4] == "Uint":
		want = "a whole number, 0 or more"
	case m[4] == "Int":
		want = "a whole number"
	case m[4] == "Float":
		want = "a number"
	case m[4] == "Bool":
		want = "true or false"
	case strings.HasPrefix(m[3], "time: "):
		want = "a duration such as 500ms or 2s"
	default:
		return fmt.Sprintf("%s %q: %s", m[2], m[1], m[3])
	}
	if strings.Contains(err.Error(), "value out of range") {
		want += " in range"
	}
	return fmt.Sprintf("%s %q: want %s", m[2], m[1], want)
}

// ethtoolStyle lets a set command take ethtool's positional settings
// after the device (`channels set DEV rx 2`, `coalesce set DEV rx-usecs
// 50 adaptive-rx on`) as well as flags: each NAME VALUE pair sets the
// flag --NAME, as if given so.
func ethtoolStyle(c *cobra.Command, noPositional ...string) {
	run := c.RunE
	c.Args = cobra.MinimumNArgs(1)
	set := func(cmd *cobra.Command, name, val string) error {
		f := cmd.Flags().Lookup(name)
		if f == nil || f.Name == "help" || slices.Contains(noPositional, name) {
			return usagef("%s: unknown setting %q", cmdName(cmd), name)
		}
		if f.Changed {
			return usagef("%s: %s given twice", cmdName(cmd), name)
		}
		if err := cmd.Flags().Set(name, val); err != nil {
			return flagError(cmd, err) // pflag names the flag
		}
		return nil
	}
	c.RunE = func(cmd *cobra.Command, args []string) error {
		pairs := args[1:]
		if len(pairs)%2 != 0 {
			return usagef("%s: want NAME VALUE pairs after the device, as ethtool takes them, got %q", cmdName(cmd), strings.Join(pairs, " "))
		}
		for i := 0; i < len(pairs); i += 2 {
			if err := set(cmd, pairs[i], pairs[i+1]); err != nil {
				return err
			}
		}
		return run(cmd, args[:1])
	}
	// A negative value (`rx-usecs -1`) reads to pflag as a shorthand
	// flag: when it follows a setting's name, judge it as that setting's
	// value, so that it gets the words the flag form gets.
	c.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		m := negativeValue.FindStringSubmatch(err.Error())
		pos := cmd.Flags().Args() // the positional arguments before the error
		if m == nil || len(pos) < 2 || len(pos)%2 != 0 {
			return flagError(cmd, err)
		}
		name := pos[len(pos)-1]
		if err := set(cmd, name, m[1]); err != nil {
			return err
		}
		// The setting took it (none of today's do): the parse still
		// stopped there, so ask for the form pflag reads.
		return usagef("%s: %s %s: give a value starting with - as --%s=%s", cmdName(cmd), name, m[1], name, m[1])
	})
}

// negativeValue matches pflag's report of an argument such as -1 that it
// took for a cluster of shorthand flags.
var negativeValue = regexp.MustCompile(`^unknown shorthand flag: '.' in (-[0-9.].*)$`)

// noDefaults drops the "(default …)" cobra prints after a set command's
// flags: a setting not given is left as the device has it, not set to a
// default. pflag prints none for its own types at their zero value; for
// the command's own types (on|off, durations) it prints none for "".
func noDefaults(c *cobra.Command) {
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if t := reflect.TypeOf(f.Value); t.Kind() != reflect.Pointer || t.Elem().PkgPath() != reflect.TypeOf(pflag.Flag{}).PkgPath() {
			f.DefValue = ""
		}
	})
}
