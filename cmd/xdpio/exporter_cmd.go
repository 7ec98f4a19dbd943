package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/xdpio/xdpio/internal/metrics"
)

// defaultExporterListen is where `xdpio exporter` serves without --listen:
// loopback only, so that a device's counters are not on the network until
// asked for.
const defaultExporterListen = "127.0.0.1:9435"

// exporterShutdown bounds how long the exporter waits for a scrape in
// progress when it is told to stop.
const exporterShutdown = 5 * time.Second

func newExporterCmd(g *globals) *cobra.Command {
	var listen string
	c := &cobra.Command{
		Use:   "exporter DEV... [--listen ADDR]",
		Short: "Serve the devices' per-queue counters, NAPI settings and queues as Prometheus metrics on /metrics",
		Long: `Serve /metrics in Prometheus's text format, like node_exporter, for each DEV:

  xdpio_nic_<counter>_total{device,queue}   per-queue counters: netdev qstats (rx-packets is
                                            xdpio_nic_rx_packets_total), else the driver's ethtool -S
                                            (veth: xdpio_nic_rx_xdp_packets_total), else the device's
                                            totals from /proc/net/dev (queue="")
  xdpio_nic_stats_source{device,source}     which of the three (qstats, driver, device)
  xdpio_nic_napi_*{device,napi_id}          NAPI settings: defer_hard_irqs, gro_flush_timeout_seconds,
                                            irq_suspend_timeout_seconds
  xdpio_nic_queue_info, _af_xdp             each queue's NAPI instance, and whether an AF_XDP socket is bound
  xdpio_nic_scrape_success{device,part}     0 when a part (stats, napi, queues) could not be read

Each device is opened once, with one netlink client for the exporter's life; a device
that is deleted reads as xdpio_nic_scrape_success 0 and is opened again by name when it
comes back. With --netns the devices are in that namespace and the listener stays in the
exporter's own, so a Prometheus on the host can scrape devices of a container.
The AF_XDP sockets' and xdpnet conns' counters belong to the process that owns them:
it exports them with contrib/prometheus's collectors.

It prints one line when it serves (under --json, an object with "listen"), and stops
on SIGINT or SIGTERM after the scrape in progress.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkListen(listen); err != nil {
				return err
			}
			return runExporter(cmd.Context(), g, args, listen)
		},
	}
	c.Flags().StringVar(&listen, "listen", defaultExporterListen, "serve /metrics on this address (HOST:PORT; :9435 for every address, port 0 for any free port)")
	return c
}

// checkListen says, as a usage error, what is wrong with a --listen
// address before anything is opened.
func checkListen(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("exporter: --listen %q: want HOST:PORT, such as 127.0.0.1:9435 or :9435", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return usagef("exporter: --listen %q: port %q: want a number from 0 to 65535", addr, port)
	}
	if strings.ContainsAny(host, " /") {
		return usagef("exporter: --listen %q: host %q is not an address or name", addr, host)
	}
	return nil
}

// exporter serves the devices' metrics: one scrape at a time, into one
// reused sample set.
type exporter struct {
	g       *globals
	readers []*metrics.NICReader

	mu   sync.Mutex
	set  metrics.Set
	errs map[string]string // the last error logged for each device
}

func runExporter(ctx context.Context, g *globals, devs []string, listen string) error {
	e := &exporter{g: g, errs: map[string]string{}}
	defer func() {
		for _, r := range e.readers {
			r.Close()
		}
	}()
	err := g.inNetns(func() error {
		for _, dev := range devs {
			r, err := metrics.OpenNICReader(dev)
			if err != nil {
				return err
			}
			e.readers = append(e.readers, r)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The listener is opened here, outside the namespace of --netns.
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("exporter: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", e.serveMetrics)
	mux.HandleFunc("/", e.serveIndex)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	addr := ln.Addr().String()
	if g.json {
		err = writeJSON(g.stdout, map[string]any{"listen": addr, "metrics_path": "/metrics", "devices": devs, "netns": g.netns})
	} else {
		_, err = fmt.Fprintf(g.stdout, "xdpio exporter: serving http://%s/metrics for %s\n", addr, strings.Join(devs, ", "))
	}
	if err != nil {
		srv.Close()
		return err
	}
	select {
	case err := <-served:
		return fmt.Errorf("exporter: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), exporterShutdown)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("exporter: %w", err)
	}
	return nil
}

// contentType is the text exposition format's.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

func (e *exporter) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.set.Reset()
	for _, rd := range e.readers {
		e.logChange(rd.Name(), rd.Read(&e.set))
	}
	w.Header().Set("Content-Type", contentType)
	if r.Method == http.MethodHead {
		return
	}
	if err := e.set.WriteText(w); err != nil {
		fmt.Fprintf(e.g.stderr, "xdpio exporter: /metrics: %v\n", err)
	}
}

// logChange writes a device's read error to stderr when it differs from
// the last one logged, and a line when the device reads again: a device
// that stays gone does not fill the log once a scrape.
func (e *exporter) logChange(dev string, err error) {
	text := ""
	if err != nil {
		text = noDeviceWords(inUserWords(err), e.g.netns).Error()
	}
	if e.errs[dev] == text {
		return
	}
	e.errs[dev] = text
	if text == "" {
		fmt.Fprintf(e.g.stderr, "xdpio exporter: %s: read again\n", dev)
		return
	}
	if !strings.HasPrefix(text, dev+": ") {
		text = dev + ": " + text
	}
	fmt.Fprintf(e.g.stderr, "xdpio exporter: %s (xdpio_nic_scrape_success 0)\n", text)
}

func (e *exporter) serveIndex(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	io.WriteString(w, `<html><head><title>xdpio exporter</title></head><body><h1>xdpio exporter</h1><p><a href="/metrics">/metrics</a></p></body></html>`+"\n")
}
