package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// --cookie-timeout must be a positive duration: anything else is a usage
// error that names the flag.
func TestBenchServerCookieTimeoutFlag(t *testing.T) {
	for _, v := range []string{"0", "0s", "-1s", "-1ns", "soon"} {
		var out bytes.Buffer
		err := runWith(context.Background(), &globals{stdout: &out, stderr: &out}, []string{"bench", "server", "--backend", "socket", "--cookie-timeout", v})
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--cookie-timeout") {
			t.Errorf("--cookie-timeout %s: %v (usage error %v), want a usage error naming the flag", v, err, errors.As(err, &ue))
		}
	}
}

// `bench server -1 --cookie-timeout` on loopback: a connection that never
// sends its cookie is closed after the timeout and does not use up the one
// test; the client after it is served at once.
func TestBenchServerSilentConnection(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var srvOut bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runWith(ctx, &globals{stdout: &srvOut, stderr: &srvOut},
			[]string{"bench", "server", "--backend", "socket", "--bind", "127.0.0.1", "--port", port, "-1", "--cookie-timeout", "300ms"})
	}()
	var silent net.Conn
	for deadline := time.Now().Add(5 * time.Second); ; {
		if silent, err = net.Dial("tcp", "127.0.0.1:"+port); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	start := time.Now()
	var cliOut bytes.Buffer
	if err := runWith(ctx, &globals{stdout: &cliOut, stderr: &cliOut},
		[]string{"bench", "client", "--backend", "socket", "-c", "127.0.0.1", "--port", port, "-t", "1", "-b", "1M", "-l", "200"}); err != nil {
		t.Fatalf("client after a silent connection: %v\n%s", err, cliOut.String())
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the 1 s test took %v", d)
	}
	silent.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := silent.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("silent connection: read %d bytes, %v; want it closed by the server", n, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("server: %v\n%s", err, srvOut.String())
	}
}
