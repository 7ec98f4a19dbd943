package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/xdpio/xdpio/nic"
)

// The device commands (channels, rings, coalesce, rss, features, and
// napi show) share one shape: `show DEV` opens the device inside --netns,
// reads a setting and prints it as text or --json; `set DEV …` reads it,
// applies the request (or, with --dry-run, previews it) on the same
// client, reads it again and prints before → after. A setting says how to
// read and print one; setOp says what one set command asks for. The
// kernel's errors are put in the user's words once, for every command, by
// runWith (errtext.go); a command adds only what is its own.

// setting is one of a device's settings as its show and set commands read
// and print it. show needs read, showJSON and text; change needs read;
// set needs them all but showJSON and text. features set and napi set
// print reports of their own (features set: the fixed features it left,
// what the device refused; napi set: nic.Device.SetNAPI's before and
// after of each instance).
type setting[T any] struct {
	name     string                             // in set's report: "DEV channels: rx 4 → 2"
	read     func(*nic.Device) (T, error)       // the device's current state
	showJSON func(dev string, v T) any          // show's --json object
	text     func(w io.Writer, dev string, v T) // show's text
	json     func(v T) any                      // one state in set's --json (before, after)
	changes  func(before, after T) []change     // set's text: before → after, parameter by parameter
	// sortedJSON prints set's --json object with its keys sorted (after,
	// before, device, dry_run), as coalesce and rss have always printed
	// it (from a map); channels and rings print device, dry_run, before,
	// after.
	sortedJSON bool
}

// showCmd builds the `show DEV` subcommand.
func (s *setting[T]) showCmd(g *globals, short string) *cobra.Command {
	return &cobra.Command{
		Use:   "show DEV",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return s.show(g, args[0])
		},
	}
}

// show reads the setting of device dev, opened inside --netns, and prints
// it.
func (s *setting[T]) show(g *globals, dev string) error {
	var v T
	err := withDevice(g, dev, func(d *nic.Device) (err error) {
		v, err = s.read(d)
		return err
	})
	if err != nil {
		return err
	}
	return s.print(g, dev, v)
}

// print prints what show read: --json's object or the text.
func (s *setting[T]) print(g *globals, dev string, v T) error {
	if g.json {
		return writeJSON(g.stdout, s.showJSON(dev, v))
	}
	s.text(g.stdout, dev, v)
	return nil
}

// setOp is the change a set command asks for.
type setOp[T any] struct {
	// prepare, when not nil, checks or completes the request from the
	// state read before anything is sent (rss set sizes its table to the
	// device's; features set refuses names the device does not have).
	prepare func(before T) error
	apply   func(*nic.Device) error // sends the change
	preview func(before T) T        // what a dry run says the device would read after apply
}

// change opens device dev inside --netns and reads the setting, then
// either previews op (dry) or applies it and reads the setting back, all
// on one client.
func (s *setting[T]) change(g *globals, dev string, dry bool, op setOp[T]) (before, after T, err error) {
	err = withDevice(g, dev, func(d *nic.Device) (err error) {
		if before, err = s.read(d); err != nil {
			return err
		}
		if op.prepare != nil {
			if err = op.prepare(before); err != nil {
				return err
			}
		}
		if dry {
			after = op.preview(before)
			return nil
		}
		if err = op.apply(d); err != nil {
			return err
		}
		after, err = s.read(d)
		return err
	})
	return before, after, err
}

// set is a set command's run: change, then print before → after.
func (s *setting[T]) set(g *globals, dev string, dry bool, op setOp[T]) error {
	before, after, err := s.change(g, dev, dry, op)
	if err != nil {
		return err
	}
	if g.json {
		return writeJSON(g.stdout, s.setJSON(dev, dry, before, after))
	}
	printChange(g.stdout, dev+" "+s.name+dryRunNote(dry), s.changes(before, after))
	return nil
}

// setJSON is set's --json object.
func (s *setting[T]) setJSON(dev string, dry bool, before, after T) any {
	j := beforeAfter{dev, dry, s.json(before), s.json(after)}
	if s.sortedJSON {
		return j.keyed()
	}
	return j
}

// beforeAfter is a set command's --json object.
type beforeAfter struct {
	Device string `json:"device"`
	DryRun bool   `json:"dry_run"`
	Before any    `json:"before"`
	After  any    `json:"after"`
}

// keyed is b as a map, which encoding/json prints with sorted keys; a
// command adds its own keys to it.
func (b beforeAfter) keyed() map[string]any {
	return map[string]any{"device": b.Device, "dry_run": b.DryRun, "before": b.Before, "after": b.After}
}

// withDevice opens DEV inside --netns and runs fn there.
func withDevice(g *globals, name string, fn func(d *nic.Device) error) error {
	return g.inNetns(func() error {
		d, err := nic.Open(name)
		if err != nil {
			return err
		}
		defer d.Close()
		return fn(d)
	})
}

// change is one parameter of a set command's before → after report.
type change struct {
	name          string
	before, after any
}

// printChange prints "what: a b → c, d e → f" with changed values first
// marked; unchanged parameters are listed as "(unchanged)".
func printChange(w io.Writer, what string, cs []change) {
	var changed, same []string
	for _, c := range cs {
		b, a := fmt.Sprint(c.before), fmt.Sprint(c.after)
		if b != a {
			changed = append(changed, fmt.Sprintf("%s %s → %s", c.name, b, a))
		} else {
			same = append(same, fmt.Sprintf("%s %s", c.name, a))
		}
	}
	if len(changed) == 0 {
		fmt.Fprintf(w, "%s: nothing changed (%s)\n", what, strings.Join(same, ", "))
		return
	}
	fmt.Fprintf(w, "%s: %s", what, strings.Join(changed, ", "))
	if len(same) > 0 {
		fmt.Fprintf(w, " (unchanged: %s)", strings.Join(same, ", "))
	}
	fmt.Fprintln(w)
}

// dryRunNote marks a set command's report when nothing was sent.
func dryRunNote(dry bool) string {
	if dry {
		return " (dry run, nothing sent)"
	}
	return ""
}
