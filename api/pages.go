package api

import (
	"encoding/hex"
	"errors"
	"net/http"
	"strings"

	"github.com/crawlnode/crawlnode/archive"
	"github.com/crawlnode/crawlnode/corpus"
	"github.com/crawlnode/crawlnode/frontier"
	"github.com/crawlnode/crawlnode/urlnorm"
)

func (s *server) pageByHash(w http.ResponseWriter, r *http.Request) {
	b, err := hex.DecodeString(r.PathValue("hash"))
	if err != nil || len(b) != 16 {
		WriteError(w, http.StatusBadRequest, "bad_hash", "url_hash must be 32 hex digits")
		return
	}
	var h [16]byte
	copy(h[:], b)
	rec, ok, err := s.backend.LookupHash(h)
	if !ok && err == nil && s.backend.AskPeers(w, r) {
		return // the hash names no host: the node that has it answered
	}
	s.writePage(w, r, rec, ok, err)
}

func (s *server) pageByURL(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.Query().Get("url")
	if raw == "" {
		WriteError(w, http.StatusBadRequest, "no_url", "give ?url=URL")
		return
	}
	c, err := urlnorm.Canonicalize(raw)
	if err != nil {
		WriteError(w, http.StatusBadRequest, "bad_url", "%v", err)
		return
	}
	if s.backend.RouteToOwner(w, r, urlnorm.HostKey(c)) {
		return
	}
	rec, ok, err := s.backend.Lookup(c)
	s.writePage(w, r, rec, ok, err)
}

func (s *server) writePage(w http.ResponseWriter, r *http.Request, rec frontier.SeenRecord, ok bool, err error) {
	if err != nil {
		writeErr(w, err, "")
		return
	}
	if !ok {
		WriteError(w, http.StatusNotFound, "unknown_page", "this node has not seen that URL")
		return
	}
	h := frontier.URLHash(rec.URL)
	p := Page{URLHash: hex.EncodeToString(h[:]), URL: rec.URL, State: string(rec.State), Status: rec.Status, Reason: rec.Reason, UpdatedAt: rec.At}
	if len(rec.Meta) > 0 {
		var loc archive.Location
		if loc.UnmarshalBinary(rec.Meta) == nil {
			p.WARC = &loc
		}
	}
	withText := !strings.EqualFold(r.URL.Query().Get("text"), "false")
	text, err := s.backend.PageText(r.Context(), rec.URL, withText)
	switch {
	case err == nil:
		p.Corpus = &text
	case errors.Is(err, corpus.ErrNoPage):
	default:
		s.log.Warn("page text", "url", rec.URL, "err", err)
		p.Corpus = &text
	}
	WriteJSON(w, http.StatusOK, p)
}
