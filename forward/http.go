package forward

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
)

// LinksPath is the internal endpoint a node serves Handler on.
const LinksPath = "/internal/v1/links"

// ContentType is the media type of an encoded batch.
const ContentType = "application/x-crawlnode-links"

// RefusedError is a partial refusal: the receiver committed every partition of the batch
// except Partitions, which it does not own at the batch's epoch. errors.Is(err,
// ErrNotOwner) holds.
type RefusedError struct {
	Peer       string
	Partitions []uint16
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("forward: peer %s refused partitions %v (not the owner)", e.Peer, e.Partitions)
}

// Unwrap makes errors.Is(err, ErrNotOwner) true.
func (e *RefusedError) Unwrap() error { return ErrNotOwner }

// refusal is the JSON body of a 409 answer.
type refusal struct {
	Code    string   `json:"code"`
	Refused []uint16 `json:"refused"`
}

// Handler serves LinksPath: the POST body is an encoded batch (at most MaxWireBytes). It
// calls apply once per partition, in order, with the request's context. Answers:
//
//	200  every partition committed
//	409  JSON {"code":"not_owner","refused":[partitions]}: apply returned ErrNotOwner for
//	     those; every other partition was committed
//	400  the body does not decode (code "corrupt"); 413 over the limits ("too_large")
//	403  apply returned ErrForbidden ("forbidden": the caller may not deliver this batch);
//	     partitions applied before it stay (the first call refuses in practice, as the
//	     check is the batch's sender)
//	500  apply failed otherwise ("apply_failed"): the sender retries the whole batch, which
//	     is safe because frontier adds are idempotent
func Handler(apply func(ctx context.Context, from string, p PartitionLinks) error) http.Handler {
	return HandlerSync(apply, nil)
}

// HandlerSync is Handler that, once every partition was applied, calls sync (if not nil)
// with the partitions that committed before it answers: the sender deletes the links when
// it gets the answer, so whatever must hold them beyond the receiver's own disk (its
// replicas) has to be done by then. An error from sync answers 500 ("sync_failed"): the
// sender keeps the batch and sends it again.
func HandlerSync(apply func(ctx context.Context, from string, p PartitionLinks) error, sync func(ctx context.Context, committed []uint16) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			httpError(w, http.StatusMethodNotAllowed, "method_not_allowed", "POST only")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxWireBytes))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				httpError(w, http.StatusRequestEntityTooLarge, "too_large", err.Error())
				return
			}
			httpError(w, http.StatusBadRequest, "read_failed", err.Error())
			return
		}
		b, err := Decode(body)
		if err != nil {
			if errors.Is(err, ErrTooLarge) {
				httpError(w, http.StatusRequestEntityTooLarge, "too_large", err.Error())
				return
			}
			httpError(w, http.StatusBadRequest, "corrupt", err.Error())
			return
		}
		var refused, committed []uint16
		for _, p := range b.Partitions {
			err := apply(r.Context(), b.From, p)
			switch {
			case err == nil:
				committed = append(committed, p.Partition)
			case errors.Is(err, ErrNotOwner):
				refused = append(refused, p.Partition)
			case errors.Is(err, ErrForbidden):
				httpError(w, http.StatusForbidden, "forbidden", err.Error())
				return
			default:
				httpError(w, http.StatusInternalServerError, "apply_failed",
					fmt.Sprintf("partition %d: %v", p.Partition, err))
				return
			}
		}
		if sync != nil && len(committed) > 0 {
			if err := sync(r.Context(), committed); err != nil {
				httpError(w, http.StatusInternalServerError, "sync_failed", err.Error())
				return
			}
		}
		if len(refused) > 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(refusal{Code: "not_owner", Refused: refused})
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}

func httpError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": code, "error": msg})
}

// HTTPSender returns a Send function that POSTs the encoded batch to urlOf(peer) +
// LinksPath. urlOf gives a peer's internal base URL ("http://127.0.0.1:7001"); ok false
// fails the send (the peer is unknown for now). A 409 becomes a *RefusedError listing the
// refused partitions (only partitions of the batch are believed); any other non-200 answer
// or transport error wraps ErrSend. The receiver authenticates the sender: client must
// carry the cluster's credentials (the cluster's client signs every request,
// clusterauth.Transport, or presents the node's certificate).
func HTTPSender(client *http.Client, urlOf func(peer string) (string, bool)) func(ctx context.Context, peer string, b Batch) error {
	if client == nil {
		client = http.DefaultClient
	}
	return func(ctx context.Context, peer string, b Batch) error {
		base, ok := urlOf(peer)
		if !ok {
			return fmt.Errorf("%w: no address for peer %q", ErrSend, peer)
		}
		body := b.enc
		if body == nil {
			var err error
			if body, err = Encode(b); err != nil {
				return err
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+LinksPath, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("%w: %v", ErrSend, err)
		}
		req.Header.Set("Content-Type", ContentType)
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrSend, err)
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		switch resp.StatusCode {
		case http.StatusOK:
			return nil
		case http.StatusConflict:
			var rf refusal
			if err := json.Unmarshal(msg, &rf); err != nil || rf.Code != "not_owner" {
				return fmt.Errorf("%w: peer %s: 409 without a refusal list", ErrSend, peer)
			}
			re := &RefusedError{Peer: peer}
			for _, p := range b.Partitions {
				if slices.Contains(rf.Refused, p.Partition) {
					re.Partitions = append(re.Partitions, p.Partition)
				}
			}
			if len(re.Partitions) == 0 {
				return fmt.Errorf("%w: peer %s: 409 naming no partition of the batch", ErrSend, peer)
			}
			return re
		default:
			return fmt.Errorf("%w: peer %s: status %d: %s", ErrSend, peer, resp.StatusCode, bytes.TrimSpace(msg))
		}
	}
}
