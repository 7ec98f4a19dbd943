//go:build !linux

package genl

func causeText(err error) string { return err.Error() }
