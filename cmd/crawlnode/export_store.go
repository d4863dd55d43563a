package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/crawlnode/crawlnode/node"
	"github.com/crawlnode/crawlnode/outstore"
)

// storeExportFlags are export's flags for reading an output store (export --from).
type storeExportFlags struct {
	from, endpoint, tmp string
}

func addStoreExportFlags(fs *flag.FlagSet) *storeExportFlags {
	f := &storeExportFlags{}
	fs.StringVar(&f.from, "from", "", "read the outputs of every node from an output store, s3://BUCKET/PREFIX (instead of --data; credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION)")
	fs.StringVar(&f.endpoint, "s3-endpoint", "", "with --from: S3 endpoint URL, http(s)://HOST[:PORT] (default: AWS S3)")
	fs.StringVar(&f.tmp, "tmp", "", "with --from: directory for the downloaded files while the export runs (default: the system's temp directory)")
	return f
}

// runExportFrom exports from an output store; o carries the format flags export parsed.
func runExportFrom(f *storeExportFlags, o node.ExportOptions) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	term := isTerminal(os.Stderr)
	st, err := node.ExportFromStore(ctx, node.StoreExportOptions{
		ExportOptions: o, From: f.from, TempDir: f.tmp,
		Conn: outstore.Conn{Endpoint: f.endpoint, AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"),
			SecretKey: os.Getenv("AWS_SECRET_ACCESS_KEY"), Region: os.Getenv("AWS_REGION")},
		Progress: func(nd string, e outstore.Entry) {
			if term {
				fmt.Fprintf(os.Stderr, "\rdownloaded %s/%s (%d bytes)\x1b[K", nd, e.Name, e.Size)
			}
		},
	})
	if term {
		fmt.Fprint(os.Stderr, "\r\x1b[K")
	}
	printDamage(o.Format, st.Damaged)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "exported %d records (%d skipped) to %s from %d files (%d bytes) of %d nodes (%s) in %s\n",
		st.Records, st.Skipped, o.Out, st.Files, st.Downloaded, len(st.Nodes), strings.Join(st.Nodes, ", "), f.from)
	if len(st.Damaged) > 0 {
		return fmt.Errorf("export: %d damaged regions in WARC files were skipped; every readable record was exported", len(st.Damaged))
	}
	return nil
}

// warnStoreOnly says which files of a data directory are only in its output store.
func warnStoreOnly(dataDir string) {
	target, names, err := node.StoreOnlyFiles(dataDir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "crawlnode: export: cannot read the output store's manifest copy: %v\n", err)
		return
	}
	if len(names) == 0 {
		return
	}
	show := names
	if len(show) > 10 {
		show = show[:10]
	}
	fmt.Fprintf(os.Stderr, "crawlnode: export: %d files were removed after upload and are only in the output store %s (not in this export): %s%s\n  export them with: crawlnode export --from %s --s3-endpoint URL ...\n",
		len(names), target, strings.Join(show, ", "), map[bool]string{true: ", ...", false: ""}[len(names) > 10], target)
}
