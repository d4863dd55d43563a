package main

import (
	"errors"
	"strings"
	"testing"
)

// TestExportFormats: the export command knows markdown, and refuses it to standard output
// (it writes a directory) and unknown formats, as usage errors, before touching any data.
func TestExportFormats(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // in the usage error; "" for none
	}{
		{[]string{"--format", "markdown", "--out", "-"}, "writes a directory"},
		{[]string{"--format", "pdf", "--out", "x"}, "want jsonl, markdown, warc, urls, cdxj or wacz"},
		{[]string{"--format", "markdown"}, "--out PATH is required"},
	} {
		err := runExport(append([]string{"--data", t.TempDir()}, c.args...))
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(ue.msg, c.want) {
			t.Errorf("export %v: %v, want a usage error with %q", c.args, err, c.want)
		}
	}
}
