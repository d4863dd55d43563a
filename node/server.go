package node

// The node's listeners: the public API (package api, served from apiBackend) and the
// node-to-node endpoints under /internal/, on one listener or two.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crawlnode/crawlnode/api"
)

// writeJSON and writeError answer the node-to-node endpoints, in the API's forms.
func writeJSON(w http.ResponseWriter, status int, v any) { api.WriteJSON(w, status, v) }

func writeError(w http.ResponseWriter, status int, code, format string, a ...any) {
	api.WriteError(w, status, code, format, a...)
}

// apiConfig is the public API's configuration.
func (n *Node) apiConfig() api.Config {
	return api.Config{Token: n.cfg.APIToken, ReadToken: n.cfg.APIReadToken, ProtectReads: n.cfg.APIProtectReads,
		Peer: n.peerRead, Pprof: n.cfg.Pprof, Metrics: n.metrics.handler(), Logger: n.log}
}

// peerRead reports whether r comes from an authenticated member: reads another node
// routes here (a page or host this node holds) pass the read protection as that member.
func (n *Node) peerRead(r *http.Request) bool {
	if n.verifier == nil || n.cluster == nil {
		return false
	}
	name, err := n.verifier.Peer(r)
	return err == nil && n.cluster.IsMember(name)
}

// handler is the public API; withInternal adds the node-to-node endpoints under
// /internal/ (when they have no listener of their own).
func (n *Node) handler(withInternal bool) http.Handler {
	public := api.New(n.apiConfig(), apiBackend{n})
	keyring := n.keyringHandler()
	var internal http.Handler
	if withInternal {
		internal = n.internalHandler()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == KeyringPath {
			keyring.ServeHTTP(w, r)
			return
		}
		if internal != nil && strings.HasPrefix(r.URL.Path, "/internal/") {
			internal.ServeHTTP(w, r)
			return
		}
		public.ServeHTTP(w, r)
	})
}

// startAPI listens on cfg.HTTPAddr and records the bound address in the data directory
// (http.addr) so tools and tests can find a port chosen by the system. With
// cfg.InternalAddr, the node-to-node endpoints get a listener of their own (recorded in
// internal.addr) and leave the public one.
func (n *Node) startAPI() (stop func(), err error) {
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if n.cfg.HTTPAddr != "" {
		h := n.handler(n.cfg.InternalAddr == "")
		addr, stop, err := n.serve(n.cfg.HTTPAddr, h, "http.addr", nil)
		if err != nil {
			return nil, fmt.Errorf("http api: %w", err)
		}
		n.httpAddr.Store(addr)
		stops = append(stops, stop)
		n.warnOpen(addr, n.cfg.InternalAddr == "")
	}
	if n.cfg.InternalAddr != "" {
		// With TLS the internal listener speaks only mutual TLS: peers present a
		// certificate of the cluster's CA, and peerauth.Middleware checks that each
		// request speaks for the member the certificate names.
		var tcfg *tls.Config
		if t := n.cfg.Cluster.TLS; t != nil {
			tcfg = t.ServerTLS(true)
		}
		addr, stop, err := n.serve(n.cfg.InternalAddr, n.internalOnly(), "internal.addr", tcfg)
		if err != nil {
			stopAll()
			return nil, fmt.Errorf("internal api: %w", err)
		}
		n.internalAddr.Store(addr)
		stops = append(stops, stop)
		n.warnOpen(addr, true)
	}
	return stopAll, nil
}

// peerAddr is the address peers reach this node's internal endpoints at.
func (n *Node) peerAddr() string {
	if a, _ := n.internalAddr.Load().(string); a != "" {
		return a
	}
	a, _ := n.httpAddr.Load().(string)
	return a
}

// serve runs an HTTP server for h on addr and writes the bound address to DIR/file.
// With tcfg, it serves TLS.
func (n *Node) serve(addr string, h http.Handler, file string, tcfg *tls.Config) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	bound := ln.Addr().String()
	if tcfg != nil {
		ln = tls.NewListener(ln, tcfg)
	}
	path := filepath.Join(n.dir.Path, file)
	if err := os.WriteFile(path, []byte(bound+"\n"), 0o644); err != nil {
		ln.Close()
		return "", nil, err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       5 * time.Minute, // partition streams are long bodies
		WriteTimeout:      5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("http server", "addr", bound, "err", err)
		}
	}()
	n.log.Info("http listening", "addr", bound, "file", file)
	return bound, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
		os.Remove(path)
	}, nil
}

// warnOpen says, in one line, what a listener on a non-loopback address leaves open: the
// crawl's data without an API token, the node-to-node routes (internal) in the
// development mode, which then take loopback callers only.
func (n *Node) warnOpen(addr string, internal bool) {
	host, _, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return
	}
	if n.cfg.APIToken == "" && n.cfg.APIReadToken == "" {
		n.log.Warn("the API listens beyond loopback with no --api-token: anyone who reaches it can read the crawl's data and change the crawl", "addr", addr)
	}
	if internal && n.verifier != nil && n.verifier.Mode() == "loopback" {
		n.log.Warn("no cluster key: the node-to-node routes accept loopback callers only (set --cluster-key-file, or --insecure-cluster on a network you trust)", "addr", addr)
	}
}
