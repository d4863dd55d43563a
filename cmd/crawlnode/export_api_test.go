package main

import (
	"strings"
	"testing"

	"github.com/crawlnode/crawlnode/api"
	"github.com/crawlnode/crawlnode/node"
)

// Each format copies only what it needs: shards for the text formats, WARC files for warc,
// indexes (and the WARC files without one) for cdxj and urls, everything for wacz.
func TestExportPlan(t *testing.T) {
	listing := []api.ExportFile{
		{Kind: api.ExportKindWARC, Name: "c-1-n1.warc.gz"},
		{Kind: api.ExportKindCDXJ, Name: "c-1-n1.warc.gz.cdxj"},
		{Kind: api.ExportKindWARC, Name: "c-2-n1.warc.gz", Open: true},
		{Kind: api.ExportKindCorpus, Name: "corpus-n1-000000.jsonl.zst"},
		{Kind: api.ExportKindCorpus, Name: "corpus-n1-000001.jsonl.zst.partial", Open: true},
	}
	for _, tc := range []struct {
		f    node.ExportFormat
		want string
	}{
		{node.ExportJSONL, "corpus-n1-000000.jsonl.zst corpus-n1-000001.jsonl.zst.partial"},
		{node.ExportMarkdown, "corpus-n1-000000.jsonl.zst corpus-n1-000001.jsonl.zst.partial"},
		{node.ExportWARC, "c-1-n1.warc.gz c-2-n1.warc.gz"},
		{node.ExportCDXJ, "c-1-n1.warc.gz.cdxj c-2-n1.warc.gz"},
		{node.ExportURLs, "c-1-n1.warc.gz.cdxj c-2-n1.warc.gz"},
		{node.ExportWACZ, "c-1-n1.warc.gz c-1-n1.warc.gz.cdxj c-2-n1.warc.gz corpus-n1-000000.jsonl.zst corpus-n1-000001.jsonl.zst.partial"},
	} {
		var got []string
		for _, f := range plan(tc.f, listing) {
			got = append(got, f.Name)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: copies %v, want %s", tc.f, got, tc.want)
		}
	}
}
