package main

// `crawlnode export --api URL`: the cluster's outputs as one. The node at URL names the
// members (GET /v1/cluster); each member lists what it serves (GET /v1/export/files) and
// each file is copied (GET /v1/export/files/{kind}/{name}) into a spool directory beside
// the output, one directory per member laid out like a data directory; node.ExportMembers
// then writes them as one output to a temporary name that is renamed to --out only when
// everything was read. So a member that cannot be read leaves nothing at --out, unless
// --allow-partial, which writes the rest and names what is missing.
//
// What is copied depends on the format: corpus shards for jsonl and markdown; WARC files
// for warc; CDXJ indexes of closed WARC files (and the open file, which has none yet) for
// cdxj and urls; all of them for wacz. The spool is removed at the end either way.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/crawlnode/crawlnode/api"
	"github.com/crawlnode/crawlnode/node"
)

// apiExport is one `export --api` run.
type apiExport struct {
	base         string // the node asked, without a trailing slash
	token        string
	allowPartial bool
	o            node.ExportOptions
	client       *http.Client
	progress     *exportProgress
}

// exportMember is a member to read: its name and the base URL of its API.
type exportMember struct {
	name, base string
}

// memberFailure is a member that could not be read, and why.
type memberFailure struct {
	name string
	err  error
}

func newAPIExport(base, token string, allowPartial bool, o node.ExportOptions) *apiExport {
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		ResponseHeaderTimeout: 30 * time.Second,
		MaxIdleConnsPerHost:   2,
	}
	return &apiExport{base: strings.TrimRight(base, "/"), token: token, allowPartial: allowPartial, o: o,
		client: &http.Client{Transport: tr}, progress: newExportProgress(os.Stderr)}
}

// get sends an authorized GET; a status other than 200 is an error carrying the API's message.
func (e *apiExport) get(ctx context.Context, u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		var m struct{ Error, Code string }
		if json.Unmarshal(b, &m) == nil && m.Error != "" {
			return nil, &httpStatusError{status: resp.StatusCode, msg: m.Error}
		}
		return nil, &httpStatusError{status: resp.StatusCode, msg: strings.TrimSpace(string(b))}
	}
	return resp, nil
}

type httpStatusError struct {
	status int
	msg    string
}

