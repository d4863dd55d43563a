package dedup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/crawlnode/crawlnode/internal/httpjson"
)

// Path is the internal endpoint an owner serves Handler on.
const Path = "/internal/v1/dedup"

// Wire limits: a request body and the operations it may carry.
const (
	MaxWireBytes = 4 << 20
	MaxWireOps   = 8192
)

// Errors of the cluster side.
var (
	// ErrNotOwner: a partition's lease holder refused it (or this node does not hold it).
	ErrNotOwner = errors.New("dedup: not the partition's owner")
	// ErrNoOwner: a partition has no lease holder yet.
	ErrNoOwner = errors.New("dedup: partition has no owner")
	// ErrSend: a request failed in transport or with an unexpected answer.
	ErrSend = errors.New("dedup: send failed")
)

// PartEpoch is a partition and the lease epoch the sender saw.
type PartEpoch struct {
	P uint16 `json:"p"`
	E uint64 `json:"e"`
}

// Request is the body of a POST to Path (JSON).
type Request struct {
	From  string      `json:"from"`
	Parts []PartEpoch `json:"parts"`
	Ops   []Op        `json:"ops"`
}

// Response is the body of a 200 answer: one Result per Op, in order.
type Response struct {
	Results []Result `json:"results"`
}

type refusal struct {
	Code    string   `json:"code"`
	Refused []uint16 `json:"refused"`
}

// Leases is what the owner side needs of the cluster.
type Leases interface {
	// WithLeases runs fn while this node holds every partition of ps at its epoch and no
	// handoff or import holds it (a handoff waits for fn to return). Otherwise it runs
	// nothing and returns the partitions it does not hold.
	WithLeases(ps map[uint16]uint64, fn func() error) (refused []uint16, err error)
}

// Handler serves Path. Answers: 200 with a Response; 409 {"code":"not_owner","refused"}
// when this node does not hold a partition of the request at its epoch (nothing applied);
// 400 for a body that does not decode or an operation outside the request's partitions;
// 413 past the limits; 500 when the store fails.
func Handler(store *Store, leases Leases) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxWireBytes))
		if err != nil {
			httpjson.WriteError(w, http.StatusRequestEntityTooLarge, "too_large", "%s", err.Error())
			return
		}
		var req Request
		if err := json.Unmarshal(body, &req); err != nil {
			httpjson.WriteError(w, http.StatusBadRequest, "corrupt", "%s", err.Error())
			return
		}
		if len(req.Ops) > MaxWireOps {
			httpjson.WriteError(w, http.StatusRequestEntityTooLarge, "too_large", "%d operations, max %d", len(req.Ops), MaxWireOps)
			return
		}
		parts := make(map[uint16]uint64, len(req.Parts))
		for _, pe := range req.Parts {
			parts[pe.P] = pe.E
		}
		for i := range req.Ops {
			if _, ok := parts[req.Ops[i].Part]; !ok {
				httpjson.WriteError(w, http.StatusBadRequest, "corrupt", "operation %d: partition %d not in the request", i, req.Ops[i].Part)
				return
			}
		}
		var res []Result
		refused, err := leases.WithLeases(parts, func() error {
			var err error
			res, err = store.Apply(req.Ops)
			return err
		})
		switch {
		case len(refused) > 0:
			slices.Sort(refused)
			httpjson.Write(w, http.StatusConflict, refusal{Code: "not_owner", Refused: refused})
		case errors.Is(err, ErrBadOp):
			httpjson.WriteError(w, http.StatusBadRequest, "bad_op", "%s", err.Error())
		case err != nil:
			httpjson.WriteError(w, http.StatusInternalServerError, "apply_failed", "%s", err.Error())
		default:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(Response{Results: res})
		}
	})
}

// post sends req to base+Path and returns the results and the bytes sent and received.
func post(ctx context.Context, do func(*http.Request) (*http.Response, error), base, peer string, req *Request) ([]Result, int, int, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, 0, 0, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+Path, bytes.NewReader(body))
	if err != nil {
		return nil, len(body), 0, fmt.Errorf("%w: %v", ErrSend, err)
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := do(hr)
	if err != nil {
		return nil, len(body), 0, fmt.Errorf("%w: peer %s: %w", ErrSend, peer, err)
	}
	defer resp.Body.Close()
	msg, err := io.ReadAll(io.LimitReader(resp.Body, 2*MaxWireBytes))
	if err != nil {
		return nil, len(body), len(msg), fmt.Errorf("%w: peer %s: %w", ErrSend, peer, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		var out Response
		if err := json.Unmarshal(msg, &out); err != nil || len(out.Results) != len(req.Ops) {
			return nil, len(body), len(msg), fmt.Errorf("%w: peer %s: answer does not match the request", ErrSend, peer)
		}
		return out.Results, len(body), len(msg), nil
	case http.StatusConflict:
		var rf refusal
		_ = json.Unmarshal(msg, &rf)
		return nil, len(body), len(msg), fmt.Errorf("%w: peer %s refused partitions %v", ErrNotOwner, peer, rf.Refused)
	default:
		return nil, len(body), len(msg), fmt.Errorf("%w: peer %s: status %d: %s", ErrSend, peer, resp.StatusCode, bytes.TrimSpace(msg))
	}
}
