package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// A bad --listen or a missing DEV is a usage error (exit 2) that says what
// is wrong, before anything is opened.
func TestExporterUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"exporter"}, "requires at least 1 arg"},
		{[]string{"exporter", "lo", "--listen", "9435"}, `--listen "9435": want HOST:PORT`},
		{[]string{"exporter", "lo", "--listen", "127.0.0.1:99999"}, `port "99999": want a number from 0 to 65535`},
		{[]string{"exporter", "lo", "--listen", "127.0.0.1:http"}, `port "http": want a number`},
		{[]string{"exporter", "lo", "--listen", "a b:1"}, `host "a b" is not an address or name`},
		{[]string{"exporter", "lo", "--listn", ":1"}, "unknown flag: --listn"},
	} {
		var out, errb bytes.Buffer
		err := runWith(context.Background(), &globals{stdout: &out, stderr: &errb}, tc.args)
		if code := exitStatus(err); code != 2 || err == nil || !strings.Contains(err.Error(), tc.want) || out.Len() != 0 {
			t.Errorf("%v: exit %d, %v, stdout %q; want exit 2 saying %q", tc.args, code, err, out.String(), tc.want)
		}
	}
}
