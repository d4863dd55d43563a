package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/node"
)

func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stdout, "Usage of crawlnode %s:\n", fs.Name())
			fs.SetOutput(os.Stdout)
			fs.PrintDefaults()
			return errHelp
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))}
	}
	return nil
}

func runExport(args []string) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	var o node.ExportOptions
	var format string
	fs.StringVar(&o.DataDir, "data", "./crawl-data", "data directory of the node (running or stopped)")
	fs.StringVar(&format, "format", "jsonl", "jsonl (text corpus: text and markdown of each page), markdown (one .md file a page under --out DIR/<host>/, with front matter; DIR must be empty or absent), warc (raw pages), urls (fetch list), cdxj (index of the WARC files) or wacz (WARC files, index and pages)")
	fs.BoolVar(&o.IncludeDuplicates, "include-duplicates", false, "jsonl, markdown: include pages marked duplicate_of")
	fs.BoolVar(&o.IncludeRejected, "include-rejected", false, "jsonl, markdown: include pages a quality filter or opt-out signal left out")
	fs.StringVar(&o.Out, "out", "", "output file (- for standard output), a directory for markdown; jsonl is zstd-compressed when it ends in .zst")
	var apiBase, apiToken string
	var allowPartial bool
	fs.StringVar(&apiBase, "api", "", "export the whole cluster through this node's API (http://HOST:PORT) instead of --data")
	fs.StringVar(&apiToken, "api-token", os.Getenv("CRAWLNODE_API_TOKEN"), "with --api: the cluster's API token (or its read token: --api-read-token)")
	var apiReadToken string
	fs.StringVar(&apiReadToken, "api-read-token", os.Getenv("CRAWLNODE_API_READ_TOKEN"), "with --api: a read-only token, used when --api-token is not given")
	fs.BoolVar(&allowPartial, "allow-partial", false, "with --api: when a member cannot be read, export the others and name it (default: fail, write nothing)")
	storeFlags := addStoreExportFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	o.Format = node.ExportFormat(format)
	switch o.Format {
	case node.ExportJSONL, node.ExportMarkdown, node.ExportWARC, node.ExportURLs, node.ExportCDXJ, node.ExportWACZ:
	default:
		return usageError{fmt.Sprintf("export: --format %q: want jsonl, markdown, warc, urls, cdxj or wacz", format)}
	}
	if o.Out == "" {
		return usageError{"export: --out PATH is required (- for standard output)"}
	}
	if o.Format == node.ExportMarkdown && o.Out == "-" {
		return usageError{"export: --format markdown writes a directory: --out DIR"}
	}
	if storeFlags.from != "" {
		if apiBase != "" {
			return usageError{"export: give --from or --api, not both"}
		}
		return runExportFrom(storeFlags, o)
	}
	if apiBase != "" {
		if apiToken == "" {
			apiToken = apiReadToken // export only reads
		}
		return runExportAPI(apiBase, apiToken, allowPartial, o)
	}
	st, err := node.Export(o)
	printDamage(o.Format, st.Damaged)
	warnStoreOnly(o.DataDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "exported %d records (%d skipped) to %s\n", st.Records, st.Skipped, o.Out)
	if len(st.Damaged) > 0 {
		return fmt.Errorf("export: %d damaged regions in WARC files were skipped; every readable record was exported", len(st.Damaged))
	}
	return nil
}

// printDamage reports the damaged WARC regions an export skipped.
func printDamage(f node.ExportFormat, damaged []archive.Damage) {
	for _, d := range damaged {
		if f == node.ExportCDXJ || f == node.ExportWACZ || f == node.ExportURLs && d.Resume < 0 {
			fmt.Fprintf(os.Stderr, "crawlnode: export: damaged WARC file %s at offset %d: its records from there on are left out of the index: %v\n", d.File, d.Offset, d.Err)
			continue
		}
		fmt.Fprintf(os.Stderr, "crawlnode: export: damaged WARC file %s at offset %d (records resume at %d): %v\n", d.File, d.Offset, d.Resume, d.Err)
	}
}

func runDeadLetters(args []string) error {
	fs := flag.NewFlagSet("deadletters", flag.ContinueOnError)
	dataDir := fs.String("data", "./crawl-data", "data directory of a stopped node")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "URL\tATTEMPTS\tSTATUS\tLAST ERROR\tPARKED AT")
	n := 0
	err := node.ListDeadLetters(*dataDir, func(d frontier.DeadLetter) bool {
		n++
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", d.URL, d.Attempts, d.Status, d.LastErr, d.At.UTC().Format(time.RFC3339))
		return true
	})
	tw.Flush()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%d dead letters\n", n)
	return nil
}
