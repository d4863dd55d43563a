package main

import (
	"flag"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/crawlnode/crawlnode/internal/peerauth"
)

// runTLS is `crawlnode tls ca create` and `crawlnode tls cert create`: the files of a
// small cluster's PKI, as `consul tls ca create` and `consul tls cert create` make them.
func runTLS(args []string) error {
	if len(args) < 2 || args[1] != "create" || (args[0] != "ca" && args[0] != "cert") {
		return usageError{"tls: want `tls ca create [--dir D] [--days N]` or `tls cert create --node NAME [--ip IP]... [--dns NAME]... [--ca FILE --ca-key FILE] [--dir D] [--days N]`"}
	}
	kind, rest := args[0], args[2:]
	fs := flag.NewFlagSet("tls "+kind+" create", flag.ContinueOnError)
	dir := fs.String("dir", ".", "directory to write the files to (existing files are never overwritten)")
	switch kind {
	case "ca":
		days := fs.Int("days", peerauth.DefaultCADays, "validity in days")
		if err := parseFlags(fs, rest); err != nil {
			return err
		}
		cert, key, err := peerauth.NewCA(*dir, *days, time.Now())
		if err != nil {
			return fmt.Errorf("tls ca create: %w", err)
		}
		fmt.Printf("==> CA certificate %s\n==> CA key %s (keep it secret; it signs node certificates)\n", cert, key)
		return nil
	default:
		days := fs.Int("days", peerauth.DefaultCertDays, "validity in days (at most the CA's)")
		name := fs.String("node", "", "the node's name (its --name); required")
		caFile := fs.String("ca", "crawlnode-ca.pem", "the CA certificate")
		caKey := fs.String("ca-key", "crawlnode-ca-key.pem", "the CA key")
		var ips, dns listFlag
		fs.Var(&ips, "ip", "an IP address SAN (repeatable; for tools that check host names)")
		fs.Var(&dns, "dns", "a DNS name SAN (repeatable)")
		if err := parseFlags(fs, rest); err != nil {
			return err
		}
		if *name == "" {
			return usageError{"tls cert create: --node NAME is required (the node's --name)"}
		}
		opts := peerauth.NodeCertOptions{Name: *name, DNS: dns.vals, Days: *days}
		for _, s := range ips.vals {
			ip := net.ParseIP(strings.TrimSpace(s))
			if ip == nil {
				return usageError{fmt.Sprintf("tls cert create: --ip %q is not an IP address", s)}
			}
			opts.IPs = append(opts.IPs, ip)
		}
		ca, err := peerauth.LoadCA(*caFile, *caKey)
		if err != nil {
			return fmt.Errorf("tls cert create: %w", err)
		}
		cert, key, err := ca.NewNodeCert(*dir, opts, time.Now())
		if err != nil {
			return fmt.Errorf("tls cert create: %w", err)
		}
		fmt.Printf("==> certificate %s for node %q\n==> key %s\n", cert, *name, key)
		return nil
	}
}
