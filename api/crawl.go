package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/crawlnode/crawlnode/urlnorm"
)

func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ok", "node": s.backend.Name()})
}

func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	partitions, err := s.backend.Ready()
	if err != nil {
		writeErr(w, err, "")
		return
	}
	WriteJSON(w, http.StatusOK, map[string]any{"status": "ready", "node": s.backend.Name(), "partitions": partitions})
}

// status is GET /v1/crawl/status: the whole cluster's figures (?local=1: this node's).
func (s *server) status(w http.ResponseWriter, r *http.Request) {
	self := s.backend.Status()
	if r.URL.Query().Get("local") != "" {
		WriteJSON(w, http.StatusOK, self)
		return
	}
	peers, unreachable, clustered := s.backend.PeerStatuses(r.Context())
	if !clustered {
		WriteJSON(w, http.StatusOK, self)
		return
	}
	WriteJSON(w, http.StatusOK, SumStatus(self, peers, unreachable))
}

// parseSeeds reads and checks a POST /v1/crawl/seeds body: the batch of canonical URLs,
// the URLs refused, or an *Error for the request as a whole.
func parseSeeds(r *http.Request) (SeedBatch, []rejectedSeed, error) {
	var req seedsRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return SeedBatch{}, nil, Errorf(http.StatusRequestEntityTooLarge, "too_large", "request body over %d bytes", MaxRequestBody)
		}
		return SeedBatch{}, nil, Errorf(http.StatusBadRequest, "bad_json", "malformed JSON: %v", err)
	}
	if dec.More() {
		return SeedBatch{}, nil, Errorf(http.StatusBadRequest, "bad_json", "trailing data after the JSON object")
	}
	if len(req.URLs) == 0 {
		return SeedBatch{}, nil, Errorf(http.StatusBadRequest, "no_urls", `"urls" must list at least one URL`)
	}
	batch := SeedBatch{CrawlDepth: req.CrawlDepth}
	switch req.Priority {
	case "", "normal":
		batch.Priority = 1
	case "high":
		batch.Priority = 0
	default:
		return SeedBatch{}, nil, Errorf(http.StatusBadRequest, "bad_priority", `"priority" must be "high" or "normal"`)
	}
	if req.CrawlDepth != nil && *req.CrawlDepth < 0 {
		return SeedBatch{}, nil, Errorf(http.StatusBadRequest, "bad_depth", `"crawl_depth" must be >= 0`)
	}
	var rejected []rejectedSeed
	for _, u := range req.URLs {
		c, err := urlnorm.Canonicalize(u)
		if err != nil {
			rejected = append(rejected, rejectedSeed{URL: u, Reason: err.Error()})
			continue
		}
		batch.URLs = append(batch.URLs, c)
	}
	return batch, rejected, nil
}

func (s *server) postSeeds(w http.ResponseWriter, r *http.Request) {
	batch, rejected, err := parseSeeds(r)
	if err != nil {
		writeErr(w, err, "")
		return
	}
	resp := seedsResponse{JobID: "default", Status: "accepted", Rejected: rejected}
	if len(batch.URLs) > 0 {
		res, err := s.backend.AddSeeds(r.Context(), batch)
		if err != nil {
			writeErr(w, err, "queue seeds: ")
			return
		}
		// Seeds for hosts another node holds are durable in its outbox: queued as far as
		// this node can tell (their owner drops the ones it has seen).
		resp.SeedsQueued, resp.AlreadySeen = res.Queued, res.AlreadySeen
		for reason, k := range res.Rejected {
			resp.Rejected = append(resp.Rejected, rejectedSeed{URL: fmt.Sprintf("(%d URLs)", k), Reason: reason})
		}
	}
	if resp.SeedsQueued == 0 && resp.AlreadySeen == 0 {
		resp.Status = "rejected"
	}
	WriteJSON(w, http.StatusAccepted, resp)
}

func (s *server) setPaused(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := s.backend.SetPaused(paused); err != nil {
			writeErr(w, err, "")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *server) block(block bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := s.backend.SetBlocked(r.PathValue("domain"), block); err != nil {
			writeErr(w, err, "")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *server) blocked(w http.ResponseWriter, r *http.Request) {
	WriteJSON(w, http.StatusOK, map[string][]string{"domains": s.backend.Blocked()})
}
