package api

import (
	"net/http"
	"strings"

	"github.com/crawlnode/crawlnode/fetch"
)

func (s *server) hostView(w http.ResponseWriter, r *http.Request) {
	host := strings.ToLower(r.PathValue("host"))
	if s.backend.RouteToOwner(w, r, host) {
		return
	}
	st, ok := s.backend.Host(host)
	if !ok {
		WriteError(w, http.StatusNotFound, "unknown_host", "this node has no URL of host %q", host)
		return
	}
	WriteJSON(w, http.StatusOK, hostView(host, st, s.backend.RecentErrors(20, host)))
}

// hostView builds GET /v1/hosts/{host} from what the node knows of the host; robots.txt
// records that do not decode are left out.
func hostView(host string, st HostState, recent []RecentError) HostView {
	v := HostView{HostInfo: st.Info, DelayMS: st.Info.Delay.Milliseconds(), Blocked: st.Blocked, Errors: st.Errors, RecentErrors: recent}
	for _, scheme := range []string{"http", "https"} {
		b, ok := st.Robots[scheme]
		if !ok {
			continue
		}
		rb := new(fetch.Robots)
		if rb.UnmarshalBinary(b) != nil {
			continue
		}
		rv := RobotsView{URL: scheme + "://" + host + "/robots.txt", Status: rb.Status(), FetchedAt: rb.FetchedAt(), Unreachable: rb.Unreachable(), Sitemaps: rb.Sitemaps()}
		if d, ok := rb.CrawlDelay(st.UserAgent); ok {
			rv.CrawlDelay = d.String()
		}
		v.Robots = append(v.Robots, rv)
	}
	return v
}

func (s *server) topHosts(w http.ResponseWriter, r *http.Request) {
	limit := queryInt(r, "top", 10, 1000)
	var by HostOrder
	switch r.URL.Query().Get("by") {
	case "", "queue":
		by = ByQueue
	case "errors":
		by = ByErrors
	default:
		WriteError(w, http.StatusBadRequest, "bad_order", `"by" must be "queue" or "errors"`)
		return
	}
	rows := s.backend.TopHosts(by, limit)
	if rows == nil {
		rows = []TopHost{}
	}
	WriteJSON(w, http.StatusOK, map[string]any{"hosts": rows})
}

func (s *server) recentErrors(w http.ResponseWriter, r *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]any{"errors": s.backend.RecentErrors(queryInt(r, "limit", 20, 200), r.URL.Query().Get("host"))})
}

func (s *server) deadLetters(w http.ResponseWriter, r *http.Request) {
	letters, total, err := s.backend.DeadLetters(queryInt(r, "limit", 20, 1000))
	if err != nil {
		writeErr(w, err, "")
		return
	}
	rows := make([]deadLetter, 0, len(letters))
	for _, d := range letters {
		rows = append(rows, deadLetter{d.URL, d.Attempts, d.Status, d.LastErr, d.At})
	}
	WriteJSON(w, http.StatusOK, map[string]any{"dead_letters": rows, "total": total})
}
