package main

import (
	"fmt"
	"os"
	"time"

	"github.com/crawlnode/crawlnode/node"
	"github.com/crawlnode/crawlnode/outstore"
)

// addOutputStoreFlags registers the output store's flags. The credentials come from the
// environment only (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION), as every S3
// tool reads them, so no secret shows in a process list or a config file.
func addOutputStoreFlags(f *crawlFlags) {
	fs, c := f.fs, &f.cfg
	fs.StringVar(&c.OutputStore.URL, "output-store", "", "s3://BUCKET/PREFIX: upload every closed WARC file (with its CDXJ index) and corpus shard there, verified and listed in a manifest per node (credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION)")
	fs.StringVar(&c.OutputStore.Endpoint, "s3-endpoint", "", "S3 endpoint URL of --output-store, http(s)://HOST[:PORT] (default: AWS S3)")
	f.durationVar(&c.RotateEvery, "rotate-every", 0, "close a WARC file or corpus shard once it is this old, so little waits unshipped (0: 5m with --output-store, else by size only)")
	fs.Int64Var(&c.OutputStore.MaxUnshipped, "output-store-max-unshipped", outstore.DefaultMaxUnshipped, "pause fetching while more bytes of output than this are not yet in --output-store (resumes by itself)")
	f.durationVar(&c.OutputStore.RetryMax, "output-store-retry-max", time.Minute, "longest wait between upload tries while --output-store fails (the first wait is 1s, doubling up to this)")
	fs.BoolVar(&c.OutputStore.DeleteAfterUpload, "delete-after-upload", false, "remove local WARC files and shards once verified in --output-store (the newest of each kind stays)")
}

// checkOutputStoreFlags checks the flags that need no network and takes the credentials
// from the environment; node.New checks the store itself before it creates anything.
func checkOutputStoreFlags(c *node.Config) error {
	o := &c.OutputStore
	if o.URL == "" {
		if o.DeleteAfterUpload || o.Endpoint != "" {
			return usageError{"--delete-after-upload and --s3-endpoint need --output-store s3://BUCKET/PREFIX"}
		}
		return nil
	}
	if o.RetryMax < time.Second {
		return usageError{"--output-store-retry-max must be at least 1s"}
	}
	if _, err := outstore.ParseURL(o.URL); err != nil {
		return usageError{fmt.Sprintf("--output-store: %v", err)}
	}
	o.AccessKey = os.Getenv("AWS_ACCESS_KEY_ID")
	o.SecretKey = os.Getenv("AWS_SECRET_ACCESS_KEY")
	o.Region = os.Getenv("AWS_REGION")
	if o.AccessKey == "" || o.SecretKey == "" {
		return usageError{"--output-store needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment"}
	}
	return nil
}