func (h *httpStatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", h.status, h.msg) }

// getJSON GETs u into v, within 30 s.
func (e *apiExport) getJSON(ctx context.Context, u string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := e.get(ctx, u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(v)
}

// members asks the node for the cluster's members: every member but those that left (a
// decommissioned node's files stay on its disk; they are named on stderr). The node asked
// is reached at the given address, the others at the address they gossip.
func (e *apiExport) members(ctx context.Context) ([]exportMember, []memberFailure, error) {
	var view node.ClusterView
	if err := e.getJSON(ctx, e.base+"/v1/cluster", &view); err != nil {
		return nil, nil, fmt.Errorf("export: ask %s for the cluster's members: %w", e.base, err)
	}
	var ms []exportMember
	var failed []memberFailure
	for _, m := range view.Members {
		switch {
		case m.State == "left":
			fmt.Fprintf(os.Stderr, "crawlnode: export: %s left the cluster: files it kept are not read\n", m.Name)
		case m.Name == view.Self:
			ms = append(ms, exportMember{name: m.Name, base: e.base})
		case m.HTTPAddr == "":
			failed = append(failed, memberFailure{m.Name, errors.New("it has no HTTP address")})
		default:
			ms = append(ms, exportMember{name: m.Name, base: "http://" + m.HTTPAddr})
		}
	}
	if len(ms) == 0 {
		return nil, nil, fmt.Errorf("export: %s names no member", e.base)
	}
	sort.Slice(ms, func(i, k int) bool { return ms[i].name < ms[k].name })
	return ms, failed, nil
}

// wanted reports whether format f needs a file of this kind.
func wanted(f node.ExportFormat, file api.ExportFile) bool {
	switch f {
	case node.ExportJSONL, node.ExportMarkdown:
		return file.Kind == api.ExportKindCorpus
	case node.ExportWARC:
		return file.Kind == api.ExportKindWARC
	case node.ExportWACZ:
		return true
	}
	return file.Kind != api.ExportKindCorpus // cdxj, urls: indexes, and WARC files that lack one
}

// plan picks the files of a listing that the format needs: for cdxj and urls a WARC file's
// index instead of the file when it has one.
func plan(f node.ExportFormat, files []api.ExportFile) []api.ExportFile {
	indexed := map[string]bool{}
	for _, x := range files {
		if x.Kind == api.ExportKindCDXJ {
			indexed[strings.TrimSuffix(x.Name, ".cdxj")] = true
		}
	}
	var out []api.ExportFile
	for _, x := range files {
		if !wanted(f, x) {
			continue
		}
		if (f == node.ExportCDXJ || f == node.ExportURLs) && x.Kind == api.ExportKindWARC && indexed[x.Name] {
			continue
		}
		out = append(out, x)
	}
	return out
}

// copyMember copies the files of m the format needs into dir (warc/ and corpus/).
func (e *apiExport) copyMember(ctx context.Context, m exportMember, dir string) error {
	var l api.ExportListing
	if err := e.getJSON(ctx, m.base+"/v1/export/files", &l); err != nil {
		return fmt.Errorf("list its files: %w", err)
	}
	files := plan(e.o.Format, l.Files)
	var total int64
	for _, f := range files {
		if !api.ValidExportName(f.Kind, f.Name) {
			return fmt.Errorf("it listed a file named %q: not a %s file name", f.Name, f.Kind)
		}
		total += f.Size
	}
	e.progress.addPlanned(len(files), total)
	for _, sub := range []string{"warc", "corpus"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := e.copyFile(ctx, m, f, dir); err != nil {
			return fmt.Errorf("copy %s: %w", f.Name, err)
		}
	}
	return nil
}

// copyFile copies one file; an open shard that was closed (renamed) meanwhile is taken by
// its finished name.
func (e *apiExport) copyFile(ctx context.Context, m exportMember, f api.ExportFile, dir string) error {
	sub := "warc"
	if f.Kind == api.ExportKindCorpus {
		sub = "corpus"
	}
	// A member that stops sending mid-file fails the copy after copyIdle without a byte.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	idle := time.AfterFunc(copyIdle, cancel)
	defer idle.Stop()
	name := f.Name
	resp, err := e.get(ctx, m.base+"/v1/export/files/"+f.Kind+"/"+url.PathEscape(name))
	var hs *httpStatusError
	if errors.As(err, &hs) && hs.status == http.StatusNotFound && strings.HasSuffix(name, ".partial") {
		name = strings.TrimSuffix(name, ".partial")
		resp, err = e.get(ctx, m.base+"/v1/export/files/"+f.Kind+"/"+url.PathEscape(name))
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if !api.ValidExportName(f.Kind, name) {
		return fmt.Errorf("bad file name %q", name)
	}
	out, err := os.Create(filepath.Join(dir, sub, name))
	if err != nil {
		return err
	}
	_, err = io.Copy(out, io.TeeReader(resp.Body, io.MultiWriter(e.progress, idleReset{idle})))
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("stalled: no byte for %s (%w)", copyIdle, err)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	e.progress.fileDone()
	return err
}

// copyIdle is how long a file's copy may go without a byte before it fails.
const copyIdle = time.Minute

// idleReset pushes the copy's idle deadline back with every read.
type idleReset struct{ t *time.Timer }

func (r idleReset) Write(b []byte) (int, error) {
	r.t.Reset(copyIdle)
	return len(b), nil
}

// run copies every member and writes the output; it returns the members left out (with
// --allow-partial) and the export's figures.
func (e *apiExport) run(ctx context.Context) (node.ExportStats, []memberFailure, error) {
	var st node.ExportStats
	if err := checkOutFree(e.o); err != nil {
		return st, nil, err
	}
	ms, failed, err := e.members(ctx)
	if err != nil {
		return st, nil, err
	}
	if len(failed) > 0 && !e.allowPartial {
		return st, failed, nil
	}
	spoolIn := os.TempDir()
	if e.o.Out != "-" {
		spoolIn = filepath.Dir(e.o.Out)
	}
	spool, err := os.MkdirTemp(spoolIn, ".crawlnode-export-*")
	if err != nil {
		return st, nil, fmt.Errorf("export: %w", err)
	}
	defer os.RemoveAll(spool)
	e.progress.setMembers(len(ms))
	var dirs []string
	for i, m := range ms {
		dir := filepath.Join(spool, fmt.Sprintf("m%04d", i))
		if err := e.copyMember(ctx, m, dir); err != nil {
			failed = append(failed, memberFailure{m.name, err})
			if !e.allowPartial {
				e.progress.end()
				return st, failed, nil
			}
			os.RemoveAll(dir)
			continue
		}
		e.progress.memberDone()
		dirs = append(dirs, dir)
	}
	st, err = e.write(dirs)
	e.progress.end()
	return st, failed, err
}

// write merges the copies into a temporary output beside --out and renames it into place.
func (e *apiExport) write(dirs []string) (node.ExportStats, error) {
	o := e.o
	if o.Format == node.ExportMarkdown {
		tmp, err := os.MkdirTemp(filepath.Dir(o.Out), "."+filepath.Base(o.Out)+".tmp-*")
		if err != nil {
			return node.ExportStats{}, fmt.Errorf("export: %w", err)
		}
		defer os.RemoveAll(tmp)
		o.Out = tmp
		var st node.ExportStats
		err = node.ExportMembers(dirs, o, io.Discard, &st)
		if err == nil {
			os.Remove(e.o.Out) // absent or empty (checkOutFree)
			err = os.Rename(tmp, e.o.Out)
		}
		return st, err
	}
	var st node.ExportStats
	if o.Out == "-" {
		err := node.ExportMembers(dirs, o, e.progress.records(os.Stdout, &st), &st)
		return st, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(o.Out), "."+filepath.Base(o.Out)+".tmp-*")
	if err != nil {
		return st, fmt.Errorf("export: %w", err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename
	err = node.ExportMembers(dirs, o, e.progress.records(tmp, &st), &st)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), o.Out)
	}
	return st, err
}

// checkOutFree refuses a markdown --out that is a non-empty directory before anything is
// copied.
func checkOutFree(o node.ExportOptions) error {
	if o.Format != node.ExportMarkdown {
		return nil
	}
	entries, err := os.ReadDir(o.Out)
	if err == nil && len(entries) > 0 {
		return fmt.Errorf("export: --out %s is not empty", o.Out)
	}
	return nil
}

// runExportAPI is `export --api`.
func runExportAPI(base, token string, allowPartial bool, o node.ExportOptions) error {
	if _, err := url.ParseRequestURI(base); err != nil || !strings.HasPrefix(base, "http") {
		return usageError{fmt.Sprintf("export: --api %q is not an http(s) URL", base)}
	}
	e := newAPIExport(base, token, allowPartial, o)
	st, failed, err := e.run(context.Background())
	if err != nil {
		return err
	}
	var names []string
	for _, f := range failed {
		fmt.Fprintf(os.Stderr, "crawlnode: export: cannot read member %s: %v\n", f.name, f.err)
		names = append(names, f.name)
	}
	if len(failed) > 0 && !allowPartial {
		return fmt.Errorf("export: cannot read member(s) %s; nothing written (--allow-partial writes the rest)", strings.Join(names, ", "))
	}
	printDamage(o.Format, st.Damaged)
	fmt.Fprintf(os.Stderr, "exported %d records (%d skipped) from %d members to %s\n", st.Records, st.Skipped, e.progress.members, o.Out)
	if len(failed) > 0 {
		fmt.Fprintf(os.Stderr, "crawlnode: export: partial: left out member(s) %s\n", strings.Join(names, ", "))
	}
	if len(st.Damaged) > 0 {
		return fmt.Errorf("export: %d damaged regions in WARC files were skipped; every readable record was exported", len(st.Damaged))
	}
	return nil
}
