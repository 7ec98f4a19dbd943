package nic

import (
	"os"

	"github.com/xdpio/xdpio/internal/napictl"
)

// NAPI deferral held for a program (an AF_XDP receiver): set on the NAPI
// instances of some RX queues, recorded in DeferralDir first so that a
// crash leaves it restorable, and put back on Close. package xsk applies
// it through here (xsk.Config.NAPIDeferral); `xdpio napi reset` and the
// next Open of the device restore what a crashed process left.

// DeferralDir is where the records of applied deferral live.
const DeferralDir = napictl.DefaultDir

// DeferralSettings are the values ApplyDeferral sets on each NAPI.
type DeferralSettings = napictl.Settings

// DeferralEntry is one NAPI's original values in a record, with the
// process that holds the deferral.
type DeferralEntry = napictl.Entry

// DeferralReport says what RestoreDeferral did: the NAPIs put back, and
// those whose holder still lives (left alone).
type DeferralReport = napictl.Report

// DeferralRecorded reports whether a record of deferral applied to the
// device exists: a crashed holder's, or a live one's.
func DeferralRecorded(ifname string, ifindex int) bool {
	_, err := os.Stat(napictl.Path("", ifname, ifindex))
	return err == nil
}
