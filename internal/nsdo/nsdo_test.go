//go:build linux

package nsdo_test

import (
	"errors"
	"os"
	"testing"

	"github.com/vishvananda/netns"
	"github.com/xdpio/xdpio/internal/netnstest"
	"github.com/xdpio/xdpio/internal/nsdo"
)

func TestDoNamedEntersAndReturns(t *testing.T) {
	pair := netnstest.New(t, netnstest.Config{})
	before, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	want, err := netns.GetFromName(pair.A.NS)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	err = nsdo.DoNamed(pair.A.NS, func() error {
		cur, err := netns.Get()
		if err != nil {
			return err
		}
		defer cur.Close()
		if !cur.Equal(want) {
			return errors.New("fn did not run in the named namespace")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := netns.Get()
	defer after.Close()
	if !after.Equal(before) {
		t.Fatal("the thread stayed in the other namespace")
	}
	if err := nsdo.DoNamed("xdpio-no-such-ns", func() error { return nil }); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("DoNamed of a missing namespace = %v, want ErrNotExist", err)
	}
}
