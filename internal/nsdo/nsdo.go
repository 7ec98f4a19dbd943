//go:build linux

package nsdo

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Do runs fn inside the namespace target; name is used in errors.
func Do(target netns.NsHandle, name string, fn func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("get current namespace: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter namespace %s: %w", name, err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			// Leave the thread locked: the runtime discards it when the
			// goroutine exits, instead of reusing a thread in the wrong
			// namespace.
			return
		}
		runtime.UnlockOSThread()
	}()
	return fn()
}

// DoNamed runs fn inside the namespace called name (as `ip netns` names
// it, under /run/netns).
func DoNamed(name string, fn func() error) error {
	target, err := netns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("namespace %q: %w", name, err)
	}
	defer target.Close()
	return Do(target, fmt.Sprintf("%q", name), fn)
}
