package netnstest

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/xdpio/xdpio/internal/errs"
)

// Every skip of a test that needs the kernel goes through these helpers,
// as cilium's testutils.SkipIfNotSupported does: a skip must name why this
// kernel (or this machine) cannot run the test. Under XDPIO_REQUIRE_PRIV=1
// (CI), a skip without such a reason fails instead, so that a validation
// bug or a missing tool never passes as a skip.

// SkipIfNotSupported skips tb when err matches ErrNotSupported (the
// kernel, driver or device refused a feature, and the error names it)
// and fails tb for any other error. It returns when err is nil.
func SkipIfNotSupported(tb testing.TB, err error) {
	tb.Helper()
	if err == nil {
		return
	}
	if !errors.Is(err, errs.ErrNotSupported) {
		tb.Fatalf("%v (not a missing kernel feature: a skip would hide it)", err)
	}
	tb.Skipf("skipping: this kernel cannot: %v", err)
}

// SkipIfKernelBefore skips tb when the running kernel is older than
// version ("6.13"), saying that feature needs it. Under
// XDPIO_REQUIRE_PRIV=1 on a kernel that is new enough it does nothing:
// the test must then pass.
func SkipIfKernelBefore(tb testing.TB, version, feature string) {
	tb.Helper()
	have, err := KernelVersion()
	if err != nil {
		tb.Fatal(err)
	}
	if compareVersions(have, version) < 0 {
		tb.Skipf("skipping: %s needs Linux %s, this kernel is %s", feature, version, have)
	}
}

// SkipIfMachineLacks skips tb because a device of this machine that the
// test reads (and never changes) lacks what it needs ("eth0 has no RSS
// table"). It is for read-only tests of devices the tests did not create:
// the reason must name the device and what it lacks.
func SkipIfMachineLacks(tb testing.TB, device, lacks string) {
	tb.Helper()
	if device == "" || lacks == "" {
		tb.Fatal("SkipIfMachineLacks: name the device and what it lacks")
	}
	tb.Skipf("skipping: %s on this machine %s", device, lacks)
}

// compareVersions compares dotted version numbers: -1, 0 or 1.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
	}
	return 0
}
