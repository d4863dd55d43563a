package api

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/control"
	"github.com/crawlnode/crawlnode/corpus"
	"github.com/crawlnode/crawlnode/frontier"
)

// fakeBackend is a Backend held in memory: each answer is a field, and the calls that
// change something are recorded.
type fakeBackend struct {
	name        string
	readyErr    error
	partitions  int
	status      Status
	peers       []Status
	unreachable []string
	clustered   bool

	seedResult SeedResult
	seedErr    error
	seeds      []SeedBatch // AddSeeds calls

	paused     []bool
	blockErr   error
	blockCalls []string // "+domain" or "-domain"
	blocked    []string

	pages     map[string]frontier.SeenRecord // by URL
	lookupErr error
	texts     map[string]corpus.Record
	textErr   error
	peerPage  bool     // AskPeers answers
	routed    []string // RouteToOwner: hosts another node owns

	hosts      map[string]HostState
	topHosts   map[HostOrder][]TopHost
	recent     []RecentError
	letters    []frontier.DeadLetter
	lettersErr error

	cluster    any
	clusterErr error
	leaveErr   error
	left       bool

	job         Job
	jobConfig   control.JobConfig // what UpdateJob changes
	writableErr error
	updateErr   error

	exportFiles []ExportFile
	exportData  map[string]string // by "kind/name": the file's bytes on disk (may exceed its size)
	exportErr   error
	opened      []string // OpenExportFile calls, "kind/name"
}

var _ Backend = (*fakeBackend)(nil)

func newFake() *fakeBackend {
	return &fakeBackend{name: "n1", status: Status{Node: "n1", State: "running"},
		pages: map[string]frontier.SeenRecord{}, texts: map[string]corpus.Record{}, hosts: map[string]HostState{},
		topHosts: map[HostOrder][]TopHost{}}
}

func (f *fakeBackend) Name() string                { return f.name }
func (f *fakeBackend) Ready() (int, error)         { return f.partitions, f.readyErr }
func (f *fakeBackend) Status() Status              { return f.status }
func (f *fakeBackend) SetPaused(paused bool) error { f.paused = append(f.paused, paused); return nil }
func (f *fakeBackend) Blocked() []string           { return f.blocked }

func (f *fakeBackend) PeerStatuses(context.Context) ([]Status, []string, bool) {
	return f.peers, f.unreachable, f.clustered
}

func (f *fakeBackend) AddSeeds(_ context.Context, seeds SeedBatch) (SeedResult, error) {
	f.seeds = append(f.seeds, seeds)
	return f.seedResult, f.seedErr
}

func (f *fakeBackend) SetBlocked(domain string, block bool) error {
	if f.blockErr != nil {
		return f.blockErr
	}
	f.blockCalls = append(f.blockCalls, map[bool]string{true: "+", false: "-"}[block]+domain)
	return nil
}

func (f *fakeBackend) LookupHash(hash [16]byte) (frontier.SeenRecord, bool, error) {
	for u, rec := range f.pages {
		if frontier.URLHash(u) == hash {
			return rec, true, f.lookupErr
		}
	}
	return frontier.SeenRecord{}, false, f.lookupErr
}

func (f *fakeBackend) Lookup(url string) (frontier.SeenRecord, bool, error) {
	rec, ok := f.pages[url]
	return rec, ok, f.lookupErr
}

func (f *fakeBackend) PageText(_ context.Context, url string, withText bool) (corpus.Record, error) {
	rec, ok := f.texts[url]
	if !ok {
		return corpus.Record{}, corpus.ErrNoPage
	}
	if !withText {
		rec.Text = ""
	}
	return rec, f.textErr
}

func (f *fakeBackend) RouteToOwner(w http.ResponseWriter, r *http.Request, hostKey string) bool {
	for _, h := range f.routed {
		if h == hostKey {
			WriteJSON(w, http.StatusOK, map[string]string{"routed": hostKey})
			return true
		}
	}
	return false
}

func (f *fakeBackend) AskPeers(w http.ResponseWriter, r *http.Request) bool {
	if f.peerPage {
		WriteJSON(w, http.StatusOK, map[string]string{"from": "peer"})
	}
	return f.peerPage
}

func (f *fakeBackend) Host(host string) (HostState, bool) {
	st, ok := f.hosts[host]
	return st, ok
}

func (f *fakeBackend) TopHosts(by HostOrder, limit int) []TopHost {
	rows := f.topHosts[by]
	return rows[:min(limit, len(rows))]
}

func (f *fakeBackend) RecentErrors(limit int, host string) []RecentError {
	out := []RecentError{}
	for _, e := range f.recent {
		if len(out) < limit && (host == "" || e.Host == host) {
			out = append(out, e)
		}
	}
	return out
}

func (f *fakeBackend) DeadLetters(limit int) ([]frontier.DeadLetter, int, error) {
	return f.letters[:min(limit, len(f.letters))], len(f.letters), f.lettersErr
}

func (f *fakeBackend) Cluster() (any, error) { return f.cluster, f.clusterErr }

func (f *fakeBackend) Leave() error {
	if f.leaveErr != nil {
		return f.leaveErr
	}
	f.left = true
	return nil
}

func (f *fakeBackend) Job() Job           { return f.job }
func (f *fakeBackend) JobWritable() error { return f.writableErr }

func (f *fakeBackend) UpdateJob(_ context.Context, change func(*control.JobConfig) error) error {
	if f.updateErr != nil {
		return f.updateErr
	}
	next := f.jobConfig
	if err := change(&next); err != nil {
		return err
	}
	next.Version++
	f.jobConfig = next
	f.job.Version = next.Version
	return nil
}

func (f *fakeBackend) CheckScope(scope string) error {
	switch scope {
	case "all", "seed-hosts", "seed-domains":
		return nil
	}
	return errors.New("bad scope")
}

func (f *fakeBackend) CheckPatterns(patterns []string) error {
	for _, p := range patterns {
		if strings.Contains(p, "(") && !strings.Contains(p, ")") {
			return errors.New("pattern " + p + ": missing closing )")
		}
	}
	return nil
}

func (f *fakeBackend) CheckPriority(priority string) error {
	if priority != "opic" && priority != "bfs" {
		return errors.New("bad priority")
	}
	return nil
}

func (f *fakeBackend) ExportFiles() ([]ExportFile, error) { return f.exportFiles, f.exportErr }

// OpenExportFile serves the listed size of a file in exportData, as a node serves the
// durable prefix of a file being written.
func (f *fakeBackend) OpenExportFile(kind, name string) (ExportReader, int64, time.Time, error) {
	f.opened = append(f.opened, kind+"/"+name)
	if f.exportErr != nil {
		return nil, 0, time.Time{}, f.exportErr
	}
	data, ok := f.exportData[kind+"/"+name]
	if !ok {
		return nil, 0, time.Time{}, fs.ErrNotExist
	}
	size := int64(len(data))
	for _, e := range f.exportFiles {
		if e.Kind == kind && e.Name == name {
			size = e.Size
		}
	}
	return nopCloser{strings.NewReader(data)}, size, time.Time{}, nil
}

type nopCloser struct{ io.ReaderAt }

func (nopCloser) Close() error { return nil }

// do sends one request to h and returns the answer's status and body.
func do(t *testing.T, h http.Handler, method, target, body string, header ...string) (int, string, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String(), rec.Header()
}
