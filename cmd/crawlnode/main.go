// Command crawlnode runs a Crawlnode node.
//
//	crawlnode [--data DIR] [--seed URL ... | --seeds FILE] [--exit-when-done] [flags]
//	crawlnode demo [--out DIR]            crawl an in-process simulated web, offline
//	crawlnode export --data DIR --format jsonl|markdown|warc|urls|cdxj|wacz [--include-duplicates] --out PATH
//	crawlnode export --api URL [--api-token T] [--allow-partial] --format ... --out PATH
//	crawlnode deadletters --data DIR
//	crawlnode tls ca create | tls cert create --node NAME   the cluster's PKI
//	crawlnode keyring --list | --install KEY | --use KEY | --remove KEY   key rotation
//	crawlnode status|seed|block|unblock|pause|resume --api URL    wrap the HTTP API
//
// The binary is thin: it parses flags, builds a node.Config, handles signals and prints
// progress. Everything else lives in package node.
//
// Decisions where the design is silent:
//   - A duration flag takes a Go duration or a bare number of seconds (--delay 0.5 is
//     500ms), as robots.txt's Crawl-delay and Scrapy's DOWNLOAD_DELAY count; --recrawl-min
//     and --recrawl-max, whose values are hours to months, need a unit. A bad value's error
//     names the flag (or the variable, or the file) and what is expected.
//   - An empty CRAWLNODE_* variable counts as unset: compose files pass `NAME=` for a value
//     left out. An empty value is given by the flag or the config file.
//   - --max-depth 0 is list mode (wget -i): the seeds only, and where they redirect (up to
//     the redirect limit, as wget -i and curl -L follow them), since a list of URLs is a
//     list of resources, not of addresses; no link or sitemap is followed. The flag always
//     carries a value, so the node gets an explicit 0 (node.Config.MaxDepthSet).
//   - A node alone without seeds (and no crawl to resume) waits for them on its HTTP API
//     (POST /v1/crawl/seeds, crawlnode seed), as a cluster does; without an API (--http "")
//     it refuses to start, since nothing could ever give it work.
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run dispatches the subcommand and returns the process exit code.
func run(args []string) int {
	var err error
	if len(args) > 0 {
		switch args[0] {
		case "demo":
			err = runDemo(args[1:])
		case "export":
			err = runExport(args[1:])
		case "deadletters":
			err = runDeadLetters(args[1:])
		case "tls":
			err = runTLS(args[1:])
		case "keyring":
			err = runKeyring(args[1:])
		case "status", "cluster", "seed", "block", "unblock", "pause", "resume", "leave":
			err = runClient(args[0], args[1:])
		case "help":
			usage(os.Stdout)
			err = runCrawl([]string{"--help"})
		default:
			err = runCrawl(args)
		}
	} else {
		err = runCrawl(args)
	}
	if err == nil {
		return 0
	}
	if errors.Is(err, errHelp) {
		return 0
	}
	fmt.Fprintln(os.Stderr, "crawlnode:", err)
	return exitCode(err)
}

var errHelp = errors.New("help requested")

// usageError marks errors in how the command was called (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func exitCode(err error) int {
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

func usage(w *os.File) {
	fmt.Fprint(w, `crawlnode: a polite, durable web crawler node.

Usage:
  crawlnode [--data DIR] [--seed URL ... | --seeds FILE] [--exit-when-done] [flags]
                                        no seed: wait for seeds on the HTTP API (--http)
  crawlnode demo [--out DIR] [--hosts N]
  crawlnode export --data DIR --format jsonl|markdown|warc|urls|cdxj|wacz [--include-duplicates] --out PATH
  crawlnode export --api URL [--api-token T] [--allow-partial] --format ... --out PATH   (the whole cluster)
  crawlnode deadletters --data DIR
  crawlnode tls ca create [--dir D]     a CA for the cluster's mutual TLS
  crawlnode tls cert create --node NAME [--ip IP]... [--dns NAME]... [--dir D]
                                        a node's certificate and key, signed by the CA
  crawlnode keyring --list | --install KEY | --use KEY | --remove KEY [--api URL]
                                        rotate the cluster key on every member (KEY: base64 or @FILE)
  crawlnode status|cluster|pause|resume [--api URL]
  crawlnode leave [--api URL]           decommission that node: hand off its partitions, then exit
  crawlnode seed [--api URL] [--priority high] URL ...
  crawlnode block|unblock [--api URL] DOMAIN

"crawlnode demo --help" and so on show each command's flags.
`)
}
